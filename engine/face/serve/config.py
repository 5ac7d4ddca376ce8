"""What a server is started with: where it listens, who may call it, and its limits.

A server that listens beyond this machine answers only callers that present the bearer token
of $LOGICROUTE_SERVER_KEY: anyone who can reach the port could otherwise spend the LLM budget
and change the knowledge base.

A server without a key is reachable from every web page its user visits: a page can rebind its
own name to 127.0.0.1 (DNS rebinding) and then call the server as same-origin. So without a key
it answers only requests whose Host header names it (the local names, its --host, each
--allowed-host), it takes writes (adding, deleting documents) only when started with
--allow-writes, and every request that changes state or spends the LLM must be JSON: a
cross-site form or a "simple" fetch cannot send application/json without a CORS preflight, which
this server never grants.
"""

from __future__ import annotations

import hmac
import os
from dataclasses import dataclass

from engine.floor.base.errors import LogicRouteError

KEY_ENV = "LOGICROUTE_SERVER_KEY"
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
WRITE_PATHS = ("/documents",)  # what changes the server's state: POST and DELETE under these
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
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
    allowed_hosts: tuple[str, ...] = ()  # names a keyless server answers besides its own (--allowed-host)
    allow_writes: bool = False  # a keyless server takes POST/DELETE /documents (--allow-writes)

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

    def answers_host(self, host_header: str | None) -> bool:
        """Whether a request with this Host header is for this server. With a key every Host is
        answered (the key, not the name, is the credential); without one, only this server's
        own names: a rebound attacker's name is refused."""
        if self.api_key is not None:
            return True
        name = host_name(host_header or "")
        return name is not None and name in {*LOCAL_HOSTS, self.host.lower(), *(h.lower() for h in self.allowed_hosts)}

    def takes_writes(self) -> bool:
        return self.api_key is not None or self.allow_writes


def is_local_host(host: str) -> bool:
    return host in LOCAL_HOSTS


def host_name(header: str) -> str | None:
    """The name in a Host header, lower-cased, without port, brackets or a trailing dot:
    'LocalHost.:8000' -> 'localhost', '[::1]:8000' -> '::1'. None for an empty or malformed one."""
    header = header.strip().lower()
    if header.startswith("["):
        name, close, rest = header[1:].partition("]")
        if not close or (rest and not rest.startswith(":")):
            return None
    else:
        name, _, port = header.partition(":")
        if ":" in port:  # an unbracketed IPv6 address is not a valid Host
            return None
    name = name.rstrip(".")
    return name or None


def is_write(method: str, path: str) -> bool:
    """A request that changes the knowledge base."""
    return method in ("POST", "PUT", "PATCH", "DELETE") and any(
        path == p or path.startswith(p + "/") for p in WRITE_PATHS
    )


def is_json(content_type: str | None) -> bool:
    """application/json or application/*+json (any parameters)."""
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


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
