"""Several free-text LLM calls made at the same time (engine.llm.base.chat_many): what any backend
returns for them (one chat after another), what the cache answers itself and what it sends on,
how the local backend's batch splits its time, and the real model decoding a batch (marked
`local_llm`)."""

from __future__ import annotations

import os
import time
from types import SimpleNamespace

import pytest

from engine.base.errors import LLMError
from engine.base.types import Completion, Usage
from engine.llm import local_batched
from engine.llm.base import chat_many
from engine.llm.cache import CachedLLM, cache_key
from tests.fakes import ScriptedLLM

_USER_CACHE_DIR = os.environ.get("LOGICROUTE_CACHE_DIR")  # read at import, before isolated_llm_env hides it
pytestmark = pytest.mark.usefixtures("isolated_llm_env")  # no user cache, no real key or endpoint


def ask(q: str) -> list[dict]:
    return [{"role": "user", "content": q}]


def test_a_backend_without_its_own_chat_many_answers_each_request_as_chat_would_in_order():
    llm = ScriptedLLM(rules={"one": "1", "two": LLMError("endpoint down"), "three": "3"}, delay=0.01)
    got = chat_many(llm, [ask("one"), ask("two"), ask("three")], max_tokens=32)
    assert [c.text if isinstance(c, Completion) else str(c) for c in got] == ["1", "endpoint down", "3"]
    alone = ScriptedLLM(rules={"one": "1"}).chat(ask("one"), max_tokens=32)
    assert got[0] == alone
    assert [c["max_tokens"] for c in llm.calls] == [32, 32, 32]


class BatchingLLM:
    """A backend with a chat_many of its own: records each batch it gets."""

    name = "fake:batching"

    def __init__(self):
        self.batches: list[list[str]] = []

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0):
        raise AssertionError("a batched request must not go one at a time")

    def chat_many(self, requests, *, max_tokens=256):
        self.batches.append([m[-1]["content"] for m in requests])
        return [Completion(f"re {m[-1]['content']}", 10, 3, 0.5, model=self.name) for m in requests]


class SingleLLM(BatchingLLM):
    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0):
        return Completion(f"re {messages[-1]['content']}", 10, 3, 0.5, model=self.name)


def test_the_cache_answers_its_hits_and_sends_only_the_misses_together_keeping_them_under_chats_keys(tmp_path):
    path = tmp_path / "c.sqlite"
    CachedLLM(SingleLLM(), path).chat(ask("a"), max_tokens=64)  # asked alone first
    inner = BatchingLLM()
    cached = CachedLLM(inner, path)
    got = cached.chat_many([ask("a"), ask("b"), ask("c")], max_tokens=64)
    assert inner.batches == [["b", "c"]]
    assert [c.text for c in got] == ["re a", "re b", "re c"] and [c.cached for c in got] == [True, False, False]
    # a batched completion answers the same call made alone, and a rerun of the batch sends nothing
    again = CachedLLM(BatchingLLM(), path)
    assert again.chat(ask("b"), max_tokens=64).cached
    assert all(c.cached for c in again.chat_many([ask("c"), ask("b")], max_tokens=64))
    assert again.inner.batches == []
    with __import__("sqlite3").connect(path) as db:
        keys = {k for (k,) in db.execute("SELECT key FROM completions")}
    assert keys == {cache_key("fake:batching", ask(q), None, 64, 0.0) for q in "abc"}


def test_a_failed_request_in_a_batch_is_not_kept_and_is_asked_again(tmp_path):
    class HalfFailing(BatchingLLM):
        def chat_many(self, requests, *, max_tokens=256):
            self.batches.append([m[-1]["content"] for m in requests])
            return [
                LLMError("prompt too long") if "long" in m[-1]["content"] else Completion("ok", 1, 1, 0.1)
                for m in requests
            ]

    inner = HalfFailing()
    cached = CachedLLM(inner, tmp_path / "c.sqlite")
    first = cached.chat_many([ask("short"), ask("long")])
    assert isinstance(first[1], LLMError) and first[0].text == "ok"
    cached.chat_many([ask("short"), ask("long")])
    assert inner.batches == [["short", "long"], ["long"]]


class FakeDecoder:
    """Stands in for BatchedDecoder: each request 'decodes' for 0.01 s per prompt token."""

    n_ctx = 100

    def run(self, llama, seqs):
        for s in seqs:
            time.sleep(0.01 * len(s.prompt))
            s.work = 0.01 * len(s.prompt)
            s.tokens, s.text, s.finish, s.logprobs = [7, 8], b"done", "stop", [-0.1, -0.2, -0.3]


def test_a_batched_calls_seconds_are_shares_of_its_wall_time_by_decode_work_and_sum_to_it(monkeypatch):
    monkeypatch.setattr(
        local_batched, "render", lambda llama, messages, max_tokens: ([1] * len(messages[-1]["content"]), [])
    )
    llama = SimpleNamespace(_logicroute_batched=FakeDecoder())
    t0 = time.perf_counter()
    got = local_batched.decode_many(llama, [ask("x" * 3), ask("x" * 500), ask("x" * 9)], 16, "local:m")
    wall = time.perf_counter() - t0
    ok = [c for c in got if isinstance(c, Completion)]
    assert isinstance(got[1], LLMError) and "prompt too long for local:m" in str(got[1])  # 500 tokens > n_ctx 100
    usage = Usage()
    for c in ok:
        usage.add(c)
    assert wall * 0.95 <= usage.llm_seconds <= wall  # nothing counted twice, nothing lost
    assert ok[1].seconds == pytest.approx(3 * ok[0].seconds)  # 9 prompt tokens' work against 3
    assert (ok[0].prompt_tokens, ok[0].completion_tokens, ok[0].finish_reason) == (3, 2, "stop")
    assert ok[0].token_logprobs == [-0.1, -0.2]  # as chat's: the final sampled token has none


