"""An on-disk cache in front of any LLM: the same call twice costs one real call.

SQLite in WAL mode, one connection per thread, so threads and processes (parallel
benchmarks) can share one file. A call's key is everything that decides its output (cache_key);
its row is its successful completion, never an error, and a blank reply is never a success: it
is not stored, and one stored before is asked again. A hit reports the original token counts
(what the answer would cost uncached) with cached=True and seconds=0, and the attempts, finish
reason and structured-output way of the original call, so its trace reads the same.

A structured reply that failed validation is stored as well, under the key of the request that
attempt sent plus its attempt number (engine.floor.llm.structured.attempt_log): a rerun replays it and
the retry after it instead of asking again, so a structured call that failed, or succeeded only
on its retry, costs nothing the second time and ends the same way.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
import warnings
from pathlib import Path

from engine.floor.base.errors import LogicRouteError
from engine.floor.base.sqlite_store import open_shared_sqlite
from engine.floor.base.types import Completion
from engine.floor.llm.base import LLM
from engine.floor.llm.structured import AttemptLog, attempt_log

_SCHEMA = """CREATE TABLE IF NOT EXISTS completions (
    key TEXT PRIMARY KEY,
    llm TEXT NOT NULL,
    text TEXT NOT NULL,
    data TEXT,               -- JSON of the validated object, NULL for plain calls
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    seconds REAL NOT NULL,   -- of the original call
    model TEXT NOT NULL,
    created REAL NOT NULL,
    prompt_evaluated INTEGER, -- of prompt_tokens, those the backend computed; NULL = not known
    token_logprobs TEXT,      -- JSON list of the generated tokens' log-probabilities; NULL = not known
    attempts INTEGER,         -- requests the completion took (a structured retry: 2); NULL = 1
    finish_reason TEXT,       -- "stop", "length"; NULL = not known
    structured_via TEXT       -- Completion.structured_via; NULL = the backend's own constraint
)"""


def default_cache_path() -> Path:
    from engine.floor.base.files import cache_dir

    return cache_dir() / "llm_cache.sqlite"


def cache_key(llm_name: str, messages: list[dict], schema: dict | None, max_tokens: int, temperature: float) -> str:
    """sha256 of the canonical JSON of everything that decides the output."""
    blob = json.dumps(
        {"llm": llm_name, "messages": messages, "schema": schema, "max_tokens": max_tokens, "temperature": temperature},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


_ADDED_COLUMNS = {
    "prompt_evaluated": "INTEGER",
    "token_logprobs": "TEXT",
    "attempts": "INTEGER",
    "finish_reason": "TEXT",
    "structured_via": "TEXT",
}
_COLUMNS = (
    "text, data, prompt_tokens, completion_tokens, model, seconds, prompt_evaluated, token_logprobs, attempts, "
    "finish_reason, structured_via"
)


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    """A cache file written before a column existed gets it (NULL = not known), so its entries
    stay valid."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(completions)")}
    for name, kind in _ADDED_COLUMNS.items():
        if name in have:
            continue
        try:
            conn.execute(f"ALTER TABLE completions ADD COLUMN {name} {kind}")
        except sqlite3.OperationalError as e:  # another process added it first
            if "duplicate column" not in str(e):
                raise


class CachedLLM:
    def __init__(self, inner: LLM, path: str | Path | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = Path(path) if path is not None else default_cache_path()
        self._local = threading.local()  # sqlite connections must not cross threads
        self._init_lock = threading.Lock()
        self._ready = False

    def _db(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                with self._init_lock:  # the first connection sets WAL and the table, once
                    conn = open_shared_sqlite(self.path, _SCHEMA, setup=not self._ready)
                    if not self._ready:
                        _add_missing_columns(conn)
                    self._ready = True
            except (sqlite3.Error, OSError) as e:
                raise LogicRouteError(
                    f"LLM cache {self.path} is unusable ({e}): delete it, or run with --no-cache"
                ) from e
            self._local.conn = conn
        return conn

    def chat(
        self, messages: list[dict], *, schema: dict | None = None, max_tokens: int = 256, temperature: float = 0.0
    ) -> Completion:
        key = cache_key(self.name, messages, schema, max_tokens, temperature)
        hit = self._hit(key)
        if hit is not None:
            return hit
        # errors (StructuredOutputError, LLMError) propagate and are never stored; a structured
        # call's failed attempts are, under keys of their own
        if schema is None:
            c = self.inner.chat(messages, max_tokens=max_tokens, temperature=temperature)
        else:
            with attempt_log(self._attempts(schema, max_tokens, temperature)):
                c = self.inner.chat(messages, schema=schema, max_tokens=max_tokens, temperature=temperature)
        self._put(key, c)
        return c

    def _attempts(self, schema: dict, max_tokens: int, temperature: float) -> AttemptLog:
        """Attempt n of a structured call is kept under the key of the request it sent, plus n:
        the retry after a reply is a request of its own, and an attempt never answers another."""

        def key(attempt: int, messages: list[dict]) -> str:
            return f"{cache_key(self.name, messages, schema, max_tokens, temperature)}#attempt{attempt}"

        return AttemptLog(
            replay=lambda attempt, messages: self._hit(key(attempt, messages)),
            keep=lambda attempt, messages, c: self._put(key(attempt, messages), c),
        )

    def _hit(self, key: str) -> Completion | None:
        row = self._get(key)
        if row is None or not row[0].strip():
            return None
        text, data, pt, ct, model, secs, evaluated, logprobs, attempts, finish_reason, via = row
        return Completion(
            text=text,
            prompt_tokens=pt,
            completion_tokens=ct,
            seconds=0.0,
            data=None if data is None else json.loads(data),
            cached=True,
            model=model,
            original_seconds=secs,
            attempts=attempts or 1,
            prompt_tokens_evaluated=evaluated,
            token_logprobs=None if logprobs is None else json.loads(logprobs),
            finish_reason=finish_reason,
            structured_via=via,
        )

    def _get(self, key: str) -> tuple | None:
        try:
            return self._db().execute(f"SELECT {_COLUMNS} FROM completions WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as e:
            raise LogicRouteError(
                f"LLM cache {self.path} is unreadable ({e}): delete it, or run with --no-cache"
            ) from e

    def _put(self, key: str, c: Completion) -> None:
        if not c.text.strip():  # a blank reply is a failed call: served again, it would outlive the fault
            return
        data = None if c.data is None else json.dumps(c.data, ensure_ascii=False)
        try:
            self._db().execute(
                "INSERT OR REPLACE INTO completions (key, llm, text, data, prompt_tokens, completion_tokens, "
                "seconds, model, created, prompt_evaluated, token_logprobs, attempts, finish_reason, structured_via) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    self.name,
                    c.text,
                    data,
                    c.prompt_tokens,
                    c.completion_tokens,
                    c.seconds,
                    c.model,
                    time.time(),
                    c.prompt_tokens_evaluated,
                    None if c.token_logprobs is None else json.dumps([round(x, 5) for x in c.token_logprobs]),
                    c.attempts,
                    c.finish_reason,
                    c.structured_via,
                ),
            )
        except (sqlite3.Error, LogicRouteError) as e:
            # the answer is good; losing its cache entry must not lose the answer
            warnings.warn(f"LLM cache {self.path} not written ({e})", RuntimeWarning, stacklevel=3)

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
