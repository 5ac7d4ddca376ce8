"""The local backend: a GGUF model run in process by llama-cpp-python (CPU).

The model loads on the first chat, once per process per (file, context size), and every call
on it holds that model's lock: a llama.cpp context is not thread-safe.

Prompt evaluation dominates on CPU (~50 tokens/s here), and every prompt of one kind starts with
the same system text and few-shot examples. A prefix cache keeps the model state after recent
calls and restores the one sharing the longest prefix with the next prompt, so only the new
suffix is evaluated (a 729-token decomposition prompt: 19 tokens evaluated, 24 s -> 8 s).
`Completion.prompt_tokens_evaluated` reports what was evaluated. The cache changes speed only.

Three changes to llama-cpp-python's internals make the one decoding path (measured against the
stock library, docs/results/llm/bench_logic_quiet.md and bench_logic_lookup_draft.md; each has a
test against the stock path): engine.floor.llm.llama_state saves and restores prefix-cache states
without the 311 MB logits copy (same tokens, ~1 s a call less); engine.floor.llm.grammar_first shows a
JSON grammar the top candidates instead of the whole vocabulary (same tokens, 0.86x the LLM
time); engine.floor.llm.lookup_draft decodes several tokens a pass where the reply repeats its context
(0.80-0.86x the LLM time, F1 within a question's noise). They reach into private attributes, so
they are made for one library version, LLAMA_CPP_VERSION (pinned in pyproject's extras); under
any other the stock library decodes, with a warning.
llama-cpp-python tokenizes the rendered chat template with special tokens on: every message is
neutralised first against the model's own control tokens (engine.floor.llm.control_tokens), so no
document or question can open a turn of its own.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from engine.floor.base.errors import LLMError
from engine.floor.base.types import Completion
from engine.floor.llm.base import open_call
from engine.floor.llm.control_tokens import marker_pattern, neutralise_messages, vocabulary_markers
from engine.floor.llm.structured import chat_structured

_REGISTRY: dict[tuple[str, int], tuple[Any, threading.Lock]] = {}
_REGISTRY_LOCK = threading.Lock()
PREFIX_CACHE_MB = 1024  # model states kept for the prefix cache
LLAMA_CPP_VERSION = "0.3.36"  # the llama-cpp-python whose internals grammar_first, llama_state, lookup_draft patch
log = logging.getLogger("logicroute.llm")


class _EvalCounter:
    """Counts the prompt tokens llama.cpp evaluates in a call (the first eval() of a generation
    gets the prompt's uncached suffix) and keeps the log-probability of each generated token,
    read when it is sampled from the logits of its own position (a verified draft batch holds
    several). The final token (end of text, or the max_tokens-th) has no entry, as when each
    sampled token was fed back alone and read there: the confidences were calibrated so."""

    def __init__(self, llama: Any) -> None:
        self.first: int | None = None
        self.sampled: list[float | None] = []
        inner_eval, inner_sample = llama.eval, llama.sample

        def counting_eval(tokens) -> None:
            if self.first is None:
                self.first = len(tokens)
            inner_eval(tokens)

        def recording_sample(*args, **kwargs):
            idx = kwargs.get("idx")
            row = -1 if idx is None else idx - llama.n_tokens
            token = inner_sample(*args, **kwargs)
            self.sampled.append(_logprob_of(llama, token, row))
            return token

        llama.eval, llama.sample = counting_eval, recording_sample

    def reset(self) -> None:
        self.first, self.sampled = None, []

    @property
    def logprobs(self) -> list[float]:
        return [x for x in self.sampled[:-1] if x is not None]


def _logprob_of(llama: Any, token: int, row: int) -> float | None:
    """log p(token) under the logits of output `row` of the last batch (-1: its last position);
    None if unreadable (a confidence is a bonus: it never fails a call)."""
    import llama_cpp
    import numpy as np

    try:
        pointer = llama_cpp.llama_get_logits_ith(llama._ctx.ctx, row)
        logits = np.ctypeslib.as_array(pointer, shape=(llama.n_vocab(),)).astype(np.float64)
    except Exception:  # llama-cpp-python internals differ across versions
        return None
    top = logits.max()
    return float(logits[token] - (top + np.log(np.exp(logits - top).sum())))


def patches_apply(version: str) -> bool:
    """Whether the internals patches fit this llama-cpp-python version; a warning when not."""
    if version == LLAMA_CPP_VERSION:
        return True
    log.warning(
        f"llama-cpp-python {version} is not {LLAMA_CPP_VERSION}: decoding with the stock library "
        f"(slower; pip install llama-cpp-python=={LLAMA_CPP_VERSION} for the faster path)"
    )
    return False


def usable_cpus() -> int:
    """The CPUs this process may run on: `taskset -c 0 logicroute ...` gives the model one thread,
    so two jobs can share a machine's cores instead of oversubscribing them."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _shared_llama(path: Path, n_ctx: int, n_threads: int) -> tuple[Any, threading.Lock]:
    key = (str(path), n_ctx)
    with _REGISTRY_LOCK:
        if key not in _REGISTRY:
            try:
                from llama_cpp import Llama
            except ImportError as e:
                raise LLMError(
                    "the local LLM needs llama-cpp-python: pip install "
                    "'logicroute[local]' (or `make install` in a checkout)"
                ) from e
            try:
                llama = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, seed=0, verbose=False)
            except Exception as e:  # llama.cpp reports load failures as ValueError/RuntimeError
                raise LLMError(f"cannot load local model {path}: {e}") from e
            import llama_cpp

            from engine.floor.llm import llama_state

            patched = patches_apply(llama_cpp.__version__)
            if patched:
                from engine.floor.llm import grammar_first

                grammar_first.install(llama)
                llama_state.install(llama)
            llama.set_cache(llama_state.prefix_cache(PREFIX_CACHE_MB << 20))
            if patched:
                from engine.floor.llm import lookup_draft

                lookup_draft.install(llama)
            llama._logicroute_evals = _EvalCounter(llama)
            llama._logicroute_markers = marker_pattern(vocabulary_markers(llama))
            _REGISTRY[key] = (llama, threading.Lock())
        return _REGISTRY[key]


