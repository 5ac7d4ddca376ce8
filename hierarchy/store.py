"""The one commit protocol of the knowledge base and its summary layers: a folder of data files
and one JSON record, whose "files" entry says which data files are committed.

A commit writes every data file atomically, then the record LAST: the record is the commit
point. A data file about to be overwritten is first hard-linked to `<name>.prev`; if the change
dies before the record lands, the snapshots are put back, and a reader that finds a data file
not matching the record's fingerprint takes the matching `.prev` instead (`read_committed`).
Readers never change a file; a writer holds an exclusive lock on the folder while it commits,
and repairs what a writer that died left behind before writing (`recover`).

The knowledge base overwrites fixed file names and records a fingerprint of each; the summary
layers write every generation under new names and record the names, so they never overwrite a
file and drop older generations once the new record has landed (`prune`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from contextlib import contextmanager
from pathlib import Path

from engine.base.errors import KBCorruptError, KBError
from engine.base.files import TMP_SUFFIX, atomic_write_bytes, atomic_write_json, content_hash

PREV = ".prev"
LOCK = ".lock"


def fingerprint(data: bytes) -> dict:
    return {"bytes": len(data), "sha1": content_hash(data)}


@contextmanager
def dir_lock(path: Path):
    """Exclusive advisory lock on `path/.lock` while a change is written (POSIX; elsewhere a no-op)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(path / LOCK, "a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def recorded_files(record_path: Path) -> dict | None:
    """The "files" entry of the record as it is on disk now (None when absent or unreadable)."""
    try:
        return json.loads(record_path.read_text(encoding="utf-8")).get("files")
    except (OSError, ValueError, AttributeError):
        return None


def read_committed(directory: Path, name: str, fp: dict, hint: str) -> bytes:
    """The committed version of a data file: the current one if it matches fingerprint `fp`, else
    a matching `.prev` (a change in progress, or one that died). Reading never changes a file:
    a reader may run beside a live writer, so only the writer repairs (`recover`, under the lock).
    KBCorruptError, ending with `hint`, when neither matches."""
    cur, prev = directory / name, directory / (name + PREV)
    data = _read(cur)
    if data is not None and fingerprint(data) == fp:
        return data
    old = _read(prev)
    if old is not None and fingerprint(old) == fp:
        return old
    state = "is missing" if data is None else "does not match the manifest (changed or partly written)"
    raise KBCorruptError(f"knowledge base file {cur} {state}; {hint}")


def recover(directory: Path, name: str, fp: dict, hint: str) -> None:
    """Under the writer's lock: finish what a change that died left behind. Its `.prev` snapshot
    goes when the current file is the committed one, and is put back when the snapshot is."""
    cur, prev = directory / name, directory / (name + PREV)
    if not prev.exists():
        return
    data = _read(cur)
    if data is not None and fingerprint(data) == fp:
        _unlink(prev)  # the change committed but died before cleaning up
        return
    read_committed(directory, name, fp, hint)  # KBCorruptError unless the snapshot matches
    os.replace(prev, cur)  # roll the interrupted change back


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:  # a writer may remove a snapshot between a check and the read
        return None


def commit(
    directory: Path,
    record_name: str,
    record: dict,
    payload: Mapping[str, bytes],
    *,
    on_commit: Callable[[], None] | None = None,
    expected_files: dict | None = None,
    hint: str = "",
    prune: bool = False,
) -> None:
    """Write `payload` (file name -> bytes), then `record` as `directory/record_name`: one change.

    expected_files: the "files" entry of the record this change builds on. When given, a record
    on disk with other files means another process committed meanwhile: KBError, nothing
    written; and snapshots a failed rollback left are restored first (`hint` ends the error when
    they do not match). on_commit runs once the record has landed, also when an error comes
    after that (the change is committed; the error is re-raised). An error before that puts the
    snapshots back. prune: the folder holds this store alone, so after the commit every visible
    file the record does not name goes (older generations, files of writers that died)."""
    record_path = directory / record_name
    directory.mkdir(parents=True, exist_ok=True)
    with dir_lock(directory):
        if expected_files is not None:
            if (recorded_files(record_path) or {}) != expected_files:
                raise KBError(
                    f"knowledge base {directory} was changed by another process since it was opened; "
                    f"open it again and retry"
                )
            for name, fp in expected_files.items():
                recover(directory, name, fp, hint)
        _remove_temp_files(directory, (record_name, *payload))
        linked: list[str] = []
        try:
            for name in payload:
                if _snapshot(directory, name):
                    linked.append(name)
            for name, data in payload.items():
                atomic_write_bytes(directory / name, data)
            atomic_write_json(record_path, record)  # the commit point
        except BaseException:
            if _landed(record_path, record):
                if on_commit is not None:
                    on_commit()  # interrupted after the record landed: the change is committed, keep it
            else:
                restore_snapshots(directory, linked)
            raise
        for name in linked:
            _unlink(directory / (name + PREV))
        if prune:
            keep = {record_name, *payload}
            for f in directory.iterdir():
                if f.is_file() and f.name not in keep and not f.name.startswith("."):
                    _unlink(f)
        if on_commit is not None:
            on_commit()


def _landed(record_path: Path, record: dict) -> bool:
    """Whether the record on disk is `record` (as JSON reads it back)."""
    try:
        return json.loads(record_path.read_text(encoding="utf-8")) == json.loads(json.dumps(record))
    except (OSError, ValueError, TypeError):
        return False


def restore_snapshots(directory: Path, names: Iterable[str]) -> None:
    """Put the `.prev` snapshots back (best effort; the next writer's `recover` repeats this if we die here)."""
    for name in names:
        with contextlib.suppress(OSError):
            os.replace(directory / (name + PREV), directory / name)


def _snapshot(directory: Path, name: str) -> bool:
    """Keep the current version of a data file as `.prev`; False when there is none."""
    cur, prev = directory / name, directory / (name + PREV)
    if not cur.exists():
        return False
    with contextlib.suppress(FileNotFoundError):
        prev.unlink()
    try:
        os.link(cur, prev)  # cheap snapshot: the atomic replace that follows gives `cur` a new inode
    except OSError:
        shutil.copy2(cur, prev)
    return True


def _remove_temp_files(directory: Path, names: Iterable[str]) -> None:
    """Temp files of a writer that died."""
    for name in names:
        for t in directory.glob(f".{name}.*{TMP_SUFFIX}"):
            _unlink(t)


def _unlink(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
