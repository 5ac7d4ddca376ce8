"""Grammar-first greedy decoding (engine.floor.llm.grammar_first): the same JSON as the stock sampler
chain, from the real local model, on a plain reply and on one where the grammar must overrule
the model's first choices; calls the chain cannot serve keep the stock one."""

from __future__ import annotations

import os

import pytest

from engine.floor.llm import grammar_first

_USER_CACHE_DIR = os.environ.get("LOGICROUTE_CACHE_DIR")

SCHEMA = {
    "type": "object",
    "properties": {
        "memory": {"type": "string"},
        "answers": {
            "type": "object",
            "properties": {"q1": {"type": "string"}, "q2": {"type": "string"}},
            "required": ["q1", "q2"],
            "additionalProperties": False,
        },
    },
    "required": ["memory", "answers"],
    "additionalProperties": False,
}
STEP = [
    {"role": "system", "content": "Answer in JSON: memory (the facts, 40 words at most), then answers."},
    {
        "role": "user",
        "content": "Passages:\n[1] Jaws is a 1975 film directed by Steven Spielberg.\n"
        "[2] Steven Spielberg (born December 18, 1946) is an American filmmaker.\n\n"
        "Sub-questions:\nq1: Who directed Jaws?\nq2: When was #q1 born?",
    },
]
# the model wants to write prose; the grammar allows only a yes/no enum
FORCED = [{"role": "user", "content": "Write a long poem about the sea."}]
FORCED_SCHEMA = {
    "type": "object",
    "properties": {"ok": {"enum": ["yes", "no"]}},
    "required": ["ok"],
    "additionalProperties": False,
}


class Recorder:
    def __init__(self):
        self.stock_calls = 0

    def _init_sampler(self, **kw):
        self.stock_calls += 1
        return "stock"


@pytest.mark.parametrize(
    "kw",
    [
        {"temp": 0.7},
        {"temp": 0.0, "grammar": None},
        {"temp": 0.0, "repeat_penalty": 1.1},
        {"temp": 0.0, "logits_processor": [lambda ids, logits: logits]},
    ],
)
def test_calls_it_cannot_serve_keep_the_stock_chain(kw):
    llama = Recorder()
    grammar_first.install(llama)
    assert llama._init_sampler(**{"grammar": object(), **kw}) == "stock" and llama.stock_calls == 1


@pytest.mark.local_llm
def test_the_real_model_writes_the_same_json_with_either_chain(monkeypatch):
    from llama_cpp import Llama

    from engine.floor.llm.model_files import model_path

    if _USER_CACHE_DIR:
        monkeypatch.setenv("LOGICROUTE_CACHE_DIR", _USER_CACHE_DIR)
    llama = Llama(model_path=str(model_path("qwen2.5-coder-1.5b")), n_ctx=1024, seed=0, verbose=False)

    def reply(messages, schema, max_tokens):
        r = llama.create_chat_completion(
            messages=messages,
            temperature=0.0,
            max_tokens=max_tokens,
            seed=0,
            response_format={"type": "json_object", "schema": schema},
        )
        return r["choices"][0]["message"]["content"]

    stock = [reply(STEP, SCHEMA, 40), reply(FORCED, FORCED_SCHEMA, 12)]
    grammar_first.install(llama)
    assert [reply(STEP, SCHEMA, 40), reply(FORCED, FORCED_SCHEMA, 12)] == stock
    monkeypatch.setattr(grammar_first, "TOP_K", 1)  # the full-vocabulary pass after every rejected pick
    assert [reply(STEP, SCHEMA, 40), reply(FORCED, FORCED_SCHEMA, 12)] == stock
    assert '"memory"' in stock[0] and stock[1].replace(" ", "") in ('{"ok":"yes"}', '{"ok":"no"}')
