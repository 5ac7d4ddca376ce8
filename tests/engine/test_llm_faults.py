"""Fault injection on the LLM layer: a fake OpenAI-compatible server on 127.0.0.1 (no network)
that hangs, answers garbage or blank completions, and the limits that keep an answer from
waiting on it: timeout and retries settings, the answer's deadline, the circuit breaker; plus
the question-length limit that keeps a huge question off a remote endpoint."""

from __future__ import annotations

import time

import click
import openai  # noqa: F401  # imported once at collection, not inside the first timed test
import pytest
from click.testing import CliRunner

from engine.core.budget import Budget
from engine.core.routes.common import MAX_QUESTION_CHARS, check_question
from engine.face.cli_options import llm_option
from engine.floor.base.errors import BadQuestionError, DeadlineError, LLMError, StructuredOutputError
from engine.floor.base.trace import Trace
from engine.floor.base.types import Completion, Usage
from engine.floor.llm.base import LLMSettings, answer_scope, call_llm, solving
from engine.floor.llm.cache import CachedLLM
from engine.floor.llm.factory import make_llm
from tests.engine.fake_endpoint import HANG, FakeEndpoint, completion_body, timed
from tests.fakes import make_rag
from tests.samples import MSGS

pytestmark = pytest.mark.usefixtures("isolated_llm_env")  # no user cache, no real key or endpoint

ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


# ---------------------------------------------------------------- 1. a hung endpoint


def test_a_hung_endpoint_returns_within_the_configured_timeout():
    with FakeEndpoint(HANG) as server:
        llm = make_llm(f"openai:m@{server.url}?timeout=0.2&retries=1", cache=False)
        error, seconds = timed(llm.chat, MSGS)
    assert isinstance(error, LLMError) and server.requests == 2
    assert str(error) == f"{server.url} (m): no answer within 0.2s after 2 tries"
    assert seconds < 4  # two tries of 0.2 s and a backoff of at most 1 s, not 5 of 60 s


def test_timeout_and_retries_come_from_the_spec_then_the_code_never_the_environment(monkeypatch):
    url = "http://h:1/v1"
    llm = make_llm(f"openai:m@{url}", cache=False)
    assert (llm.timeout, llm.max_retries, llm.name) == (60, 4, f"openai:m@{url}")  # the defaults
    monkeypatch.setenv("LOGICROUTE_LLM_TIMEOUT", "7.5")  # no longer read: the spec says how long to wait
    assert make_llm(f"openai:m@{url}", cache=False).timeout == 60
    settings = LLMSettings(timeout=3, retries=0)
    assert make_llm(f"openai:m@{url}", cache=False, settings=settings).timeout == 3
    spec = f"openai:m@{url}?retries=1"
    llm = make_llm(spec, cache=False, settings=settings)
    assert (llm.timeout, llm.max_retries, llm.name) == (3, 1, f"openai:m@{url}")  # the spec beats code; not the key
    rag = make_rag(None, llm_spec=spec, llm_settings=settings, cache=False)
    assert (rag.get_llm().timeout, rag.get_llm().max_retries) == (3, 1)

    @click.command()
    @llm_option
    def command(llm_spec):
        llm = make_llm(llm_spec, cache=False)
        click.echo(f"{llm.timeout:g} {llm.max_retries}")

    out = CliRunner().invoke(command, ["--llm", f"openai:m@{url}?timeout=0.5"])
    assert (out.exit_code, out.output) == (0, "0.5 4\n")
    bad = CliRunner().invoke(command, ["--llm", f"openai:m@{url}?timeout=soon"])
    assert bad.exit_code == 1 and "expected a number of seconds" in str(bad.exception)


def test_no_call_outlives_the_answers_limit_and_solving_leaves_its_last_quarter_to_the_final_answer():
    with FakeEndpoint(HANG) as server:
        rag = make_rag(server.llm(timeout=5, max_retries=3), cache=False)
        error, seconds = timed(rag.answer, "Who founded the company?", route="chunk", budget=Budget(max_seconds=0.3))
        assert isinstance(error, DeadlineError)
        assert str(error) == f"{server.url} (m): stopped at the 0.3 s limit before a reply"
        assert seconds < 1.5 and server.requests == 1  # the 5 s try was cut at the limit, no retry
    no_call = r"^stopped at the 2 s limit: no further LLM call$"
    with FakeEndpoint("Paris") as server:
        llm, t0 = server.llm(), time.perf_counter()
        with answer_scope(2.0, start=t0):  # solving calls end at 1.5 s, every call at 2 s
            time.sleep(1.55)
            with solving(), pytest.raises(DeadlineError, match=no_call):
                llm.chat(MSGS)
            assert llm.chat(MSGS).text == "Paris"  # the logic route's final answer, in the last quarter
            time.sleep(max(0.0, t0 + 2.05 - time.perf_counter()))
            with pytest.raises(DeadlineError, match=no_call):
                llm.chat(MSGS)
        assert server.requests == 1


def test_an_endpoint_that_failed_every_try_fails_fast_for_the_answer_and_the_cool_down():
    with FakeEndpoint(HANG) as server:
        llm = server.llm(timeout=0.2, max_retries=1, cooldown=0)
        with answer_scope():
            first, _ = timed(llm.chat, MSGS)
            again, seconds = timed(llm.chat, MSGS)
        assert server.requests == 2 and seconds < 0.1
        assert str(again) == f"{first} (earlier in this answer; not tried again)"
        timed(llm.chat, MSGS)  # a new answer, no cool-down: tried again
        assert server.requests == 4

        llm = server.llm(timeout=0.2, max_retries=0)  # the default cool-down, across answers
        timed(llm.chat, MSGS)
        error, seconds = timed(llm.chat, MSGS)
        assert server.requests == 5 and seconds < 0.1
        assert str(error).startswith(f"{server.url} (m): no answer within 0.2s after 1 try; not tried again for")


