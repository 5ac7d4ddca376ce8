"""JSON-RPC's framing errors for `logicroute mcp`, which the SDK's transports leave unanswered.

Over stdio the SDK drops a line it cannot read without a reply, so the client that sent it waits
for an answer that never comes. Here every line is checked before the SDK reads it, against the
SDK's own message type: a line that is not JSON gets -32700 (parse error, id null); JSON whose
strings hold a lone surrogate (a "\\ud800" escape: no UTF-8 reply could carry it back) gets
-32700 with the request's id, and a warning on stderr; JSON that is
not one JSON-RPC message (an empty batch `[]`, any batch, since MCP sends one message a line, an
object that is no request, notification or response) gets -32600 (invalid request, with the
object's id when it has a usable one, else null). The server then reads the next line: a bad
frame costs only itself. Blank lines are not frames and get nothing.

Over streamable HTTP the SDK answers a body that is not JSON with -32700 and a 400 itself, but
JSON that is not a message with -32602 (invalid params); http_framing gives such a body -32600
and the 400 before the SDK reads it, so both transports answer alike.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys

from engine.floor.base.text import lone_surrogates

log = logging.getLogger("logicroute.mcp")
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
NOT_A_MESSAGE = "not a JSON-RPC 2.0 request, notification or response"


def framing_error(frame: str | bytes) -> dict | None:
    """The JSON-RPC error object that answers `frame`, or None when it is one JSON-RPC message
    (or blank)."""
    from mcp_types import jsonrpc_message_adapter
    from pydantic import ValidationError

    if not frame.strip():
        return None
    try:
        value = json.loads(frame)
    except (ValueError, RecursionError) as e:  # RecursionError: JSON nested too deep to parse
        return _error(None, PARSE_ERROR, f"parse error: {str(e) or type(e).__name__}")
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as e:
        rid = _id_of(value)  # the client waits on this id; null only when the id itself is no Unicode
        rid = None if isinstance(rid, str) and lone_surrogates(rid) else rid
        return _error(rid, PARSE_ERROR, f"parse error: a lone surrogate ({e.object[e.start]!r}), which is no Unicode")
    if isinstance(value, list):
        why = "an empty batch" if not value else "a batch (MCP takes one message at a time)"
        return _error(None, INVALID_REQUEST, f"invalid request: {why}")
    try:
        jsonrpc_message_adapter.validate_python(value, by_name=False)
    except ValidationError:
        return _error(_id_of(value), INVALID_REQUEST, f"invalid request: {NOT_A_MESSAGE}")
    return None


def _id_of(value) -> str | int | None:
    """The request id to answer with: a string or an integer, as JSON-RPC allows; else null."""
    if not isinstance(value, dict):
        return None
    rid = value.get("id")
    return rid if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)) else None


def _error(rid: str | int | None, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


# ---------------------------------------------------------------- stdio


def run_stdio(server) -> None:
    """Serve `server` (an MCPServer) over stdin/stdout until the client closes stdin."""
    import anyio

    anyio.run(_serve_stdio, server)


async def _serve_stdio(server) -> None:
    from mcp.server.stdio import stdio_server

    # what MCPServer.run_stdio_async runs; it takes no streams, and the check must sit in between
    protocol = server._lowlevel_server
    replies = _Replies()
    with _claimed_stdin() as wire:
        # stdout is left to the SDK, which points fd 1 at stderr meanwhile so no stray print
        # reaches the wire
        async with stdio_server(stdin=_checked_lines(wire, replies)) as (read_stream, write_stream):
            replies.open(write_stream)
            await protocol.run(read_stream, write_stream, protocol.create_initialization_options())


class _Replies:
    """The error replies' way out: the SDK transport's write stream, known once it has started.
    A reply is sent before the next line is read, so it is out before the frames after it are
    answered, and before the server ends at the end of stdin."""

    def __init__(self):
        import anyio

        self._ready = anyio.Event()
        self._stream = None

    def open(self, write_stream) -> None:
        self._stream = write_stream
        self._ready.set()

    async def send(self, error: dict) -> None:
        import anyio
        from mcp.shared.message import SessionMessage
        from mcp_types import JSONRPCError

        await self._ready.wait()
        # closed: the server has ended, and nobody reads its output any more
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._stream.send(SessionMessage(JSONRPCError.model_validate(error)))


async def _checked_lines(wire, replies: _Replies):
    """The lines of `wire` that are JSON-RPC messages; each other line is answered with its error."""
    async for line in wire:
        error = framing_error(line)
        if error is not None:
            log.warning("mcp: answered a frame with %s (%s)", error["error"]["code"], error["error"]["message"])
            await replies.send(error)
        elif line.strip():
            yield line


@contextlib.contextmanager
def _claimed_stdin():
    """stdin as UTF-8 lines read from a private copy of fd 0, with fd 0 pointed at the null
    device meanwhile (as the SDK's own transport does): a library or a child process that reads
    stdin gets EOF, never a protocol frame."""
    import anyio

    try:
        wire = os.dup(sys.stdin.fileno())
    except (AttributeError, OSError, ValueError):  # stdin is no file descriptor (an embedding host)
        yield anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
        return
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        # closefd=False: a worker thread may still block reading it after the transport ends,
        # so it is never closed and its number never reused under that thread
        stream = io.TextIOWrapper(os.fdopen(wire, "rb", closefd=False), encoding="utf-8", errors="replace")
        yield anyio.wrap_file(stream)
    finally:
        os.dup2(wire, 0)


# ---------------------------------------------------------------- streamable HTTP


def http_framing(app, path: str):
    """ASGI middleware over the SDK's streamable HTTP `app`: a POST to `path` whose body is JSON
    but no JSON-RPC message gets -32600 and a 400; every other request goes on to `app`."""
    from engine.face.serve.app import replay_body

    async def framed(scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"].rstrip("/") != path:
            return await app(scope, receive, send)
        body = await _read_body(receive)
        error = framing_error(body)
        # the SDK answers a body that is no JSON itself; a lone surrogate's error carries the request's id
        if error is None or (error["error"]["code"] == PARSE_ERROR and error["id"] is None):
            return await app(scope, replay_body(body, receive), send)
        from starlette.responses import JSONResponse

        await JSONResponse(error, status_code=400)(scope, receive, send)

    return framed


async def _read_body(receive) -> bytes:
    """The request's whole body (the Guard in front has capped its size)."""
    body = b""
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return body
        body += message.get("body", b"")
        if not message.get("more_body", False):
            return body
