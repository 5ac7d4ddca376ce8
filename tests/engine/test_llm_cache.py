"""The LLM cache (CachedLLM): hits keep the original tokens and seconds, the key covers
everything that changes the output, errors are never stored but a structured reply that failed
validation is, so a rerun sends nothing, and threads and processes may share one file."""

from __future__ import annotations

import json
import multiprocessing
import sys
import threading

import pytest

from engine.floor.base.errors import LLMError, StructuredOutputError
from engine.floor.base.trace import Trace
from engine.floor.base.types import Completion, Usage
from engine.floor.llm.base import call_llm, flag
from engine.floor.llm.cache import CachedLLM, cache_key
from tests.fakes import Cut, ScriptedLLM
from tests.samples import MSGS, SCHEMA

pytestmark = pytest.mark.usefixtures("isolated_llm_env")  # no user cache, no real key or endpoint


class CountingLLM:
    """Answers with a counter; optional per-call delay to widen race windows."""

    name = "fake:counting"

    def __init__(self, fail: Exception | None = None):
        self.calls = 0
        self.fail = fail
        self.lock = threading.Lock()

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0):
        with self.lock:
            self.calls += 1
        if self.fail:
            raise self.fail
        text = json.dumps({"answer": 5}) if schema else f"reply to {messages[-1]['content']}"
        return Completion(
            text=text,
            prompt_tokens=11,
            completion_tokens=7,
            seconds=1.5,
            data={"answer": 5} if schema else None,
            model="m",
        )


def test_cache_hit_returns_original_tokens_without_calling_inner(tmp_path):
    inner = CountingLLM()
    llm = CachedLLM(inner, tmp_path / "c.sqlite")
    first = llm.chat(MSGS, schema=SCHEMA)
    again = CachedLLM(CountingLLM(), tmp_path / "c.sqlite").chat(MSGS, schema=SCHEMA)  # new object, same file
    hit = llm.chat(MSGS, schema=SCHEMA)
    assert inner.calls == 1 and not first.cached
    for c in (again, hit):
        assert c.cached and c.text == first.text and c.data == {"answer": 5}
        assert (c.prompt_tokens, c.completion_tokens, c.seconds) == (11, 7, 0.0)
    with __import__("sqlite3").connect(tmp_path / "c.sqlite") as db:  # original seconds kept
        assert db.execute("SELECT seconds FROM completions").fetchall() == [(1.5,)]

    usage, trace = Usage(), Trace()
    call_llm(llm, MSGS, purpose="t", usage=usage, trace=trace, schema=SCHEMA)
    assert usage.cached_calls == 1 and usage.prompt_tokens == 11
    assert trace["llm_calls"][0]["cached"] is True
    # latency without the cache stays measurable on a cached rerun: the hit brings its original seconds
    assert hit.original_seconds == 1.5 and usage.llm_seconds == 0.0 and usage.llm_seconds_uncached == 1.5
    fresh = Usage()
    fresh.add(first)
    assert fresh.llm_seconds == fresh.llm_seconds_uncached == 1.5


def test_cache_key_covers_everything_that_changes_output():
    base = cache_key("a", MSGS, None, 256, 0.0)
    assert base == cache_key("a", [dict(MSGS[0])], None, 256, 0.0)  # canonical, not identity
    others = [
        cache_key("b", MSGS, None, 256, 0.0),
        cache_key("a", MSGS, SCHEMA, 256, 0.0),
        cache_key("a", MSGS, None, 64, 0.0),
        cache_key("a", MSGS, None, 256, 0.7),
        cache_key("a", MSGS + [{"role": "user", "content": "more"}], None, 256, 0.0),
    ]
    assert len({base, *others}) == 6
    # Existing cache files hold rows under this key: a changed key would miss every cached call.
    assert base == "38cd93c21212280cecb8d8992388131a025f84cffb1412ec968ed1c36a2e66a6"


