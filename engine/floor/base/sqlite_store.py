"""Opening a SQLite file shared by threads and processes (the LLM and embedding caches)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

_SETUP_ATTEMPTS = 20


def open_shared_sqlite(
    path: Path, schema: str, *, setup: bool = True, check_same_thread: bool = True
) -> sqlite3.Connection:
    """A connection in autocommit mode with a 30 s busy wait; `setup` also switches the file to
    WAL (readers never block the writer) and creates `schema`.

    Switching to WAL and creating the table take the write lock, and SQLite answers "database
    is locked" at once (no busy wait) when another connection does the same on a fresh file,
    so setup retries with backoff instead of failing the run.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None, check_same_thread=check_same_thread)
    conn.execute("PRAGMA busy_timeout=30000")
    conn.execute("PRAGMA synchronous=NORMAL")
    if not setup:
        return conn
    for attempt in range(_SETUP_ATTEMPTS):
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(schema)
            return conn
        except sqlite3.OperationalError as e:
            if ("locked" not in str(e) and "busy" not in str(e)) or attempt == _SETUP_ATTEMPTS - 1:
                conn.close()
                raise
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable: the last attempt returns or raises")
