"""Resumable JSONL result files: one JSON object per line, appended and flushed row by row,
read back on a rerun so that finished work is skipped.

Benchmarks (results.jsonl), the component benchmarks and label files all use this one format.
An interrupted write leaves a torn last line: reading ignores it, and opening a store for
appending cuts it off, so the next row starts on a line of its own. A malformed line elsewhere
is skipped and counted, or with strict=True an error naming the line (a label file is an input
to training: a damaged one must not train a router silently).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path

from engine.floor.base.errors import DataFormatError, LogicRouteError
from engine.floor.base.files import atomic_write_bytes

# An append is flushed at once; every FSYNC_EVERY-th (the first included) also reaches the disk.
FSYNC_EVERY = 50


@dataclass
class _Scan:
    rows: list[dict]
    bad_lines: int
    clean_end: int  # bytes up to the end of the last line kept (a torn last line excluded)
    size: int
    ends_with_newline: bool


def _scan(path: Path, strict: bool) -> _Scan:
    raw = path.read_bytes() if path.exists() else b""
    pieces = raw.split(b"\n")  # ends with b"" when the file ends with a newline
    last = max(i for i, p in enumerate(pieces) if p.strip()) if raw.strip() else -1
    rows: list[dict] = []
    bad = pos = clean_end = 0
    for i, line in enumerate(pieces):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError:
                bad += 1
                if i == last:
                    break  # the torn last row of an interrupted run
                if strict:
                    raise DataFormatError(f"{path}:{i + 1}: malformed JSON row") from None
        pos += len(line) + 1
        clean_end = min(pos, len(raw))
    return _Scan(rows, bad, clean_end, len(raw), raw.endswith(b"\n"))


def read_jsonl(path: str | Path, *, strict: bool = False) -> list[dict]:
    """The readable rows of a JSONL file in file order ([] when there is no file). Never
    writes: a torn last line is only skipped."""
    return _scan(Path(path), strict).rows


class JsonlStore:
    """An append-only JSONL file read back into memory.

    rows: every readable row in file order, then those appended. With `key`, `by_key` maps
    key(row) to the last row with that key, and `get` / `in` look rows up (a row written
    again replaces the earlier one). Appends are thread-safe."""

    def __init__(self, path: str | Path, key: Callable[[dict], Hashable] | None = None, *, strict: bool = False):
        self.path = Path(path)
        self._key = key
        scan = _scan(self.path, strict)
        self.rows = scan.rows
        self.bad_lines = scan.bad_lines
        self.by_key: dict = {key(r): r for r in self.rows} if key is not None else {}
        self._lock = threading.Lock()
        self._appended = 0
        if scan.clean_end < scan.size:
            with open(self.path, "r+b") as f:
                f.truncate(scan.clean_end)
        elif scan.size and not scan.ends_with_newline:
            with open(self.path, "ab") as f:
                f.write(b"\n")

    def get(self, key: Hashable) -> dict | None:
        return self.by_key.get(key)

    def __contains__(self, key: Hashable) -> bool:
        return key in self.by_key

    def append(self, row: dict) -> None:
        """Write one row as a line and flush it: an interruption loses at most this row."""
        line = json.dumps(row, ensure_ascii=False) + "\n"
        with self._lock, _file_lock(self.path):
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
                if self._appended % FSYNC_EVERY == 0:
                    os.fsync(f.fileno())
            self._appended += 1
            self.rows.append(row)
            if self._key is not None:
                self.by_key[self._key(row)] = row

    def replace(self, row: dict) -> None:
        """Put `row` in place of the row with its key and rewrite the whole file atomically (a
        temp file renamed over it): an interruption leaves the old file or the new one, never a
        mix. The file is read again first, under the lock appends take too, so rows another
        process wrote meanwhile are kept. For files small enough to rewrite, such as label
        files; needs a keyed store."""
        if self._key is None:
            raise TypeError("replace needs a keyed store")
        key = self._key(row)
        with self._lock, _file_lock(self.path):
            current = _scan(self.path, strict=True).rows
            if not any(self._key(r) == key for r in current):
                raise KeyError(key)
            self.rows = [row if self._key(r) == key else r for r in current]
            self.by_key = {self._key(r): r for r in self.rows}
            text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self.rows)
            atomic_write_bytes(self.path, text.encode("utf-8"), mode=0o644)


@contextlib.contextmanager
def _file_lock(path: Path):
    """An exclusive lock between processes writing the files of one folder (flock on the folder:
    a lock on the file itself would not survive replace's rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


@contextlib.contextmanager
def exclusive_folder(folder: str | os.PathLike, what: str):
    """Hold `folder` for one process: a second process gets a LogicRouteError at once, instead
    of both appending to the same files (results would be duplicated or torn). The lock is an
    flock on folder/.lock, released when the process ends, however it ends."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a+", encoding="utf-8") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read().strip() or "?"
            raise LogicRouteError(
                f"{folder} is in use by another {what} (pid {holder}): wait for it to finish, or choose another folder"
            ) from None
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        try:
            yield folder
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
