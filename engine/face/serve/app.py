"""create_app: the FastAPI application over an AnswerService.

In front of every endpoint sits the Guard (a plain ASGI middleware, so it refuses before a
body is read): without a key, the Host header (engine.face.serve.config: DNS rebinding) and the
permission to write; with one, the bearer token; then JSON as the only body type, and the body
size caps. The page (/ and /page/*) needs no key, so a browser can load it and then send the key
with its requests.

Every error leaves as the JSON body of engine.face.serve.errors with its status code; an
unexpected exception is logged here with its traceback and reaches the client as a bare 500.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from pathlib import Path

from engine.core.routes import check_route
from engine.core.routes.common import check_question
from engine.face.serve import native, openai_compat
from engine.face.serve.config import BODY_METHODS, bearer_matches, is_json, is_write
from engine.face.serve.errors import (
    INTERNAL,
    HostNotAllowed,
    PayloadTooLarge,
    ServeError,
    Unauthorized,
    UnsupportedMediaType,
    WritesDisabled,
    body_of,
    error_body,
    headers_of,
    kind_of,
)
from engine.face.serve.progress import ClientGone
from engine.face.serve.service import AnswerService, QueryOptions
from engine.floor.base.errors import LogicRouteError

PAGE_DIR = Path(__file__).resolve().parent / "page"
PAGE_ASSETS = {"app.js": "text/javascript", "style.css": "text/css", "dag.js": "text/javascript"}
PUBLIC_PATHS = ("/", "/favicon.ico")
log = logging.getLogger("logicroute.serve")


def create_app(service: AnswerService):
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException

    config = service.config
    # no /docs: its assets come from a CDN, and the machine may have no internet
    app = FastAPI(title=config.title, docs_url=None, redoc_url=None, openapi_url="/openapi.json")
    app.add_middleware(Guard, config=config, on_refusal=service.metrics.failed)

    def error_response(exc: Exception) -> JSONResponse:
        kind = kind_of(exc)
        if not isinstance(exc, ClientGone):  # the service booked it: its client reads no response
            service.metrics.failed(kind.status)
        if kind is INTERNAL:
            log.error("internal error", exc_info=exc)
        return JSONResponse(error_body(exc), status_code=kind.status, headers=headers_of(exc))

    async def on_error(request: Request, exc: Exception) -> JSONResponse:
        return error_response(exc)

    async def on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        service.metrics.failed(400)
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
        return JSONResponse(body_of(400, f"invalid request: {problems}", "invalid_body"), status_code=400)

    async def on_http(request: Request, exc: HTTPException) -> JSONResponse:
        service.metrics.failed(exc.status_code)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse(body_of(exc.status_code, str(exc.detail), code), status_code=exc.status_code)

    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(HTTPException, on_http)
    # the expected errors are answered here; the unexpected go to the outermost handler (a bare 500)
    app.add_exception_handler(ServeError, on_error)
    app.add_exception_handler(LogicRouteError, on_error)
    app.add_exception_handler(Exception, on_error)

    def start_answer(question: str, options: QueryOptions, sink, receive) -> asyncio.Future:
        """Check the request, take a queue place (ServerBusy now if none is left) and start the
        answer; the future holds the Answer or the error. The deadline counts from here.
        `receive`: the request's ASGI receive, watched until the answer ends: a client that
        disconnects (a closed stream, a dropped request) cancels the answer's further LLM calls."""
        check_question(question)
        check_route(options.route)
        deadline = time.monotonic() + config.deadline_seconds
        service.admission.admit()
        cancel = threading.Event()
        job = asyncio.ensure_future(
            service.admission.run(lambda: service.answer(question, options, deadline, sink, cancel), deadline)
        )
        watcher = asyncio.ensure_future(_cancel_on_disconnect(receive, cancel, job))
        job.add_done_callback(lambda _: watcher.cancel())
        return job

    def on_stream_error(exc: Exception) -> None:
        kind = kind_of(exc)
        service.metrics.failed(kind.status)
        if kind is INTERNAL:
            log.error("internal error in a stream", exc_info=exc)

    openai_compat.register(app, service, start_answer, on_stream_error)
    native.register(app, service, start_answer)
    register_page(app)
    return app