def test_a_reply_ends_as_create_completion_ends_it(monkeypatch):
    """End of generation: not counted, text so far. A stop string: the text cut before it. max_tokens: "length"."""
    import llama_cpp

    eog = 0
    monkeypatch.setattr(llama_cpp, "llama_vocab_is_eog", lambda vocab, token: token == eog)
    pieces = {1: b"Paris", 2: b" is", 3: b"<|im_end|>", 4: b" nice"}
    llama = SimpleNamespace(
        _model=SimpleNamespace(vocab=None), detokenize=lambda toks, prev_tokens=None: b"".join(pieces[t] for t in toks)
    )

    def feed(tokens, max_tokens=8):
        s = local_batched._Seq(0, [9, 9], [b"<|im_end|>"], max_tokens)
        for t in tokens:
            if s.take(llama, t, -0.5):
                return s
        raise AssertionError("the reply did not end")

    s = feed([1, 2, eog])
    assert (s.text, s.finish, s.tokens) == (b"Paris is", "stop", [1, 2])
    s = feed([1, 3, 4])
    assert (s.text, s.finish, s.tokens) == (b"Paris", "stop", [1, 3])
    s = feed([1, 4, 4], max_tokens=3)
    assert (s.text, s.finish, len(s.tokens)) == (b"Paris nice nice", "length", 3)


def test_the_local_backend_batches_only_several_calls_on_a_real_llama(monkeypatch):
    """One request, or a model that is not a llama_cpp.Llama: chat after chat, batching never starts."""
    import threading
    from pathlib import Path

    import engine.llm.local as local

    class FakeLlama:
        def create_chat_completion(self, **kw):
            return {
                "choices": [{"message": {"content": "re " + kw["messages"][-1]["content"]}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 4, "completion_tokens": 2},
            }

    monkeypatch.setattr(local, "_shared_llama", lambda path, n_ctx, n_threads: (FakeLlama(), threading.Lock()))
    monkeypatch.setattr(local.LocalLLM, "_path", lambda self: Path("x.gguf"))
    monkeypatch.setattr(local_batched, "decode_many", lambda *a: pytest.fail("batched a stand-in model"))
    llm = local.LocalLLM()
    assert [c.text for c in llm.chat_many([ask("a")])] == ["re a"]
    assert [c.text for c in llm.chat_many([ask("a"), ask("b")])] == ["re a", "re b"]


# ---------------------------------------------------------------- the real local model


@pytest.mark.local_llm
def test_real_local_model_decodes_calls_together_as_chat_decodes_each(monkeypatch):
    """chat_many against chat, one at a time, on the same three requests. Asserted: each batched
    reply starts with the same first token as chat's (both take it from the logits of a prompt
    evaluated alone; here the shared system text's KV is copied between sequences, so this also
    checks the copy) and is either chat's text, with chat's token counts and finish reason, or
    leaves it only after a common prefix. Not asserted: equal texts throughout, because the
    batched kernels round the logits differently and a near tie can pick another token
    (runs/batched_decode.md)."""
    if _USER_CACHE_DIR:
        monkeypatch.setenv("LOGICROUTE_CACHE_DIR", _USER_CACHE_DIR)
    else:
        monkeypatch.delenv("LOGICROUTE_CACHE_DIR")
    from engine.llm.factory import make_llm

    llm = make_llm("local:qwen2.5-coder-1.5b", cache=False)
    system = {
        "role": "system",
        "content": "You help with a batching test. " + " ".join(f"Rule {i}: reply in English." for i in range(8)),
    }
    requests = [
        [system, *ask("What is 2+3? Answer with the number only.")],
        [system, *ask("Name the capital of France. One word.")],
        [system, *ask("Count from 1 to 50, separated by commas.")],
    ]
    alone = [llm.chat(m, max_tokens=16) for m in requests]
    t0 = time.perf_counter()
    together = llm.chat_many(requests, max_tokens=16)
    wall = time.perf_counter() - t0
    assert all(isinstance(c, Completion) for c in together)
    for a, b in zip(alone, together, strict=True):
        assert a.text[:1] == b.text[:1] and b.prompt_tokens == a.prompt_tokens
        if a.text == b.text:
            assert (b.completion_tokens, b.finish_reason) == (a.completion_tokens, a.finish_reason)
    assert together[0].finish_reason == "stop" and together[0].completion_tokens < 16  # ended at end-of-generation
    assert together[2].finish_reason == "length" and together[2].completion_tokens == 16
    assert "5" in together[0].text and "paris" in together[1].text.lower()
    assert wall * 0.9 <= sum(c.seconds for c in together) <= wall
    # the shared system text was evaluated once: the other sequences copied its KV
    assert together[0].prompt_tokens_evaluated == together[0].prompt_tokens
    assert all(c.prompt_tokens_evaluated < c.prompt_tokens - 50 for c in together[1:])
    print(f"\nchat: {[a.text for a in alone]}\nchat_many: {[b.text for b in together]}")
