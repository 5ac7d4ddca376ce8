"""A fake OpenAI-compatible endpoint on 127.0.0.1 (no network) for the fault specs: it answers,
hangs, trickles its reply a byte at a time, or sends a raw body, one scripted reply per request."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from engine.floor.base.errors import LLMError
from engine.floor.llm.openai_api import OpenAILLM


def timed(f, *args, **kw):
    t0 = time.perf_counter()
    try:
        return f(*args, **kw), time.perf_counter() - t0
    except LLMError as e:
        return e, time.perf_counter() - t0


HANG = object()  # a reply: the server reads the request and never answers


@dataclass(frozen=True)
class Trickle:
    """A reply sent one byte every `every` seconds: after the head when `head` is False (the
    body trickles), else from its first byte. ~250 bytes, so 12 s at the default pace."""

    text: str = "Paris"
    every: float = 0.05
    head: bool = False


def send_body(handler: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str = "application/json"):
    """One whole HTTP reply from a test server's handler."""
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def completion_body(text: str, finish_reason: str = "stop") -> bytes:
    return json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", "content": text}}
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14},
        }
    ).encode()


class ThreadedEndpoint:
    """An OpenAI-compatible test server on 127.0.0.1, in a thread while used as a context manager:
    `serve(handler)` starts listening, `llm()` is the backend pointed at it."""

    def serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"

    def __enter__(self):
        # a short poll: shutdown() waits for it
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def llm(self, **kw) -> OpenAILLM:
        """The backend on this endpoint, without backoff sleeps (a test waits only on the server)."""
        return OpenAILLM("m", base_url=self.url, sleep=lambda s: None, **kw)


class FakeEndpoint(ThreadedEndpoint):
    """/v1/chat/completions in a thread. Each request takes the next reply (the last repeats):
    a completion text, HANG, a Trickle, or raw (content type, body) sent with HTTP 200.
    `hung_up` is set when a client closed its connection while a Trickle was still sending."""

    def __init__(self, *replies):
        self.replies = list(replies)
        self.requests = 0
        self.hung_up = threading.Event()
        self._release = threading.Event()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                reply = endpoint.replies[min(endpoint.requests, len(endpoint.replies) - 1)]
                endpoint.requests += 1
                if reply is HANG:
                    endpoint._release.wait(10)
                    return
                if isinstance(reply, Trickle):
                    endpoint._trickle(self.wfile, reply)
                    return
                content_type, body = reply if isinstance(reply, tuple) else ("application/json", None)
                body = completion_body(reply) if body is None else body
                send_body(self, 200, body, content_type)

            def log_message(self, *a):
                pass

        self.serve(Handler)

    def _trickle(self, out, reply: Trickle) -> None:
        body = completion_body(reply.text)
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
        fast, slow = (b"", head + body) if reply.head else (head, body)
        try:
            out.write(fast)
            for i in range(len(slow)):
                if self._release.wait(reply.every):
                    return
                out.write(slow[i : i + 1])
        except OSError:  # the client closed the connection: it stopped reading, and said so
            self.hung_up.set()

    def __exit__(self, *exc) -> None:
        self._release.set()  # a hung request ends before the server shuts down
        super().__exit__(*exc)
