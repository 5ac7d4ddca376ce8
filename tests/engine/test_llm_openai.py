"""The OpenAI-compatible backend: retries with backoff, one clear line when it gives up, the
client made on first use, the real client against a local HTTP server, and the structured
output logic every backend shares (one retry with the validation error stated)."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import openai
import pytest

from engine.floor.base.errors import LLMError, StructuredOutputError
from engine.floor.llm.openai_api import OpenAILLM
from tests.engine.fake_endpoint import send_body
from tests.samples import MSGS, SCHEMA

pytestmark = pytest.mark.usefixtures("isolated_llm_env")  # no user cache, no real key or endpoint


def _httpx():
    try:  # the openai client in .venv is built on httpx2; older ones on httpx
        import httpx2 as httpx
    except ImportError:
        import httpx
    return httpx


def _status_error(cls, code: int, headers: dict | None = None):
    httpx = _httpx()
    req = httpx.Request("POST", "http://h:1/v1/chat/completions")
    return cls(f"HTTP {code} from server", response=httpx.Response(code, request=req, headers=headers), body=None)


def _conn_refused():
    e = openai.APIConnectionError(request=_httpx().Request("POST", "http://h:1/v1/chat/completions"))
    e.__cause__ = ConnectionRefusedError(111, "Connection refused")
    return e


def _timeout():
    return openai.APITimeoutError(request=_httpx().Request("POST", "http://h:1/v1/chat/completions"))


class FakeClient:
    """Stands in for openai.OpenAI: each create() pops the next scripted reply or error."""

    def __init__(self, script):
        self.script = list(script)
        self.calls: list[dict] = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self._create))

    def _create(self, **kwargs):
        self.calls.append(kwargs)
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        msg = SimpleNamespace(content=item)
        return SimpleNamespace(
            choices=[SimpleNamespace(message=msg)],
            model="served",
            usage=SimpleNamespace(prompt_tokens=20, completion_tokens=4),
        )


def _remote(script, **kw):
    sleeps: list[float] = []
    client = FakeClient(script)
    llm = OpenAILLM("m", base_url="http://h:1/v1", client=client, sleep=sleeps.append, **kw)
    return llm, client, sleeps


def test_openai_retries_transient_errors_then_succeeds():
    llm, client, sleeps = _remote(
        [
            _status_error(openai.RateLimitError, 429),
            _status_error(openai.InternalServerError, 503),
            _timeout(),
            _conn_refused(),
            "five",
        ]
    )
    c = llm.chat(MSGS, max_tokens=16)
    assert (c.text, c.prompt_tokens, c.completion_tokens, c.cached) == ("five", 20, 4, False)
    assert len(client.calls) == 5 and len(sleeps) == 4
    assert client.calls[0]["max_tokens"] == 16 and client.calls[0]["temperature"] == 0.0
    assert "response_format" not in client.calls[0]
    # exponential with jitter: each sleep in [d/2, d] for d = 1, 2, 4, 8
    for i, s in enumerate(sleeps):
        assert 2**i / 2 <= s <= 2**i


def test_openai_gives_up_with_one_clear_line_after_max_tries():
    llm, client, sleeps = _remote([_conn_refused() for _ in range(4)], max_retries=3)
    with pytest.raises(LLMError) as err:
        llm.chat(MSGS)
    assert str(err.value) == "cannot reach http://h:1/v1: [Errno 111] Connection refused after 4 tries"
    assert len(client.calls) == 4 and len(sleeps) == 3 and sleeps == sorted(sleeps)

    llm, _, sleeps = _remote([_status_error(openai.RateLimitError, 429, {"retry-after": "7"})] * 2, max_retries=1)
    with pytest.raises(LLMError, match=r"rate limited \(HTTP 429\).* after 2 tries"):
        llm.chat(MSGS)
    assert sleeps == [7.0]  # the server's Retry-After wins over a shorter backoff


@pytest.mark.parametrize(
    "error, match",
    [
        (_status_error(openai.AuthenticationError, 401), "refused the credentials"),
        (_status_error(openai.BadRequestError, 400), r"rejected the request .*HTTP 400"),
        (_status_error(openai.NotFoundError, 404), "not found"),
    ],
)
def test_openai_client_errors_fail_at_once(error, match):
    llm, client, sleeps = _remote([error, "never"])
    with pytest.raises(LLMError, match=match):
        llm.chat(MSGS)
    assert len(client.calls) == 1 and sleeps == []


def test_openai_client_made_on_first_call_with_our_settings(monkeypatch):
    made: list[dict] = []

    def factory(**kw):
        made.append(kw)
        return FakeClient(["ok", "ok again"])

    monkeypatch.setattr(openai, "OpenAI", factory)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    llm = OpenAILLM("m", base_url="http://env:9/v1", timeout=5)
    assert made == [] and llm.name == "openai:m@http://env:9/v1"
    assert llm.chat(MSGS).text == "ok" and llm.chat(MSGS).text == "ok again"  # one client, reused
    assert made[0].pop("http_client") is not None  # the wall-clock limit of every try (test_llm_faults)
    assert made == [{"api_key": "sk-test", "base_url": "http://env:9/v1", "timeout": 5, "max_retries": 0}]

    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(LLMError, match="no API key"):
        OpenAILLM("gpt-4o-mini").chat(MSGS)


def test_openai_backend_with_the_real_client_against_a_local_http_server():
    """Wiring check with the real openai client: a stdlib server answers 503 once, then 200."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            seen.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            ok = len(seen) > 1
            body = json.dumps(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "m",
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": '{"answer": 5}'},
                        }
                    ],
                    "usage": {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18},
                }
                if ok
                else {"error": {"message": "overloaded"}}
            ).encode()
            send_body(self, 200 if ok else 503, body)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sleeps: list[float] = []
        url = f"http://127.0.0.1:{server.server_port}/v1"
        c = OpenAILLM("m", base_url=url, sleep=sleeps.append, timeout=10).chat(MSGS, schema=SCHEMA)
        assert c.data == {"answer": 5} and (c.prompt_tokens, c.completion_tokens) == (12, 6)
        assert len(seen) == 2 and len(sleeps) == 1 and seen[1]["messages"] == MSGS
        assert seen[1]["response_format"]["json_schema"]["schema"] == SCHEMA
    finally:
        server.shutdown()
        server.server_close()

    # the same port, now closed: connection refused, reported in one line
    with pytest.raises(LLMError, match=rf"^cannot reach {url}: .*after 3 tries$"):
        OpenAILLM("m", base_url=url, max_retries=2, sleep=lambda s: None).chat(MSGS)


# ---------------------------------------------------------------- structured output (shared)


def test_schema_invalid_then_valid_returns_data_and_books_both_attempts():
    llm, client, _ = _remote(["not json", '{"answer": 5}'])
    c = llm.chat(MSGS, schema=SCHEMA)
    assert c.data == {"answer": 5}
    assert (c.prompt_tokens, c.completion_tokens) == (40, 8)  # both attempts cost tokens
    fmt = client.calls[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == SCHEMA
    retry = client.calls[1]["messages"]
    assert retry[:1] == MSGS and retry[1] == {"role": "assistant", "content": "not json"}
    assert "not valid JSON" in retry[2]["content"]


def test_schema_invalid_twice_raises_with_both_completions():
    llm, client, _ = _remote(['{"answer": "five"}', '{"wrong": 1}'])
    with pytest.raises(StructuredOutputError) as err:
        llm.chat(MSGS, schema=SCHEMA)
    assert [c.text for c in err.value.completions] == ['{"answer": "five"}', '{"wrong": 1}']
    assert "answer" in client.calls[1]["messages"][-1]["content"]  # the error names the field
    assert "'answer' is a required property" in str(err.value)
