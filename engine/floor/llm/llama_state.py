"""Model states for llama-cpp-python's prefix cache, saved and restored without the logits array.

The local backend's prefix cache saves the model state after every call and restores one before
the next. llama-cpp-python's save_state copies its whole logits array (n_batch x vocabulary
floats, hundreds of MB) and its load_state writes it back over every row. Without logits_all
those scores are never read: sampling reads llama.cpp's own logits, and a restored state is
always evaluated again from at least its last prompt token (load_state sets _requires_eval). So
the lean pair below keeps one row of scores and the KV state in the buffer llama.cpp wrote, and
hands that buffer back as it is: the same tokens, faster (tests/engine/test_llm_local.py).
"""

from __future__ import annotations

import ctypes
import types
from typing import Any


def install(llama: Any) -> None:
    """Gives this Llama the lean save_state/load_state; one with logits_all keeps the stock pair
    (its scores are read back for logprobs)."""
    if getattr(llama, "_logits_all", False):
        return
    llama.save_state = types.MethodType(_save_state, llama)
    llama.load_state = types.MethodType(_load_state, llama)


def prefix_cache(capacity_bytes: int) -> Any:
    """llama-cpp-python's RAM cache of model states, keyed by the tokens they hold; its capacity
    counts the KV state, which is all a lean state holds."""
    from llama_cpp import LlamaRAMCache

    return LlamaRAMCache(capacity_bytes=capacity_bytes)


def _save_state(self: Any) -> Any:
    import llama_cpp

    size = int(llama_cpp.llama_state_get_size(self._ctx.ctx))
    buffer = (ctypes.c_uint8 * size)()
    written = int(llama_cpp.llama_state_get_data(self._ctx.ctx, buffer, size))
    if written > size:
        raise RuntimeError("Failed to copy llama state data")
    return llama_cpp.LlamaState(
        scores=self._scores[-1:].copy(),
        input_ids=self.input_ids.copy(),
        n_tokens=self.n_tokens,
        llama_state=buffer,  # read by llama_state_set_data only, never written: no copy needed
        llama_state_size=written,
        seed=self._seed,
    )


def _load_state(self: Any, state: Any) -> None:
    import llama_cpp

    self.input_ids = state.input_ids.copy()
    self.n_tokens = state.n_tokens
    self._requires_eval = True  # the next generate() evaluates a token before it samples
    self._seed = state.seed
    data = state.llama_state
    if not isinstance(data, ctypes.Array):  # a state saved by the stock save_state holds bytes
        data = (ctypes.c_uint8 * state.llama_state_size).from_buffer_copy(data)
    if llama_cpp.llama_state_set_data(self._ctx.ctx, data, state.llama_state_size) != state.llama_state_size:
        raise RuntimeError("Failed to set llama state data")
