"""Greedy decoding under a JSON grammar at the cost of a few candidates a token, not the vocabulary.

llama-cpp-python's sampler chain runs the grammar over every token of the vocabulary (151,936 for
Qwen2.5) at every step, which made grammar-constrained generation the slowest part of a logic
answer on CPU. At temperature 0 the token picked is the highest-logit token the grammar accepts,
so the grammar only needs to see the top candidates: this chain shows it the model's best token
alone, and only when it rejects that one the TOP_K highest logits, then the whole vocabulary.
The token picked is the same one either way (ties go to the lower token id, as llama.cpp's
greedy sampler does over the full array); engine/floor/llm/local.py installs it and
tests/engine/test_grammar_first.py checks the outputs against the stock chain.
"""

from __future__ import annotations

import ctypes
from typing import Any

TOP_K = 64  # candidates the grammar sees after it rejects the best one; then the whole vocabulary


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


# llama_token_data as numpy reads it: read through a buffer, not a ctypes array type a call
TOKEN_DATA = [("id", "<i4"), ("logit", "<f4"), ("p", "<f4")]


def _grammar_first_chain(llama: Any, grammar: Any) -> Any:
    """[best candidate alone] -> grammar -> [if rejected: the TOP_K best, then everything] -> greedy.

    The first stage swaps the highest logit to the front and shows the grammar that token alone
    (it accepts the model's own pick at most steps);
    a rejection undoes the swap, so the later passes see the array in token order, as the
    stock chain does."""
    import llama_cpp
    import numpy as np
    from llama_cpp import _internals

    dtype = np.dtype(TOKEN_DATA)
    if dtype.itemsize != ctypes.sizeof(llama_cpp.llama_token_data):
        # installed only under the pinned version (local.patches_apply): a layout change is a broken pin
        raise RuntimeError("llama_token_data changed layout: install the llama-cpp-python that pyproject pins")
    chain = _internals.LlamaSampler()
    grammar_sampler = llama_cpp.llama_sampler_init_grammar(
        llama._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
    )
    step = {"size": 0, "best": 0, "logit": 0.0}

    def view(cur_p, size: int):
        address = ctypes.cast(cur_p.contents.data, ctypes.c_void_p).value
        return np.frombuffer((ctypes.c_char * (size * dtype.itemsize)).from_address(address), dtype=dtype)

    def best_alone(cur_p) -> None:
        arr = cur_p.contents
        n = int(arr.size)
        data = view(cur_p, n)
        best = int(np.argmax(data["logit"]))  # the first of equal maxima: the lower token id
        step.update(size=n, best=best, logit=float(data["logit"][best]))
        if best:
            data[[0, best]] = data[[best, 0]]
        arr.size = 1
        arr.sorted = False

    def rejected_fallback(cur_p) -> None:
        arr = cur_p.contents
        n = step["size"]
        if int(arr.size) == n or np.isfinite(view(cur_p, 1)["logit"][0]):
            return
        data = view(cur_p, n)
        data["logit"][0] = step["logit"]  # the grammar set it to -inf
        if step["best"]:
            data[[0, step["best"]]] = data[[step["best"], 0]]
        if n > TOP_K > 1:
            top = np.argpartition(-data["logit"], TOP_K)[:TOP_K]
            top.sort()  # in token order: the greedy pick's tie-break is unchanged
            rest = np.ones(n, dtype=bool)
            rest[top] = False
            data[:] = np.concatenate([data[top], data[rest]])
            arr.size = TOP_K
            llama_cpp.llama_sampler_apply(grammar_sampler, cur_p)
            if np.isfinite(view(cur_p, TOP_K)["logit"]).any():
                return
            # every top candidate is -inf now, as the grammar would leave it: the rest get their turn
            data[:] = data[np.argsort(data["id"], kind="stable")]
        arr.size = n
        llama_cpp.llama_sampler_apply(grammar_sampler, cur_p)

    chain.add_custom(best_alone)
    llama_cpp.llama_sampler_chain_add(chain.sampler, grammar_sampler)  # the chain owns and frees it
    chain.add_custom(rejected_fallback)
    chain.add_greedy()
    return chain
