"""What a server is started with: where it listens, who may call it, and its limits.

A server that listens beyond this machine answers only callers that present the bearer token
of $LOGICROUTE_SERVER_KEY: anyone who can reach the port could otherwise spend the LLM budget
and change the knowledge base.
"""

from __future__ import annotations

import hmac
import os
from dataclasses import dataclass

from engine.base.errors import LogicRouteError

KEY_ENV = "LOGICROUTE_SERVER_KEY"
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
MIN_KEY_CHARS = 16  # a short key is guessed; hmac.compare_digest only hides timing


@dataclass(frozen=True)
class ServeConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None  # None: no token asked (allowed on a local host only)
    workers: int = 1  # answers computed at once: 1 for the local model, N for a remote endpoint
    queue_size: int = 16  # requests waiting for a worker; one more is answered 503
    deadline_seconds: float = 300.0  # a request's whole life: queue wait + answer
    max_body_bytes: int = 64 * 1024  # a question, a chat, a route request
    max_document_bytes: int = 8 * 1024 * 1024  # POST /documents
    title: str = "logicroute"

    def __post_init__(self) -> None:
        if self.workers < 1 or self.queue_size < 0:
            raise LogicRouteError(f"workers must be >= 1 and queue size >= 0, got {self.workers}, {self.queue_size}")
        if not self.deadline_seconds > 0:
            raise LogicRouteError(f"the request deadline must be > 0 seconds, got {self.deadline_seconds}")
        if self.api_key is not None and len(self.api_key) < MIN_KEY_CHARS:
            raise LogicRouteError(f"${KEY_ENV} must have at least {MIN_KEY_CHARS} characters")
        if self.api_key is None and not is_local_host(self.host):
            raise LogicRouteError(
                f"listening on {self.host} lets other machines call the server: set ${KEY_ENV} to a secret of "
                f"at least {MIN_KEY_CHARS} characters (callers send 'Authorization: Bearer <key>'), "
                "or listen on 127.0.0.1"
            )


def is_local_host(host: str) -> bool:
    return host in LOCAL_HOSTS


def key_from_env() -> str | None:
    """$LOGICROUTE_SERVER_KEY, or None when unset or blank."""
    return (os.environ.get(KEY_ENV) or "").strip() or None


def bearer_matches(authorization: str | None, key: str) -> bool:
    """Whether an Authorization header carries `key` as its bearer token, compared in constant
    time (a byte-by-byte compare leaks the matching prefix's length through its timing)."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(token.strip().encode(), key.encode())
