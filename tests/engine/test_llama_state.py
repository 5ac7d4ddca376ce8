"""Lean model states (engine.floor.llm.llama_state): the prefix cache restores them without the logits
array, and the real model then replies exactly as it does from a fresh evaluation."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from engine.floor.llm import llama_state

_USER_CACHE_DIR = os.environ.get("LOGICROUTE_CACHE_DIR")

SYSTEM = {
    "role": "system",
    "content": "Answer from the passages in one short sentence. "
    + " ".join(f"Rule {i}: quote the passage's own words." for i in range(10)),
}


def ask(question: str) -> list[dict]:
    passages = "[1] Jaws is a 1975 film directed by Steven Spielberg, born in Cincinnati in 1946."
    return [SYSTEM, {"role": "user", "content": f"Passages:\n{passages}\n\nQuestion: {question}"}]


def test_a_model_that_keeps_every_logit_keeps_the_stock_pair():
    llama = SimpleNamespace(_logits_all=True, save_state="stock", load_state="stock")
    llama_state.install(llama)
    assert llama.save_state == "stock" and llama.load_state == "stock"


@pytest.mark.local_llm
def test_replies_from_restored_lean_states_equal_fresh_ones(monkeypatch):
    from llama_cpp import Llama

    from engine.floor.llm.model_files import model_path

    if _USER_CACHE_DIR:
        monkeypatch.setenv("LOGICROUTE_CACHE_DIR", _USER_CACHE_DIR)
    path = str(model_path("qwen2.5-coder-1.5b"))

    def reply(llama, messages):
        r = llama.create_chat_completion(messages=messages, temperature=0.0, max_tokens=24, seed=0)
        return r["choices"][0]["message"]["content"]

    questions = ["Who directed Jaws?", "Where was the director of Jaws born?", "When did Jaws come out?"]
    fresh = []
    for q in questions:  # a model per question: nothing restored, nothing reused
        fresh.append(reply(Llama(model_path=path, n_ctx=1024, seed=0, verbose=False), ask(q)))
    cached = Llama(model_path=path, n_ctx=1024, seed=0, verbose=False)
    llama_state.install(cached)
    cached.set_cache(llama_state.prefix_cache(256 << 20))
    replies = [reply(cached, ask(q)) for q in questions]
    replies[0] = reply(cached, ask(questions[0]))  # restored from the cache, not the live context
    assert replies == fresh
    states = list(cached.cache.cache_state.values())
    assert states and all(s.scores.shape[0] == 1 for s in states)  # one row, not n_batch x vocabulary

    stock = Llama.save_state(cached)  # a state saved the stock way (bytes) restores as well
    reply(cached, [{"role": "user", "content": "Say hi."}])
    cached.load_state(stock)
    assert cached.n_tokens == stock.n_tokens and cached._requires_eval