def test_cache_misses_on_changed_call_and_never_stores_errors(tmp_path):
    inner = CountingLLM()
    llm = CachedLLM(inner, tmp_path / "c.sqlite")
    llm.chat(MSGS)
    llm.chat(MSGS, schema=SCHEMA)
    llm.chat(MSGS, max_tokens=8)
    llm.chat([{"role": "user", "content": "other"}])
    assert inner.calls == 4

    failing = CountingLLM(fail=StructuredOutputError("bad", []))
    bad = CachedLLM(failing, tmp_path / "c2.sqlite")
    for _ in range(2):
        with pytest.raises(StructuredOutputError):
            bad.chat(MSGS, schema=SCHEMA)
    assert failing.calls == 2


def test_cache_is_safe_across_threads(tmp_path):
    inner = CountingLLM()
    llm = CachedLLM(inner, tmp_path / "c.sqlite")
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for i in range(30):
                c = llm.chat([{"role": "user", "content": f"q{(i + offset) % 40}"}])
                assert c.text == f"reply to q{(i + offset) % 40}"
        except BaseException as e:  # surfaced in the main thread below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k * 10,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert 40 <= inner.calls <= 60  # 40 distinct questions; overlap may race to a double call
    hits = [llm.chat([{"role": "user", "content": f"q{i}"}]).cached for i in range(40)]
    assert all(hits)


def _fill_cache(path: str, start: int) -> None:
    llm = CachedLLM(CountingLLM(), path)
    for i in range(start, start + 25):
        llm.chat([{"role": "user", "content": f"p{i}"}])


@pytest.mark.skipif(sys.platform == "win32", reason="fork")
def test_cache_is_safe_across_processes_racing_on_a_fresh_file(tmp_path):
    # every process tries to switch the fresh file to WAL and create the table at once
    path = str(tmp_path / "c.sqlite")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_fill_cache, args=(path, s)) for s in (0, 5, 10, 15)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    inner = CountingLLM()
    llm = CachedLLM(inner, path)
    assert all(llm.chat([{"role": "user", "content": f"p{i}"}]).cached for i in range(40))
    assert inner.calls == 0


class PrefixReusingLLM(CountingLLM):
    """Reports, as the local model does, that only 4 of its 11 prompt tokens were evaluated."""

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0):
        c = super().chat(messages, schema=schema, max_tokens=max_tokens, temperature=temperature)
        c.prompt_tokens_evaluated = 4
        return c


def test_a_hit_keeps_the_prompt_tokens_the_original_call_evaluated(tmp_path):
    llm = CachedLLM(PrefixReusingLLM(), tmp_path / "c.sqlite")
    first, hit = llm.chat(MSGS), llm.chat(MSGS)
    assert hit.cached and (hit.prompt_tokens, hit.prompt_tokens_evaluated) == (11, 4) == (
        first.prompt_tokens,
        first.prompt_tokens_evaluated,
    )
    u = Usage()
    u.add(hit)
    u.add(Completion(text="x", prompt_tokens=9, completion_tokens=1, seconds=0.1))  # a remote call: not known
    assert (u.prompt_tokens, u.prompt_tokens_evaluated) == (20, 13)  # unknown counts every token sent


def test_a_cache_file_from_before_the_evaluated_count_gains_the_column_and_keeps_its_entries(tmp_path):
    import sqlite3

    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.execute(
        "CREATE TABLE completions (key TEXT PRIMARY KEY, llm TEXT NOT NULL, text TEXT NOT NULL, data TEXT, "
        "prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, seconds REAL NOT NULL, "
        "model TEXT NOT NULL, created REAL NOT NULL)"
    )
    key = cache_key("fake:counting", MSGS, None, 256, 0.0)
    old.execute("INSERT INTO completions VALUES (?, 'fake:counting', 'old reply', NULL, 11, 7, 1.5, 'm', 0)", (key,))
    old.commit()
    old.close()
    inner = CountingLLM()
    hit = CachedLLM(inner, path).chat(MSGS)
    assert (hit.text, hit.cached, inner.calls, hit.prompt_tokens_evaluated) == ("old reply", True, 0, None)
    assert hit.token_logprobs is None  # not known for an entry made before the column existed


class SureLLM(CountingLLM):
    """Reports its tokens' log-probabilities, as the local backend does."""

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0):
        c = super().chat(messages, schema=schema, max_tokens=max_tokens, temperature=temperature)
        c.token_logprobs = [-0.1, -2.0]
        return c


