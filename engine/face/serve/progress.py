"""Progress of an answer while it is computed: one event per LLM call, for streaming clients.

The routes do not report progress themselves; every step of the logic route is an LLM call
(decompose, solve a rank of sub-questions, reflect, answer), so the server wraps the one shared
LLM in ObservedLLM and each call tells the sink of the request it belongs to. The sink lives
in a ContextVar set on the answering thread, so concurrent requests never see each other's
events, and a request without a sink (not streaming) pays one lookup per call.

The step's name is read off the call's JSON schema (the required keys of the logic prompts'
schemas); an unknown schema is reported as a plain "llm call": the label is for people
watching a stream, nothing depends on it.

The same wrapper stops an answer whose client went away: the request's cancel event (set by
engine.face.serve.app when the connection closes) makes every later call raise ClientGone before it
reaches the LLM, so the call in flight is the last one, and the worker is free for the next
request instead of running the rest of the logic route for nobody.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextvars import ContextVar

from engine.floor.base.errors import LLMError
from engine.floor.base.types import Completion

Sink = Callable[[dict], None]
_SINK: ContextVar[Sink | None] = ContextVar("logicroute_progress_sink", default=None)
_CANCEL: ContextVar[threading.Event | None] = ContextVar("logicroute_request_cancel", default=None)


CLIENT_GONE_STATUS = 499  # nginx's "client closed request": how /metrics counts a dropped answer


class ClientGone(LLMError):
    """The request's client disconnected: its answer makes no further LLM call. An LLMError, so
    the routes end the answer as they do when the LLM stops answering."""


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


def with_sink(sink: Sink | None, job: Callable[[], object], cancel: threading.Event | None = None) -> object:
    """Run `job` with its progress events sent to `sink` (None: dropped); once `cancel` is set,
    its LLM calls raise ClientGone."""
    token, cancel_token = _SINK.set(sink), _CANCEL.set(cancel)
    try:
        return job()
    finally:
        _SINK.reset(token)
        _CANCEL.reset(cancel_token)


def check_cancelled(cancel: threading.Event | None = None) -> None:
    """Raise ClientGone once `cancel` (default: the current request's) is set."""
    cancel = cancel if cancel is not None else _CANCEL.get()
    if cancel is not None and cancel.is_set():
        raise ClientGone("the client went away: its answer makes no further LLM call")


class ObservedLLM:
    """An LLM that reports each call to the current request's sink and refuses calls once the
    request is cancelled; otherwise the LLM it wraps."""

    def __init__(self, llm) -> None:
        self.inner = llm
        self.name = llm.name

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0) -> Completion:
        check_cancelled()
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
