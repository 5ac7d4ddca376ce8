"""The one commit protocol of the knowledge base and its summary layers: a folder of data files
and one JSON record, whose "files" entry says which data files are committed.

A commit writes every data file atomically, then the record LAST: the record is the commit
point. A data file about to be overwritten is first hard-linked to `<name>.prev`; if the change
dies before the record lands, the snapshots are put back, and a reader that finds a data file
not matching the record's fingerprint takes the matching `.prev` instead (`read_committed`).
Readers never change a file; a writer holds an exclusive lock on the folder while it commits,
and repairs what a writer that died left behind before writing (`recover`). The lock is
re-entrant within a thread, so a caller can hold it across several commits: one write
transaction (the KB's chunks, then the summary layers that must follow them).

The knowledge base writes each change as a segment under new names (hierarchy.kb_segments) and
overwrites only a persisted HNSW graph, recording a fingerprint of every file; the summary
layers write every generation under new names and record the names. Neither overwrites a
committed segment or generation, and both drop the files their record no longer names once it
has landed (hierarchy.kb_segments.prune; `prune` here).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from engine.floor.base.errors import KBCorruptError, KBError, KBReadOnlyError
from engine.floor.base.files import TMP_SUFFIX, atomic_write_bytes, atomic_write_json, content_hash

PREV = ".prev"
LOCK = ".lock"


def fingerprint(data: bytes) -> dict:
    return {"bytes": len(data), "sha1": content_hash(data)}


_HELD = threading.local()  # folders whose lock this thread holds -> nesting depth


def _held() -> dict[str, int]:
    if not hasattr(_HELD, "depth"):
        _HELD.depth = {}
    return _HELD.depth


@contextmanager
def dir_lock(path: Path) -> Iterator[None]:
    """Exclusive advisory lock on `path/.lock` while a change is written (POSIX; elsewhere a
    no-op); the folder is created first. Re-entrant within a thread (flock would block on a
    second descriptor of the same process). KBReadOnlyError when the folder cannot be written."""
    key = str(Path(path).resolve())
    depth = _held()
    if depth.get(key):
        depth[key] += 1
        try:
            yield
        finally:
            depth[key] -= 1
        return
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    fd = _open_lock(Path(path))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        depth[key] = 1
        try:
            yield
        finally:
            depth.pop(key, None)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _open_lock(path: Path) -> int:
    """The lock file's descriptor: the first write a change makes, so a read-only folder is
    reported here, before any work is done."""
    if path.exists() and not path.is_dir():
        raise KBError(f"cannot create a knowledge base at {path}: it is a file")
    try:
        path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK):  # root passes this check unless the filesystem is read-only
            raise PermissionError(errno.EACCES, "no write permission")
        return os.open(path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        ro = read_only_error(path, e)
        if ro is None:
            raise
        raise ro from None


def read_only_error(path: Path, e: BaseException) -> KBReadOnlyError | None:
    """The one-line error for a write refused by permissions or a read-only filesystem, else None."""
    if isinstance(e, PermissionError) or (isinstance(e, OSError) and e.errno == errno.EROFS):
        why = e.strerror or str(e)
        return KBReadOnlyError(
            f"knowledge base {path} is read-only ({why}): it can be opened and searched, not changed"
        )
    return None


@contextmanager
def probe_lock(path: Path) -> Iterator[bool]:
    """For a reader that wants a quiet moment (`logicroute check`): True, holding a shared lock
    that makes writers wait, when no writer holds the folder; False at once when one does.
    Opens `.lock` read-only and never creates it: a reader changes no file."""
    try:
        import fcntl

        fd = os.open(Path(path) / LOCK, os.O_RDONLY)
    except (ImportError, OSError):  # no lock file: no writer has ever started here
        yield True
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def committed_record(record_path: Path) -> dict | None:
    """The record as it is on disk now (None when absent or unreadable)."""
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def recorded_files(record_path: Path) -> dict | None:
    """The "files" entry of the record as it is on disk now (None when absent or unreadable)."""
    return (committed_record(record_path) or {}).get("files")


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


def file_state(directory: Path, name: str, fp: dict) -> str:
    """How a data file stands against its fingerprint, read-only: "ok" (it is the committed
    version), "prev" (its `.prev` snapshot is: a change under way, or one that died, which the
    next writer rolls back), "missing" or "mismatch"."""
    data = _read(directory / name)
    if data is not None and fingerprint(data) == fp:
        return "ok"
    old = _read(directory / (name + PREV))
    if old is not None and fingerprint(old) == fp:
        return "prev"
    return "missing" if data is None else "mismatch"


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
    check: Callable[[], None] | None = None,
    hint: str = "",
    prune: bool = False,
) -> None:
    """Write `payload` (file name -> bytes), then `record` as `directory/record_name`: one change.

    expected_files: the "files" entry of the record this change builds on. When given, a record
    on disk with other files means another process committed meanwhile: KBError, nothing
    written; and snapshots a failed rollback left are restored first (`hint` ends the error when
    they do not match). check: runs under the lock before anything is written and raises to
    refuse the change (what it is based on has moved). on_commit runs once the record has
    landed, also when an error comes after that (the change is committed; the error is
    re-raised). An error before that puts the snapshots back. prune: the folder holds this store
    alone, so after the commit every visible file the record does not name goes (older
    generations, files of writers that died). KBReadOnlyError when the folder cannot be written."""
    record_path = directory / record_name
    with dir_lock(directory):
        if expected_files is not None:
            if (recorded_files(record_path) or {}) != expected_files:
                raise changed_error(directory)
            for name, fp in expected_files.items():
                recover(directory, name, fp, hint)
        if check is not None:
            check()
        _write(directory, record_name, record, payload, on_commit)
        if prune:
            keep = {record_name, *payload}
            for f in directory.iterdir():
                if f.is_file() and f.name not in keep and not f.name.startswith("."):
                    _unlink(f)
        if on_commit is not None:
            on_commit()


def changed_error(directory: Path) -> KBError:
    return KBError(
        f"knowledge base {directory} was changed by another process since it was opened; open it again and retry"
    )


def _write(
    directory: Path, record_name: str, record: dict, payload: Mapping[str, bytes], on_commit: Callable[[], None] | None
) -> None:
    """Snapshot, write the data files, then the record; undo on failure (see commit)."""
    record_path = directory / record_name
    _remove_temp_files(directory, (record_name, *payload))
    linked: list[str] = []
    try:
        for name in payload:
            if _snapshot(directory, name):
                linked.append(name)
        for name, data in payload.items():
            atomic_write_bytes(directory / name, data)
        atomic_write_json(record_path, record)  # the commit point
    except BaseException as e:
        if _landed(record_path, record):
            if on_commit is not None:
                on_commit()  # interrupted after the record landed: the change is committed, keep it
        else:
            restore_snapshots(directory, linked)
        ro = read_only_error(directory, e)
        if ro is not None:
            raise ro from e
        raise
    for name in linked:
        _unlink(directory / (name + PREV))


def as_json(obj):
    """A deep copy as JSON reads it back: how a record on disk compares with one in memory."""
    return json.loads(json.dumps(obj))


def _landed(record_path: Path, record: dict) -> bool:
    """Whether the record on disk is `record` (as JSON reads it back)."""
    try:
        return committed_record(record_path) == as_json(record)
    except (TypeError, ValueError):
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
        try:
            shutil.copy2(cur, prev)
        except OSError as e:
            e.filename = e.filename or str(prev)  # a full disk (ENOSPC) names no file; the user needs one
            raise
    return True


def _remove_temp_files(directory: Path, names: Iterable[str]) -> None:
    """Temp files of a writer that died."""
    for name in names:
        for t in directory.glob(f".{name}.*{TMP_SUFFIX}"):
            _unlink(t)


def _unlink(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()
