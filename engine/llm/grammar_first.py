"""Greedy decoding under a JSON grammar at the cost of a few candidates a token, not the vocabulary.

llama-cpp-python's sampler chain runs the grammar over every token of the vocabulary (151,936 for
Qwen2.5) at every step, which made grammar-constrained generation the slowest part of a logic
answer on CPU. At temperature 0 the token picked is the highest-logit token the grammar accepts,
so the grammar only needs to see the top candidates: this chain moves the TOP_K highest logits
to the front and hands the grammar those alone; only when it rejects all of them does it see the
whole vocabulary again. The token picked is the same one either way (ties go to the lower token
id, as llama.cpp's greedy sampler does over the full array); engine/llm/local.py installs it and
tests/engine/test_grammar_first.py checks the outputs against the stock chain.
"""

from __future__ import annotations

import ctypes
from typing import Any

TOP_K = 64  # candidates the grammar sees first; a rejection of all of them costs one full pass


def install(llama: Any) -> None:
    """Make `llama` (a llama_cpp.Llama) decode grammar-constrained greedy calls this way; any
    other call (sampling, penalties, logits processors, no grammar) keeps the stock chain."""
    stock = llama._init_sampler

    def init_sampler(**kw):
        if (
            kw.get("grammar") is None
            or kw.get("temp") != 0.0
            or kw.get("logits_processor") is not None
            or kw.get("repeat_penalty", 1.0) != 1.0
            or kw.get("frequency_penalty", 0.0) != 0.0
            or kw.get("presence_penalty", 0.0) != 0.0
        ):
            return stock(**kw)
        return _grammar_first_chain(llama, kw["grammar"])

    llama._init_sampler = init_sampler


def _grammar_first_chain(llama: Any, grammar: Any) -> Any:
    import llama_cpp
    import numpy as np
    from llama_cpp import _internals

    chain = _internals.LlamaSampler()
    grammar_sampler = llama_cpp.llama_sampler_init_grammar(
        llama._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
    )
    full = {"size": 0}

    def view(cur_p, size: int):
        arr = cur_p.contents
        return np.ctypeslib.as_array(
            (llama_cpp.llama_token_data * size).from_address(ctypes.addressof(arr.data.contents))
        )

    def top_first(cur_p) -> None:
        arr = cur_p.contents
        n = int(arr.size)
        full["size"] = n
        if n <= TOP_K:
            return
        data = view(cur_p, n)
        logits = data["logit"]
        top = np.argpartition(-logits, TOP_K)[:TOP_K]
        top.sort()  # in token order: the greedy pick's tie-break is unchanged
        rest = np.ones(n, dtype=bool)
        rest[top] = False
        data[:] = np.concatenate([data[top], data[rest]])
        arr.size = TOP_K
        arr.sorted = False

    def all_rejected_fallback(cur_p) -> None:
        arr = cur_p.contents
        n = full["size"]
        if int(arr.size) == n:
            return
        data = view(cur_p, int(arr.size))
        if np.isfinite(data["logit"]).any():
            return
        # every top candidate is -inf now, as the grammar would leave it: the rest get their turn
        arr.size = n
        llama_cpp.llama_sampler_apply(grammar_sampler, cur_p)

    chain.add_custom(top_first)
    llama_cpp.llama_sampler_chain_add(chain.sampler, grammar_sampler)  # the chain owns and frees it
    chain.add_custom(all_rejected_fallback)
    chain.add_greedy()
    return chain