class LocalLLM:
    """`model` is a name from engine.floor.llm.model_files.MODELS or a path to a .gguf file."""

    def __init__(self, model: str = "qwen2.5-coder-1.5b", n_ctx: int = 4096, n_threads: int | None = None) -> None:
        self.model = model
        self.n_ctx = n_ctx
        self.n_threads = n_threads or usable_cpus()
        self.name = f"local:{model}"

    def _path(self) -> Path:
        if self.model.endswith(".gguf"):
            p = Path(self.model).expanduser()
            if not p.is_file():
                raise LLMError(f"local model file not found: {p}")
            return p
        from engine.floor.llm.model_files import model_path

        return model_path(self.model)

    def chat(
        self, messages: list[dict], *, schema: dict | None = None, max_tokens: int = 256, temperature: float = 0.0
    ) -> Completion:
        open_call(self.name)  # an in-process call cannot be cut short: it only must not start late

        def send(msgs: list[dict]) -> Completion:
            # loaded here, not before: a rerun whose attempts the cache replays loads no model
            llama, lock = _shared_llama(self._path(), self.n_ctx, self.n_threads)
            markers = getattr(llama, "_logicroute_markers", None)  # None: not a llama_cpp.Llama, the common ones
            kwargs: dict[str, Any] = dict(
                messages=neutralise_messages(msgs, markers), temperature=temperature, max_tokens=max_tokens, seed=0
            )
            if schema is not None:
                # llama.cpp turns the schema into a grammar: decoding cannot leave it
                kwargs["response_format"] = {"type": "json_object", "schema": schema}
            with lock:
                counter = getattr(llama, "_logicroute_evals", None)  # None: not a llama_cpp.Llama
                if counter is not None:
                    counter.reset()
                draft = getattr(llama, "draft_model", None)
                if draft is not None and hasattr(draft, "reset"):
                    draft.reset()
                t0 = time.perf_counter()
                try:
                    r = llama.create_chat_completion(**kwargs)
                except ValueError as e:
                    if "context window" in str(e):  # "Requested tokens (N) exceed context window of M"
                        raise LLMError(
                            f"prompt too long for {self.name}: {e}; shorten the question or the retrieved context"
                        ) from e
                    raise LLMError(f"{self.name} failed: {e}") from e
                except RuntimeError as e:
                    raise LLMError(f"{self.name} failed: {e}") from e
                seconds = time.perf_counter() - t0
                # no eval at all = the whole prompt was already in the context
                evaluated = (counter.first or 0) if counter is not None else None
                logprobs = list(counter.logprobs) if counter is not None else None
            usage = r.get("usage") or {}
            return Completion(
                text=r["choices"][0]["message"].get("content") or "",
                prompt_tokens=int(usage.get("prompt_tokens", 0)),
                completion_tokens=int(usage.get("completion_tokens", 0)),
                seconds=seconds,
                model=self.name,
                prompt_tokens_evaluated=evaluated,
                token_logprobs=logprobs,
                finish_reason=r["choices"][0].get("finish_reason"),
            )

        if schema is None:
            return send(messages)
        return chat_structured(send, messages, schema)
