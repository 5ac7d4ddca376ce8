"""An endpoint's URL: a malformed one is refused before any try, in one line; one that carries
credentials (`http://user:pass@host`, `?api_key=`) never shows them: not in errors, the LLM's
name (what traces, caches and cards record), the command's messages or the server's /health."""

from __future__ import annotations

import socket
import time

import pytest
from click.testing import CliRunner

from engine.core.pipeline import RoutedRAG
from engine.face.cli import main
from engine.face.serve.config import ServeConfig
from engine.face.serve.run import ServerThread
from engine.face.serve.service import AnswerService
from engine.floor.base.errors import LLMError, LogicRouteError
from engine.floor.llm.base import parse_spec
from engine.floor.llm.factory import make_llm
from engine.floor.llm.openai_api import OpenAILLM
from engine.floor.llm.urls import redact
from tests.engine.serve_helpers import SchemaLLM, call, film_kb
from tests.fakes import FakeRouter, make_rag
from tests.samples import MSGS

pytestmark = pytest.mark.usefixtures("isolated_llm_env")  # no user cache, no real key or endpoint
SECRET = "secretpass"


def dead_port() -> int:
    """A local port nothing listens on: a connection to it is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- a malformed URL


@pytest.mark.parametrize(
    "spec, why",
    [
        ("openai:ok@notaurl", "'notaurl'"),
        ("openai:m@ftp://h/v1", "'ftp://h/v1'"),
        ("openai:m@http:///v1", "'http:///v1'"),
        ("openai:m@http://h:port/v1", "'http://h:port/v1'"),
        ("openai:m@", "''"),
    ],
)
def test_a_malformed_base_url_is_refused_in_one_line(spec, why):
    with pytest.raises(LogicRouteError) as err:
        parse_spec(spec)
    message = str(err.value)
    assert message.startswith(f"bad base URL {why} in LLM spec {spec!r}: ") and "\n" not in message


def test_ask_refuses_a_malformed_url_before_anything_loads_or_any_try(monkeypatch, tmp_path):
    opened = []
    monkeypatch.setattr(RoutedRAG, "open", classmethod(lambda cls, *a, **k: opened.append(a)))
    t0 = time.perf_counter()
    res = CliRunner().invoke(main, ["ask", "Who?", "--kb", str(tmp_path), "--llm", "openai:ok@notaurl"])
    assert res.exit_code == 2 and time.perf_counter() - t0 < 2  # not 5 tries over 17.5 s
    assert res.output == (
        "error: bad base URL 'notaurl' in LLM spec 'openai:ok@notaurl': "
        "expected http://HOST[:PORT]/PATH or https://...\n"
    )
    assert opened == []


def test_a_malformed_base_url_is_refused_when_the_llm_is_made():
    with pytest.raises(LogicRouteError, match=r"^bad base URL 'localhost:8000/v1' in the base URL: "):
        OpenAILLM("m", base_url="localhost:8000/v1")


# ---------------------------------------------------------------- credentials are never shown


@pytest.mark.parametrize(
    "text, shown",
    [
        ("openai:m@http://user:secretpass@h:8/v1", "openai:m@http://***@h:8/v1"),
        ("openai:m@https://tok3n@h/v1?timeout=3", "openai:m@https://***@h/v1?timeout=3"),
        ("openai:m@user:secretpass@h/v1", "openai:m@***@h/v1"),
        ("http://h/v1?api_key=secretpass&timeout=3", "http://h/v1?api_key=***&timeout=3"),
        ("http://h/v1?x=1&token=secretpass&sig=abc", "http://h/v1?x=1&token=***&sig=***"),
        ("bad LLM setting 'password=secretpass' in", "bad LLM setting 'password=***' in"),
        ("openai:gpt-4o-mini?timeout=3&retries=0", "openai:gpt-4o-mini?timeout=3&retries=0"),
        ("max_prompt_tokens=25 allows no LLM call", "max_prompt_tokens=25 allows no LLM call"),
        ("cannot reach http://127.0.0.1:9/v1: refused", "cannot reach http://127.0.0.1:9/v1: refused"),
    ],
)
def test_redact_hides_userinfo_and_secret_query_values_and_keeps_the_rest(text, shown):
    assert redact(text) == shown


def test_an_endpoint_with_credentials_never_shows_them_in_its_name_or_errors():
    url = f"http://user:{SECRET}@127.0.0.1:{dead_port()}/v1"
    llm = make_llm(f"openai:m@{url}?timeout=1&retries=0", cache=False)
    assert llm.name == f"openai:m@{redact(url)}" and SECRET not in llm.name  # traces, caches and cards record it
    with pytest.raises(LLMError) as err:
        llm.chat(MSGS)
    assert str(err.value).startswith(f"cannot reach {redact(url)}: ") and SECRET not in str(err.value)
    with pytest.raises(LogicRouteError) as bad:
        parse_spec(f"openai:m@{url}?api_key={SECRET}")
    assert "'api_key=***'" in str(bad.value) and SECRET not in str(bad.value)


def test_ask_on_an_endpoint_with_credentials_does_not_print_them(monkeypatch, tmp_path):
    monkeypatch.setattr(RoutedRAG, "open", classmethod(lambda cls, kb, **options: make_rag(None, **options)))
    spec = f"openai:m@http://user:{SECRET}@127.0.0.1:{dead_port()}/v1?retries=0"
    res = CliRunner().invoke(main, ["ask", "Who?", "--kb", str(tmp_path), "--route", "chunk", "--llm", spec])
    assert res.exit_code == 2 and res.output.startswith("error: cannot reach http://***@127.0.0.1:")
    assert SECRET not in res.output


def test_health_shows_the_llm_spec_without_its_credentials(tmp_path):
    rag = RoutedRAG(kb=film_kb(tmp_path / "kb"), llm=SchemaLLM(), router=FakeRouter(), cache=False)
    spec = f"openai:m@http://user:{SECRET}@h:8/v1?timeout=3"
    with ServerThread(AnswerService(rag, ServeConfig(), llm_spec=spec)) as s:
        health = call("GET", f"{s.url}/health")
    assert health.status == 200 and health.body["llm"] == "openai:m@http://***@h:8/v1?timeout=3"
