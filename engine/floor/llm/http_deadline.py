"""A wall-clock limit on a whole HTTP call, streaming included.

The HTTP client's timeouts bound each wait for the network (connect, one read, one write), so an
endpoint that sends one byte every half second is never cut. Here every socket operation of a
call made inside `total_deadline(end)` waits at most until `end`; past it the operation raises
the HTTP library's own timeout, which the openai client reports as APITimeoutError. Nothing runs
in another thread: the call ends in the caller's thread, and the connection pool closes a
connection whose response it could not finish, so an abandoned call leaves no thread and no
socket behind.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import ModuleType
from typing import Any

# When the current call must be over (time.perf_counter); None: only the client's own timeouts.
_CALL_END: ContextVar[float | None] = ContextVar("logicroute_http_call_end", default=None)
_SHARED: Any = None
_SHARED_LOCK = threading.Lock()


def shared_client() -> Any:
    """The process's one HTTP client for the openai clients of every endpoint, with the deadline
    applied. One, because making it loads the certificate store (a tenth of a second, seconds on
    a busy machine, which a first call with a deadline of a second cannot spare) and its pool
    keeps connections per host anyway; timeouts are given per request, so endpoints share it."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            import openai

            _SHARED = with_total_deadline(openai.DefaultHttpxClient())
        return _SHARED


@contextmanager
def total_deadline(end: float) -> Iterator[None]:
    """Every network wait of the HTTP calls made inside (in this thread) ends by `end`
    (time.perf_counter)."""
    token = _CALL_END.set(end)
    try:
        yield
    finally:
        _CALL_END.reset(token)


def with_total_deadline(client: Any) -> Any:
    """`client` (the openai client's httpx Client) with the deadline applied to every transport
    it may use: the default one and those of proxies from the environment.

    httpx builds its connection pool without a way to pass a network backend, the pool's hook for
    the sockets it opens; so each pool's backend is wrapped in place. The pool's own package
    (httpcore, or httpcore2 under openai 3) supplies the timeout errors, so the client maps them
    as its own. tests/engine/test_llm_faults.py checks that a trickling endpoint is cut: a client
    that moves these attributes fails there, not silently."""
    for transport in (client._transport, *client._mounts.values()):
        pool = getattr(transport, "_pool", None)
        if pool is not None and not isinstance(pool._network_backend, _DeadlineBackend):
            lib = importlib.import_module(type(pool).__module__.partition(".")[0])
            pool._network_backend = _DeadlineBackend(pool._network_backend, lib)
    return client


def _within(timeout: float | None, error: type[Exception]) -> float | None:
    """`timeout` for one socket operation, shortened to what is left of the call; `error` when
    nothing is left."""
    end = _CALL_END.get()
    if end is None:
        return timeout
    left = end - time.perf_counter()
    if left <= 0:
        raise error("the call's total time is up")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream:
    """A network stream (the pool's interface: read, write, close, start_tls, get_extra_info)
    whose every wait ends by the call's deadline."""

    def __init__(self, inner: Any, lib: ModuleType) -> None:
        self._inner, self._lib = inner, lib

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _within(timeout, self._lib.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _within(timeout, self._lib.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context, server_hostname=None, timeout=None) -> _DeadlineStream:
        wait = _within(timeout, self._lib.ConnectTimeout)
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, wait), self._lib)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend:
    """A network backend whose connections are _DeadlineStreams."""

    def __init__(self, inner: Any, lib: ModuleType) -> None:
        self._inner, self._lib = inner, lib

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None) -> _DeadlineStream:
        wait = _within(timeout, self._lib.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_tcp(host, port, wait, local_address, socket_options), self._lib)

    def connect_unix_socket(self, path, timeout=None, socket_options=None) -> _DeadlineStream:
        wait = _within(timeout, self._lib.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_unix_socket(path, wait, socket_options), self._lib)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)
