"""A client that goes away stops its answer: once the connection closes, the answer makes no
further LLM call (the one in flight finishes), so its worker is free for the next request
instead of running the rest of the logic route for nobody."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.parse

import pytest

from engine.face.serve.progress import ClientGone, ObservedLLM, with_sink
from engine.face.serve.run import ServerThread
from tests.engine.serve_helpers import CHAIN_QUESTION, SIMPLE_QUESTION, SchemaLLM, call, film_service
from tests.samples import MSGS

CALL_SECONDS = 1.0  # each scripted LLM call; the chain question's logic route makes 5


@pytest.fixture(autouse=True)
def _env(isolated_llm_env):
    pass


def send_request(url: str, path: str, body: dict) -> socket.socket:
    """Send one POST and return the open socket, the response unread."""
    u = urllib.parse.urlsplit(url)
    data = json.dumps(body).encode()
    sock = socket.create_connection((u.hostname, u.port), timeout=30)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {u.netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    )
    sock.sendall(head.encode() + data)
    return sock


def read_until(sock: socket.socket, marker: bytes) -> None:
    received = b""
    while marker not in received:
        block = sock.recv(4096)
        assert block, f"the server closed the stream before {marker!r}: {received!r}"
        received += block


def wait_until(condition, timeout: float = 30.0) -> None:
    t0 = time.monotonic()
    while not condition():
        assert time.monotonic() - t0 < timeout, "condition not reached"
        time.sleep(0.02)


def test_a_cancelled_request_makes_no_further_llm_call():
    inner = SchemaLLM()
    cancel = threading.Event()
    llm = ObservedLLM(inner)
    assert with_sink(None, lambda: llm.chat(MSGS), cancel).text  # not cancelled: answered
    cancel.set()
    with pytest.raises(ClientGone, match="client went away"):
        with_sink(None, lambda: llm.chat(MSGS), cancel)
    assert inner.calls == 1


def test_a_client_that_drops_a_logic_stream_stops_the_answers_llm_calls(tmp_path):
    llm = SchemaLLM(delay=CALL_SECONDS)
    service = film_service(tmp_path, llm, workers=1)
    body = {"model": "logicroute-logic", "messages": [{"role": "user", "content": CHAIN_QUESTION}], "stream": True}
    with ServerThread(service) as s:
        sock = send_request(s.url, "/v1/chat/completions", body)
        read_until(sock, b'"step_started"')  # the decomposition call is running
        sock.close()
        calls_at_close = llm.calls
        t0 = time.monotonic()
        nxt = call("POST", f"{s.url}/query", {"question": SIMPLE_QUESTION, "route": "chunk"})
        waited = time.monotonic() - t0
        assert nxt.status == 200
    # the call in flight at the close is the dropped answer's last; then the next request's one call
    assert llm.calls - calls_at_close <= 2, llm.calls
    assert waited < 3.5 * CALL_SECONDS  # at most the call in flight and its own, not the four left
    assert call_was_counted_as_gone(service)


def test_a_client_that_drops_a_plain_request_stops_the_answers_llm_calls(tmp_path):
    llm = SchemaLLM(delay=CALL_SECONDS)
    service = film_service(tmp_path, llm, workers=1)
    with ServerThread(service) as s:
        sock = send_request(s.url, "/query", {"question": CHAIN_QUESTION, "route": "logic"})
        wait_until(lambda: llm.calls >= 1)
        sock.close()
        calls_at_close = llm.calls
        wait_until(lambda: service.admission.state()["running"] == 0)
    assert llm.calls - calls_at_close <= 1, llm.calls
    assert call_was_counted_as_gone(service)


def call_was_counted_as_gone(service) -> bool:
    """The dropped answer is not booked as answered: /metrics shows it as a 499 (client closed)."""
    wait_until(lambda: service.metrics.to_dict()["errors"].get("499") == 1, timeout=10)
    return True
