"""Prompt-lookup drafting for the local model: several reply tokens per forward pass where the
reply repeats its context.

A step reply copies names and dates from its passages and notes, and every JSON reply repeats the
key syntax of its prompt's example. Decoding on a CPU is bound by memory bandwidth, so a pass over
a few tokens costs little more than one: before each step the draft looks up the last few tokens
earlier in the context and proposes what followed them there; one pass evaluates the sampled
token and the draft together.

Verification is llama-cpp-python's own speculative loop (`Llama.generate` with a `draft_model`):
each position is sampled by the call's own sampler, grammar included, and the draft is cut at
the first token the sampler does not pick. So every reply token is the sampler's pick, as
without a draft; only the batched arithmetic can round a logit differently.

llama-cpp-python turns on `logits_all` when a draft model is given to its constructor, and then
computes the output layer for every prompt token too. `install` sets the draft on a built model
instead and asks for every position's logits only in the batches that verify a draft.
"""

from __future__ import annotations

from typing import Any

# Longer drafts cost more than they save (most matches run out after a few tokens), and a single
# shared token as the key (MIN_NGRAM 1) drafts wrongly too often (docs/results/llm/bench_logic_lookup_draft.md).
MIN_NGRAM = 2
MAX_NGRAM = 4
MAX_DRAFT = 3


class LookupDraft:
    """Drafts the tokens that followed the most recent earlier occurrence of the longest
    trailing n-gram (MAX_NGRAM down to MIN_NGRAM tokens) of the context; nothing when the
    tail was not seen before."""

    def __init__(self, min_ngram: int = MIN_NGRAM, max_ngram: int = MAX_NGRAM, max_draft: int = MAX_DRAFT) -> None:
        self.min_ngram, self.max_ngram, self.max_draft = min_ngram, max_ngram, max_draft
        self.pending = False  # set when a draft was handed out: the next eval verifies it
        self.drafted = 0  # tokens proposed since the last reset (the tests read it)

    def reset(self) -> None:
        self.pending, self.drafted = False, 0

    def __call__(self, input_ids: Any, /, **_: Any) -> Any:
        import numpy as np

        ids = np.asarray(input_ids)
        n = len(ids)
        draft = ids[:0]
        for size in range(min(self.max_ngram, n - 1), self.min_ngram - 1, -1):
            # windows that start before the tail's own position, so each has a continuation
            windows = np.lib.stride_tricks.sliding_window_view(ids[: n - 1], size)
            hits = np.flatnonzero((windows == ids[n - size :]).all(axis=1))
            if hits.size:
                start = int(hits[-1]) + size
                draft = ids[start : start + self.max_draft]
                break
        self.pending = bool(len(draft))
        self.drafted += len(draft)
        return draft.astype(np.intc)


def install(llama: Any, draft: LookupDraft | None = None) -> LookupDraft | None:
    """Give `llama` (a llama_cpp.Llama) a lookup draft and return it; one with logits_all keeps
    llama-cpp-python's own eval (its scores array must hold every row) and gets no draft."""
    if getattr(llama, "_logits_all", False):
        return None
    draft = draft or LookupDraft()
    stock_eval = llama.eval

    def eval_tokens(tokens) -> None:
        if not draft.pending:
            return stock_eval(tokens)
        draft.pending = False
        _eval_every_position(llama, list(tokens))

    llama.eval = eval_tokens
    llama.draft_model = draft
    return draft


def _eval_every_position(llama: Any, tokens: list[int]) -> None:
    """Llama.eval for one short batch, keeping the logits of every position (the verify loop
    samples each of them)."""
    n_past = llama.n_tokens
    llama._ctx.kv_cache_seq_rm(-1, n_past, -1)
    llama._batch.set_batch(batch=tokens, n_past=n_past, logits_all=True)
    llama._ctx.decode(llama._batch)
    llama.input_ids[n_past : n_past + len(tokens)] = tokens
    llama.n_tokens += len(tokens)
    llama._requires_eval = False
