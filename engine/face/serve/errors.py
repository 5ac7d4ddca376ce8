"""Every failure a client can see: a status code and a JSON body in OpenAI's error shape,

    {"error": {"message": "...", "type": "invalid_request_error", "code": "bad_question"}}

so an OpenAI client raises its own typed exception (BadRequestError, RateLimitError, ...) and
a native client reads the same fields. Tracebacks stay in the server log."""

from __future__ import annotations

from dataclasses import dataclass

from engine.floor.base import errors as e
from engine.floor.llm.urls import redact


class ServeError(Exception):
    """A failure the server itself decides (busy, deadline, auth, size, unknown model)."""

    status = 500
    type = "server_error"
    code = "server_error"

    def __init__(self, message: str, *, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.headers = headers or {}


class Unauthorized(ServeError):
    status, type, code = 401, "authentication_error", "invalid_api_key"


class HostNotAllowed(ServeError):
    status, type, code = 403, "permission_error", "host_not_allowed"


class WritesDisabled(ServeError):
    status, type, code = 403, "permission_error", "writes_disabled"


class UnsupportedMediaType(ServeError):
    status, type, code = 415, "invalid_request_error", "unsupported_media_type"


class NotFound(ServeError):
    status, type, code = 404, "invalid_request_error", "not_found"


class PayloadTooLarge(ServeError):
    status, type, code = 413, "invalid_request_error", "payload_too_large"


class BadRequest(ServeError):
    status, type, code = 400, "invalid_request_error", "bad_request"


class ServerBusy(ServeError):
    status, type, code = 503, "server_busy", "queue_full"


class DeadlineExceeded(ServeError):
    status, type, code = 504, "timeout", "deadline_exceeded"


@dataclass(frozen=True)
class ErrorKind:
    status: int
    type: str
    code: str


# The library's typed errors, most specific first: the first isinstance match wins.
LIBRARY_ERRORS: tuple[tuple[type[Exception], ErrorKind], ...] = (
    (e.BadQuestionError, ErrorKind(400, "invalid_request_error", "bad_question")),
    (e.DocumentNotFoundError, ErrorKind(404, "invalid_request_error", "document_not_found")),
    (e.KBEmptyError, ErrorKind(409, "invalid_request_error", "kb_empty")),
    (e.KBReadOnlyError, ErrorKind(403, "permission_error", "kb_read_only")),
    # the Milvus server is down or restarting: the same question may be asked again shortly
    (e.StoreUnavailableError, ErrorKind(503, "server_error", "store_unavailable")),
    (e.KBError, ErrorKind(500, "server_error", "kb_error")),
    (e.DataFormatError, ErrorKind(400, "invalid_request_error", "bad_document")),
    (e.DeadlineError, ErrorKind(504, "timeout", "deadline_exceeded")),  # the request's own deadline cut the call
    (e.LLMError, ErrorKind(502, "upstream_error", "llm_failed")),  # the LLM backend, not the caller
    (e.ModelFilesError, ErrorKind(500, "server_error", "model_files")),
    (e.CheckpointError, ErrorKind(500, "server_error", "checkpoint")),
    (e.LogicRouteError, ErrorKind(400, "invalid_request_error", "bad_request")),  # a bad route, budget, style
)
INTERNAL = ErrorKind(500, "server_error", "internal_error")
STORE_RETRY_AFTER_S = 5  # a restarting Milvus standalone answers again within ~10 s (docs/results/milvus_server.md)


def headers_of(exc: BaseException) -> dict[str, str] | None:
    """The response headers of an error: a ServeError's own; Retry-After for an unreachable store."""
    if isinstance(exc, ServeError):
        return exc.headers or None
    if isinstance(exc, e.StoreUnavailableError):
        return {"Retry-After": str(STORE_RETRY_AFTER_S)}
    return None


def kind_of(exc: BaseException) -> ErrorKind:
    if isinstance(exc, ServeError):
        return ErrorKind(exc.status, exc.type, exc.code)
    for cls, kind in LIBRARY_ERRORS:
        if isinstance(exc, cls):
            return kind
    return INTERNAL


def error_body(exc: BaseException) -> dict:
    """The JSON body for `exc`. An unexpected exception says only that it happened: its text may
    hold paths or data the caller should not see."""
    kind = kind_of(exc)
    message = "internal server error (see the server log)" if kind is INTERNAL else redact(str(exc))
    return {"error": {"message": message, "type": kind.type, "code": kind.code}}


def body_of(status: int, message: str, code: str) -> dict:
    """An error body for a status the framework decides (unknown path, wrong method)."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "code": code}}