def test_a_logic_answer_on_a_hung_endpoint_waits_for_one_call_not_two():
    with FakeEndpoint(HANG) as server:
        rag = make_rag(server.llm(timeout=0.2, max_retries=0, cooldown=0), cache=False)
        error, seconds = timed(rag.answer, "Who directed the film that won?", route="logic")
    # decomposition fails (flagged, the route goes on); the final answer does not wait again: one
    # request reached the endpoint, and the time is one 0.2 s wait plus what a loaded machine adds
    assert isinstance(error, LLMError) and server.requests == 1 and seconds < 2.0


def test_a_local_call_does_not_start_after_its_end():
    from engine.floor.llm.local import LocalLLM

    llm = LocalLLM("/nowhere/model.gguf")
    no_call = r"^stopped at the 1 s limit: no further LLM call$"
    with answer_scope(1.0):
        time.sleep(0.8)
        with solving(), pytest.raises(DeadlineError, match=no_call):  # solving ended at 0.75 s
            llm.chat(MSGS)
        with pytest.raises(LLMError, match="model file not found"):  # the final answer still starts
            llm.chat(MSGS)
        time.sleep(0.25)
        with pytest.raises(DeadlineError, match=no_call):
            llm.chat(MSGS)


# ---------------------------------------------------------------- 2. a malformed body


@pytest.mark.parametrize(
    "body",
    [
        ("text/html", b"<html><body>502 Bad Gateway</body></html>"),
        ("application/json", b'{"id": "x", "choices": [{"message": {"content": "Par'),
        ("application/json", b'{"id": "x"}'),
    ],
    ids=["html", "truncated-json", "no-choices"],
)
def test_a_malformed_response_body_is_retried_then_fails_in_one_line(body):
    with FakeEndpoint(body, "Paris") as server:
        assert server.llm(max_retries=1).chat(MSGS).text == "Paris"
        assert server.requests == 2
    with FakeEndpoint(body) as server, pytest.raises(LLMError) as err:
        server.llm(max_retries=2).chat(MSGS)
    message = str(err.value)
    assert message.startswith(f"{server.url} (m): malformed response body (") and message.endswith(") after 3 tries")
    assert "\n" not in message and server.requests == 3


def test_a_structured_reply_cut_off_at_the_token_limit_is_not_retried():
    cut = ("application/json", completion_body('{"answer": "Paris is the capital and its', "length"))
    with FakeEndpoint(cut, '{"answer": "Paris"}') as server:
        with pytest.raises(StructuredOutputError, match="cut off at the token limit") as err:
            server.llm().chat(MSGS, schema=ANSWER_SCHEMA, max_tokens=8)
        assert server.requests == 1 and len(err.value.completions) == 1
        assert err.value.completions[0].finish_reason == "length"
    malformed = ("application/json", completion_body('{"answer": 3}'))
    with FakeEndpoint(malformed, '{"answer": "Paris"}') as server:  # not cut off: retried once
        c = server.llm().chat(MSGS, schema=ANSWER_SCHEMA)
        assert (c.data, c.attempts, server.requests) == ({"answer": "Paris"}, 2, 2)


# ---------------------------------------------------------------- 3. an empty completion


def test_an_empty_completion_is_retried_and_never_cached(tmp_path):
    with FakeEndpoint("", "Paris") as server:
        assert server.llm(max_retries=1).chat(MSGS).text == "Paris"
        assert server.requests == 2
    cache = tmp_path / "c.sqlite"
    with FakeEndpoint(" \n") as server, pytest.raises(LLMError, match=r"\(m\): empty completion after 2 tries$"):
        CachedLLM(server.llm(max_retries=1), cache).chat(MSGS)
    with FakeEndpoint("Paris") as server:  # the endpoint recovered: the blank was not kept
        c = CachedLLM(server.llm(), cache).chat(MSGS)
        assert (c.text, c.cached, server.requests) == ("Paris", False, 1)


class BlankLLM:
    name = "fake:blank"

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0):
        return Completion(text="  ", prompt_tokens=3, completion_tokens=0, seconds=0.0, model=self.name)


def test_a_blank_completion_that_gets_through_is_flagged_and_not_served_from_the_cache(tmp_path):
    trace = Trace()
    call_llm(BlankLLM(), MSGS, purpose="answer", usage=Usage(), trace=trace)
    assert trace["flags"] == ["the LLM returned a blank completion for answer"]

    cached = CachedLLM(BlankLLM(), tmp_path / "c.sqlite")
    cached.chat(MSGS)
    assert cached._db().execute("SELECT COUNT(*) FROM completions").fetchone() == (0,)
    # a blank stored by an older version is asked again, not served
    cached._db().execute(
        "INSERT INTO completions (key, llm, text, data, prompt_tokens, completion_tokens, seconds, model, created) "
        "VALUES (?, ?, '', NULL, 1, 0, 0.1, 'm', 0)",
        (_key(cached), cached.name),
    )
    assert cached.chat(MSGS).cached is False


def _key(cached: CachedLLM) -> str:
    from engine.floor.llm.cache import cache_key

    return cache_key(cached.name, MSGS, None, 256, 0.0)


# ---------------------------------------------------------------- 4. a huge question


def test_a_one_word_100_kb_question_is_refused_in_one_line():
    with pytest.raises(BadQuestionError) as err:
        check_question("x" * 100_000)
    assert str(err.value) == (
        f"the question has 100000 characters; the limit is {MAX_QUESTION_CHARS} (it must leave room for evidence)"
    )
    assert check_question("y" * MAX_QUESTION_CHARS) == "y" * MAX_QUESTION_CHARS