def register_page(app) -> None:
    from fastapi.responses import HTMLResponse, Response

    from engine.face.serve.errors import NotFound

    @app.get("/", include_in_schema=False)
    async def page() -> HTMLResponse:
        return HTMLResponse((PAGE_DIR / "index.html").read_text(encoding="utf-8"))

    @app.get("/page/{name}", include_in_schema=False)
    async def asset(name: str) -> Response:
        if name not in PAGE_ASSETS:  # a fixed list: no path from the request reaches the file system
            raise NotFound(f"no page asset {name!r}")
        return Response((PAGE_DIR / name).read_bytes(), media_type=PAGE_ASSETS[name])


class Guard:
    """ASGI middleware: who may call (Host, key, writes), what a body may be (JSON, its size),
    checked before the application reads anything."""

    def __init__(self, app, config, on_refusal):
        self.app = app
        self.config = config
        self.on_refusal = on_refusal

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refusal = self._refusal(scope["method"], path, headers)
        if refusal is not None:
            extra = {"WWW-Authenticate": "Bearer"} if isinstance(refusal, Unauthorized) else None
            return await self._refuse(refusal, send, extra)
        limit = self.config.max_document_bytes if path.startswith("/documents") else self.config.max_body_bytes
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            return await self._refuse(PayloadTooLarge(f"the request body is over {limit} bytes"), send)
        if length is None and scope["method"] in ("POST", "PUT", "PATCH"):
            # no Content-Length (chunked): read it here, at most `limit` bytes, then hand it on
            body = await _read_at_most(receive, limit)
            if body is None:
                return await self._refuse(PayloadTooLarge(f"the request body is over {limit} bytes"), send)
            receive = replay_body(body, receive)
        return await self.app(scope, receive, send)

    def _refusal(self, method: str, path: str, headers: dict) -> ServeError | None:
        config = self.config
        host = headers.get("host")
        if not config.answers_host(host):
            return HostNotAllowed(
                f"this server answers requests for its own address, not Host {host!r}: "
                "start it with --allowed-host NAME to answer another name, or with $LOGICROUTE_SERVER_KEY"
            )
        public = path in PUBLIC_PATHS or path.startswith("/page/")
        if config.api_key and not public and not bearer_matches(headers.get("authorization"), config.api_key):
            return Unauthorized("missing or wrong bearer token: send 'Authorization: Bearer <key>'")
        if is_write(method, path) and not config.takes_writes():
            return WritesDisabled(
                "this server takes no document writes: start it with --allow-writes, or with $LOGICROUTE_SERVER_KEY"
            )
        # a form or a "simple" cross-site fetch cannot send JSON; DELETE needs no check, since a
        # browser never sends it cross-site without a CORS preflight, which this server never grants
        if method in BODY_METHODS and not is_json(headers.get("content-type")):
            sent = headers.get("content-type")
            return UnsupportedMediaType(
                "send the body as JSON with 'Content-Type: application/json', "
                + (f"not {sent!r}" if sent else "not without a Content-Type")
            )
        return None

    async def _refuse(self, exc, send, headers: dict | None = None) -> None:
        from fastapi.responses import JSONResponse

        self.on_refusal(exc.status)
        response = JSONResponse(error_body(exc), status_code=exc.status, headers=headers)
        await response({"type": "http"}, _no_body, send)


async def _cancel_on_disconnect(receive, cancel: threading.Event, job: asyncio.Future) -> None:
    """Wait for the client to go away, then stop its answer (engine.face.serve.progress). The body was
    read before the answer started, so the next message is the disconnect; this task is cancelled
    when the answer ends first."""
    while (await receive())["type"] != "http.disconnect":
        pass
    cancel.set()
    job.add_done_callback(_consume)  # its result or error is nobody's any more


def _consume(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()


async def _read_at_most(receive, limit: int) -> bytes | None:
    """The whole body, or None once it passes `limit` bytes (the rest is never read)."""
    body = b""
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away
            return body
        body += message.get("body", b"")
        if len(body) > limit:
            return None
        if not message.get("more_body", False):
            return body


def replay_body(body: bytes, receive):
    """`receive` that first returns `body` in one message, then what the connection sends."""
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _no_body():
    return {"type": "http.request", "body": b"", "more_body": False}
