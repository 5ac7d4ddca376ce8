"""Atomic file writes: every file the project writes goes through these.

A reader sees either the old file or the new one, never a torn write: the data goes to a
temporary file in the same directory (same filesystem, so the rename is atomic), is fsynced,
then `os.replace`d over the target; the directory is fsynced so the rename survives a crash.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

TMP_SUFFIX = ".tmp"


def _fsync_dir(directory: Path) -> None:
    # Best effort: some filesystems (and Windows) cannot open a directory for fsync.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(
    path: str | os.PathLike, data: bytes | bytearray | memoryview, *, mode: int | None = None
) -> Path:
    """Write `data` to `path` atomically (parents created). Returns the path. `mode`: the
    file's permissions (default: mkstemp's 0600, private to the owner). An OSError names `path`
    (see _name_the_target)."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Hidden temp name in the same directory; unique so concurrent writers never collide.
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TMP_SUFFIX, dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        _name_the_target(e, path)
        raise
    _fsync_dir(path.parent)
    return path


def _name_the_target(e: BaseException, path: Path) -> None:
    """A write on a full disk fails with ENOSPC and no file name (write and fsync take a file
    descriptor), and a failing mkstemp or replace names the hidden temp file: the error then
    names the file being written, which is what the user can act on (`error: ... (FILE)`)."""
    if not isinstance(e, OSError):
        return
    name = os.path.basename(str(e.filename or ""))
    if e.filename is None or (name.startswith(f".{path.name}.") and name.endswith(TMP_SUFFIX)):
        e.filename = str(path)


def atomic_write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> Path:
    return atomic_write_bytes(path, text.encode(encoding))


def atomic_write_json(path: str | os.PathLike, obj: Any, *, indent: int | None = 2) -> Path:
    """JSON with a trailing newline; non-ASCII kept readable."""
    text = json.dumps(obj, indent=indent, ensure_ascii=False, sort_keys=False)
    return atomic_write_text(path, text + "\n")


def cache_dir() -> Path:
    """The cache root (not created here: callers create what they write)."""
    env = os.environ.get("LOGICROUTE_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "logicroute"


def content_hash(data: str | bytes) -> str:
    """sha1 hex digest of text (UTF-8, lone surrogates passed through) or of bytes.

    Chunk ids, passage and document ids, KB file fingerprints and embedding-cache keys are
    built from it and persisted, so what it returns for a given input must never change.
    Callers cut the 40 hex characters to the length their ids use."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    return hashlib.sha1(data).hexdigest()
