"""Prompt-lookup drafting (engine.floor.llm.lookup_draft): what it proposes, which batches ask for
every position's logits, and that the real local model still writes the right replies with it,
in fewer forward passes."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from engine.floor.llm import lookup_draft
from engine.floor.llm.lookup_draft import LookupDraft
from tests.engine.test_grammar_first import SCHEMA, STEP

_USER_CACHE_DIR = os.environ.get("LOGICROUTE_CACHE_DIR")


def ids(*tokens: int) -> np.ndarray:
    return np.array(tokens, dtype=np.intc)


def test_it_drafts_what_followed_the_last_earlier_occurrence_of_the_longest_tail():
    draft = LookupDraft(min_ngram=2, max_ngram=4, max_draft=3)
    #          the 2-token tail (7, 8) follows 1 2 and 5 6; the 3-token tail (6, 7, 8) only 5 6
    context = ids(1, 7, 8, 10, 11, 12, 5, 6, 7, 8, 20, 21, 22, 23, 9, 6, 7, 8)
    assert draft(context).tolist() == [20, 21, 22]
    assert draft.pending and draft.drafted == 3
    assert draft(ids(3, 4, 9, 3, 4)).tolist() == [9, 3, 4]  # a match may run into the tail itself


def test_it_drafts_nothing_for_a_tail_it_has_not_seen_or_one_shared_token():
    draft = LookupDraft(min_ngram=2)
    assert draft(ids(1, 2, 3, 4)).tolist() == [] and not draft.pending
    assert draft(ids(5, 9, 1, 2, 9)).tolist() == []  # only the single token 9 recurs
    assert draft(ids(7)).tolist() == [] and draft.drafted == 0


def test_the_draft_ends_where_the_context_does():
    draft = LookupDraft(min_ngram=2, max_draft=15)
    assert draft(ids(1, 2, 3, 1, 2)).tolist() == [3, 1, 2]


class FakeLlama:
    """What install touches of a llama_cpp.Llama, recording the batches it decodes."""

    def __init__(self) -> None:
        self.n_tokens, self.input_ids, self.evals, self.batches = 2, np.zeros(32, dtype=np.intc), [], []
        self._requires_eval = True
        self._ctx = self
        self._batch = self

    def eval(self, tokens):  # the stock Llama.eval: logits of the last position only
        self.evals.append(list(tokens))

    def kv_cache_seq_rm(self, seq, start, end):
        self.removed_from = start

    def set_batch(self, batch, n_past, logits_all):
        self.batches.append((list(batch), n_past, logits_all))

    def decode(self, batch):
        pass


def test_only_a_batch_that_verifies_a_draft_asks_for_every_positions_logits():
    llama = FakeLlama()
    draft = lookup_draft.install(llama)
    assert llama.draft_model is draft
    llama.eval([5, 6, 7])  # the prompt
    assert llama.evals == [[5, 6, 7]] and llama.batches == []
    draft(ids(1, 2, 3, 1, 2))  # hands out [3, 1, 2]
    llama.eval([2, 3, 1, 2])  # the sampled token and the draft
    assert llama.batches == [([2, 3, 1, 2], 2, True)] and llama.n_tokens == 6 and llama.removed_from == 2
    assert llama.input_ids[2:6].tolist() == [2, 3, 1, 2] and not llama._requires_eval
    llama.eval([9])  # no draft handed out since: the stock path again
    assert llama.evals[-1] == [9] and len(llama.batches) == 1


@pytest.mark.local_llm
def test_the_real_model_writes_its_replies_in_fewer_passes(monkeypatch):
    """Every token is still the sampler's pick, grammar included; the batched passes only round
    some logits differently, so the replies are checked for their content, not byte for byte."""
    from llama_cpp import Llama

    from engine.floor.llm.model_files import model_path

    if _USER_CACHE_DIR:
        monkeypatch.setenv("LOGICROUTE_CACHE_DIR", _USER_CACHE_DIR)
    llama = Llama(model_path=str(model_path("qwen2.5-coder-1.5b")), n_ctx=1024, seed=0, verbose=False)
    draft = lookup_draft.install(llama)
    passes = []
    verified = llama.eval
    monkeypatch.setattr(llama, "eval", lambda tokens: (passes.append(len(tokens)), verified(tokens)))
    sentence = "Steven Spielberg (born December 18, 1946) is an American filmmaker."

    def reply(messages, max_tokens, schema=None):
        kw = {"response_format": {"type": "json_object", "schema": schema}} if schema else {}
        r = llama.create_chat_completion(messages=messages, temperature=0.0, max_tokens=max_tokens, seed=0, **kw)
        return r["choices"][0]["message"]["content"], r["usage"]["completion_tokens"]

    copied, n_copied = reply([{"role": "user", "content": f"Repeat exactly: {sentence}"}], 30)
    step, n_step = reply(STEP, 100, SCHEMA)
    assert sentence in copied
    answers = json.loads(step)["answers"]
    assert "Spielberg" in answers["q1"] and "1946" in answers["q2"]
    # one pass per prompt and per generated token without the draft; far fewer with it
    assert draft.drafted > 0 and len(passes) < 0.8 * (n_copied + n_step)
