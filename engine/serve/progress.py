"""Progress of an answer while it is computed: one event per LLM call, for streaming clients.

The routes do not report progress themselves; every step of the logic route is an LLM call
(decompose, solve a rank of sub-questions, reflect, answer), so the server wraps the one shared
LLM in ObservedLLM and each call tells the sink of the request it belongs to. The sink lives
in a ContextVar set on the answering thread, so concurrent requests never see each other's
events, and a request without a sink (not streaming) pays one lookup per call.

The step's name is read off the call's JSON schema (the required keys of the logic prompts'
schemas); an unknown schema is reported as a plain "llm call": the label is for people
watching a stream, nothing depends on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar

from engine.base.types import Completion

Sink = Callable[[dict], None]
_SINK: ContextVar[Sink | None] = ContextVar("logicroute_progress_sink", default=None)


def step_label(schema: dict | None) -> str:
    """What an LLM call is doing, from its JSON schema."""
    if schema is None:
        return "answer or rewrite"
    required = set(schema.get("required") or ())
    if "subquestions" in required:
        return "decompose the question into sub-questions"
    if {"sufficient", "missing"} <= required:
        return "reflect: is the evidence sufficient?"
    if "answered" in required:
        return "self-check: do the passages answer it?"
    if "route" in required:
        return "choose a route"
    if "answers" in required:  # one call per rank: the rank's sub-question ids are the answers' keys
        ids = ((schema.get("properties") or {}).get("answers") or {}).get("required") or []
        return "solve sub-questions " + ", ".join(ids)
    return "llm call"


def emit(event: dict) -> None:
    sink = _SINK.get()
    if sink is not None:
        sink(event)


def with_sink(sink: Sink | None, job: Callable[[], object]) -> object:
    """Run `job` with its progress events sent to `sink` (None: dropped)."""
    token = _SINK.set(sink)
    try:
        return job()
    finally:
        _SINK.reset(token)


class ObservedLLM:
    """An LLM that reports each call to the current request's sink; otherwise the LLM it wraps."""

    def __init__(self, llm) -> None:
        self.inner = llm
        self.name = llm.name

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0) -> Completion:
        if _SINK.get() is None:
            return self.inner.chat(messages, schema=schema, max_tokens=max_tokens, temperature=temperature)
        label = step_label(schema)
        emit({"type": "step_started", "step": label})
        t0 = time.perf_counter()
        c = self.inner.chat(messages, schema=schema, max_tokens=max_tokens, temperature=temperature)
        emit(
            {
                "type": "step_done",
                "step": label,
                "prompt_tokens": c.prompt_tokens,
                "completion_tokens": c.completion_tokens,
                "seconds": round(time.perf_counter() - t0, 3),
                "cached": c.cached,
            }
        )
        return c

    def __getattr__(self, name: str):  # anything else the wrapped backend offers
        return getattr(self.inner, name)