def test_a_hit_keeps_the_answers_token_log_probabilities(tmp_path):
    import math

    from engine.floor.llm.base import answer_confidence

    llm = CachedLLM(SureLLM(), tmp_path / "c.sqlite")
    first, hit = llm.chat(MSGS), llm.chat(MSGS)
    assert hit.cached and hit.token_logprobs == first.token_logprobs == [-0.1, -2.0]
    assert answer_confidence(hit) == pytest.approx(math.exp(-1.05))  # the geometric mean of 0.905 and 0.135
    assert answer_confidence(Completion(text="x", prompt_tokens=1, completion_tokens=1, seconds=0)) is None


def structured(llm) -> tuple[object, dict]:
    """One structured call as a route makes it: booked by call_llm, a failure flagged by the caller."""
    usage, trace = Usage(), Trace()
    try:
        c = call_llm(llm, MSGS, purpose="decompose", usage=usage, trace=trace, schema=SCHEMA)
    except StructuredOutputError as e:
        flag(trace, f"decomposition malformed after retry ({e})")
        c = e
    for call in trace["llm_calls"]:  # what a rerun may change: it is cached and takes no time
        call.pop("cached"), call.pop("seconds")
    return c, trace, usage


def test_a_reply_that_succeeded_on_its_retry_reruns_from_the_cache_with_the_same_trace(tmp_path):
    backend = ScriptedLLM(['{"answer": 5', {"answer": 5}])  # broken JSON, then valid
    first, trace, _ = structured(CachedLLM(backend, tmp_path / "c.sqlite"))
    rerun = ScriptedLLM([])  # any request it got would fail the test: it has no reply to give
    again, trace2, usage = structured(CachedLLM(rerun, tmp_path / "c.sqlite"))
    assert len(backend.calls) == 2 and rerun.calls == []
    assert again.data == first.data == {"answer": 5} and again.cached
    assert trace2 == trace and trace["llm_calls"][0]["attempts"] == 2
    assert usage.llm_calls == usage.cached_calls == 2  # a fully cached answer, as benchmarks tell it


def test_a_structured_call_that_failed_twice_reruns_from_the_cache_and_fails_the_same_way(tmp_path):
    backend = ScriptedLLM(["not json", {"answer": "five"}])
    first, trace, _ = structured(CachedLLM(backend, tmp_path / "c.sqlite"))
    rerun = ScriptedLLM([])
    again, trace2, usage = structured(CachedLLM(rerun, tmp_path / "c.sqlite"))
    assert isinstance(first, StructuredOutputError) and str(again) == str(first)
    assert len(backend.calls) == 2 and rerun.calls == []
    assert trace2 == trace and len(trace["flags"]) == 1 and len(trace["llm_calls"]) == 2
    assert usage.llm_calls == usage.cached_calls == 2


def test_a_run_cut_after_a_failed_attempt_resumes_with_the_retry_only(tmp_path):
    backend = ScriptedLLM(["not json", LLMError("endpoint gone")])
    with pytest.raises(LLMError, match="endpoint gone"):
        CachedLLM(backend, tmp_path / "c.sqlite").chat(MSGS, schema=SCHEMA)
    rerun = ScriptedLLM([{"answer": 5}])
    c = CachedLLM(rerun, tmp_path / "c.sqlite").chat(MSGS, schema=SCHEMA)
    assert c.data == {"answer": 5} and c.attempts == 2
    assert len(rerun.calls) == 1 and rerun.calls[0]["messages"][1] == {"role": "assistant", "content": "not json"}


def test_a_kept_reply_cut_at_the_token_limit_replays_as_cut_and_is_not_retried_on_the_rerun(tmp_path):
    backend = ScriptedLLM([Cut('{"answer": '), {"answer": 5}])
    llm = CachedLLM(backend, tmp_path / "c.sqlite")
    with pytest.raises(StructuredOutputError, match="cut off"):
        llm.chat(MSGS, schema=SCHEMA)
    with pytest.raises(StructuredOutputError, match="cut off"):  # replayed, finish reason included
        CachedLLM(ScriptedLLM([]), tmp_path / "c.sqlite").chat(MSGS, schema=SCHEMA)
    assert len(backend.calls) == 1
