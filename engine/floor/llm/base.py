"""The LLM interface every route talks to, the spec string that picks a backend, and the
one helper routes use to make a call and book its cost.

Contract of `LLM.chat`:
- messages: OpenAI-style [{"role": "system"|"user"|"assistant", "content": str}].
- schema: a JSON schema (dict) or None. With a schema the backend constrains decoding to it
  (llama.cpp grammar / OpenAI response_format; an endpoint that refuses the schema as a
  response format gets JSON mode or the schema in the prompt, flagged), parses and validates
  the text (jsonschema); on failure it retries once with the validation error appended to the
  conversation; if the retry fails too it raises StructuredOutputError carrying both
  completions. engine.floor.llm.structured holds that logic, for every backend.
- Returns a Completion; temperature defaults to 0 for reproducibility.
- Transport failures (timeouts, 429, 5xx, connection; from a remote endpoint also a malformed
  body or an empty completion) are retried with backoff inside the backend and end in LLMError.
- Inside `answer_scope` (RoutedRAG opens one per answer) a call also ends within the answer's
  time limit and fails fast on an endpoint that already gave up in that answer (`open_call`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from engine.floor.base.errors import DeadlineError, LLMError, LogicRouteError, StructuredOutputError
from engine.floor.base.trace import Trace
from engine.floor.base.types import Completion, Usage
from engine.floor.llm.urls import check_base_url, redact

DEFAULT_LLM = "local:qwen2.5-coder-1.5b"


class LLM(Protocol):
    name: str  # the spec string it was made from, used in cache keys and cards

    def chat(
        self, messages: list[dict], *, schema: dict | None = None, max_tokens: int = 256, temperature: float = 0.0
    ) -> Completion: ...


@dataclass(frozen=True)
class LLMSettings:
    """How long a remote backend waits for its endpoint. None leaves the choice to the next
    source: the spec's query, then the settings passed in code, then the backend's default. The
    local backend runs in process and takes neither."""

    timeout: float | None = None  # seconds one try may wait for the response
    retries: int | None = None  # extra tries after the first on transient failures

    def __post_init__(self) -> None:
        if self.timeout is not None and not (isinstance(self.timeout, (int, float)) and self.timeout > 0):
            raise LogicRouteError(f"LLM timeout must be a number of seconds > 0, got {self.timeout!r}")
        if self.retries is not None and (
            not isinstance(self.retries, int) or isinstance(self.retries, bool) or self.retries < 0
        ):
            raise LogicRouteError(f"LLM retries must be an integer >= 0, got {self.retries!r}")

    def over(self, fallback: "LLMSettings | None") -> "LLMSettings":
        """These settings, with what they leave open taken from `fallback`."""
        if fallback is None:
            return self
        return replace(self, **{k: getattr(fallback, k) for k in SETTING_KEYS if getattr(self, k) is None})

    def query(self) -> str:
        """The spec's query form: 'timeout=10&retries=1' ('' when nothing is set)."""
        return "&".join(f"{k}={getattr(self, k):g}" for k in SETTING_KEYS if getattr(self, k) is not None)


SETTING_KEYS = ("timeout", "retries")


def estimate_prompt_tokens(messages: list[dict]) -> int:
    """An upper estimate of a prompt's tokens before it is sent: English runs ~0.75 words and
    ~4 characters a token; names and numbers split finer, hence the larger of words / 0.75 and
    characters / 3."""
    text = " ".join(m["content"] for m in messages)
    return int(max(len(text.split()) / 0.75, len(text) / 3)) + 1


def parse_settings(pairs: list[str], where: str) -> LLMSettings:
    """LLMSettings from 'timeout=10', 'retries=1' pairs; `where` names their source in errors."""
    values: dict[str, Any] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        key = key.strip()
        if not eq or key not in SETTING_KEYS:
            raise LogicRouteError(f"bad LLM setting {redact(pair)!r} in {where}: expected timeout=SECONDS or retries=N")
        values[key] = _setting_value(key, value.strip(), where)
    return LLMSettings(**values)


def _setting_value(key: str, value: str, where: str) -> float | int:
    try:
        return float(value) if key == "timeout" else int(value)
    except ValueError:
        kind = "a number of seconds" if key == "timeout" else "a whole number"
        raise LogicRouteError(f"bad LLM setting {key}={value!r} in {where}: expected {kind}") from None


@dataclass(frozen=True)
class LLMSpec:
    backend: str  # "local" | "openai"
    model: str
    base_url: str | None = None
    settings: LLMSettings = LLMSettings()

    def __str__(self) -> str:
        query = self.settings.query()
        return (
            f"{self.backend}:{self.model}"
            + (f"@{self.base_url}" if self.base_url else "")
            + (f"?{query}" if query else "")
        )


def parse_spec(spec: str) -> LLMSpec:
    """'local:qwen2.5-coder-1.5b', 'openai:gpt-4o-mini', 'openai:MODEL@http://host:port/v1'.

    A remote spec may end in settings: 'openai:MODEL@BASE_URL?timeout=10&retries=1' (a base
    URL with a query string of its own is therefore not supported)."""
    spec = (spec or "").strip()
    shown = repr(redact(spec))  # errors name the spec without its credentials
    backend, sep, rest = spec.partition(":")
    if not sep or backend not in ("local", "openai") or not rest:
        raise LogicRouteError(
            f"bad LLM spec {shown}: expected 'local:MODEL', 'openai:MODEL' or 'openai:MODEL@BASE_URL'"
        )
    rest, has_query, query = rest.partition("?")
    model, at, base_url = rest.partition("@")
    if backend == "local" and (at or has_query):
        raise LogicRouteError(f"bad LLM spec {shown}: a local model takes no @BASE_URL and no ?settings")
    if not model:
        raise LogicRouteError(f"bad LLM spec {shown}: no model name")
    if at:
        check_base_url(base_url, f"LLM spec {shown}")
    settings = parse_settings(query.split("&"), f"LLM spec {shown}") if has_query else LLMSettings()
    return LLMSpec(backend, model, base_url or None, settings)


# --- One answer's limits: its end and the endpoints that gave up in it --------------------

# The share of an answer's time limit that solving leaves to the logic route's final answer: a
# step cut at its end still leaves that one call over the notes and a few passages (about one
# step's prompt) time to be made inside the limit.
RESERVE_SHARE = 0.25


@dataclass
class AnswerScope:
    """What the LLM calls of one answer share. `end` (time.perf_counter): no call starts after it
    and none runs past it; `limit`: the seconds it stands for, as the caller gave them (for the
    messages). A call made while `solving()` ends `reserve` seconds earlier: the logic route
    keeps the end of the limit for its final answer. `failed`: endpoint name -> why it gave up."""

    end: float | None = None
    limit: float | None = None
    reserve: float = 0.0
    failed: dict[str, str] = field(default_factory=dict)

    def solving_end(self) -> float | None:
        """When the logic route's solving calls must be over (None: no limit)."""
        return None if self.end is None else self.end - self.reserve


@dataclass(frozen=True)
class CallWindow:
    """How long one call may wait: until `end` (time.perf_counter; None = no limit). `limit`: the
    answer's time limit, for the message of a call it cuts."""

    end: float | None = None
    limit: float | None = None

    def stop_words(self) -> str:
        """How a call this window cut is described: 'stopped at the 3 s limit'."""
        return f"stopped at the {seconds_words(self.limit)} s limit" if self.limit is not None else "stopped"

    def leaves(self, seconds: float) -> bool:
        """Whether a try could still start after waiting `seconds`."""
        return self.end is None or time.perf_counter() + seconds < self.end


_ANSWER_SCOPE: ContextVar[AnswerScope | None] = ContextVar("logicroute_answer_scope", default=None)
_SOLVING: ContextVar[bool] = ContextVar("logicroute_solving", default=False)


@contextmanager
def answer_scope(
    max_seconds: float | None = None, *, start: float | None = None, hard_seconds: float | None = None
) -> Iterator[AnswerScope]:
    """Every LLM call made inside (in this thread) belongs to one answer that must be over
    `max_seconds` after `start` (time.perf_counter; default now), or `hard_seconds` after it when
    that comes first (a server's request deadline). Its last RESERVE_SHARE is kept from solving
    calls (`solving`) for the logic route's final answer."""
    t0 = time.perf_counter() if start is None else start
    given = [s for s in (max_seconds, hard_seconds) if s is not None]
    limit = min(given) if given else None
    scope = AnswerScope() if limit is None else AnswerScope(t0 + limit, limit, RESERVE_SHARE * limit)
    token = _ANSWER_SCOPE.set(scope)
    try:
        yield scope
    finally:
        _ANSWER_SCOPE.reset(token)


@contextmanager
def solving() -> Iterator[None]:
    """The LLM calls made inside (in this thread) are solving steps: they end where the answer
    scope's reserve for the final answer begins."""
    token = _SOLVING.set(True)
    try:
        yield
    finally:
        _SOLVING.reset(token)


def open_call(endpoint: str) -> CallWindow:
    """What a backend asks before it sends anything. Raises LLMError, without waiting, when
    `endpoint` already gave up in this answer, or DeadlineError when the call's time is up."""
    scope = _ANSWER_SCOPE.get()
    if scope is None:
        return CallWindow()
    if endpoint in scope.failed:
        raise LLMError(f"{scope.failed[endpoint]} (earlier in this answer; not tried again)")
    end = scope.solving_end() if _SOLVING.get() else scope.end
    if end is None:
        return CallWindow()
    window = CallWindow(end, limit=scope.limit)
    if time.perf_counter() >= end:
        raise DeadlineError(f"{window.stop_words()}: no further LLM call")
    return window


def solving_time_up() -> bool:
    """Whether this answer's time for solving calls has passed (the final answer's may remain)."""
    scope = _ANSWER_SCOPE.get()
    end = None if scope is None else scope.solving_end()
    return end is not None and time.perf_counter() >= end


def stopped_words(seconds: float) -> str:
    """'stopped at the 3 s limit': the answer's own limit as its caller gave it when an answer
    scope is open (a route only knows what is left of it, 0.95 s after an escalation), else
    `seconds`."""
    scope = _ANSWER_SCOPE.get()
    limit = scope.limit if scope is not None and scope.limit is not None else seconds
    return f"stopped at the {seconds_words(limit)} s limit"


def seconds_words(seconds: float) -> str:
    """A limit as a person reads it: 3 -> '3', 7.9981 -> '8', 2.5 -> '2.5', 0.0456 -> '0.046'
    (a server's deadline arrives as the seconds left, never a round number)."""
    return f"{round(seconds, 1):g}" if seconds >= 1 else f"{seconds:.2g}"


def record_failure(endpoint: str, message: str) -> None:
    """The endpoint gave up: later calls of this answer fail fast (see open_call). Never for a
    call the answer's own deadline cut: that says nothing about the endpoint."""
    scope = _ANSWER_SCOPE.get()
    if scope is not None:
        scope.failed[endpoint] = message


def call_llm(
    llm: LLM,
    messages: list[dict],
    *,
    purpose: str,
    usage: Usage,
    trace: Trace,
    schema: dict | None = None,
    max_tokens: int = 256,
) -> Completion:
    """Make one call, add its cost to `usage` and log it in trace.llm_calls.

    A StructuredOutputError is booked too (its attempts cost tokens) and re-raised, so the
    caller decides the visible fallback."""
    calls = trace.llm_calls
    try:
        c = llm.chat(messages, schema=schema, max_tokens=max_tokens, temperature=0.0)
    except StructuredOutputError as e:
        for a in e.completions:
            usage.add(a)
            calls.append(_log(purpose, a, error=str(e)))
        _flag_structured_via(trace, purpose, e.completions[-1:])
        raise
    usage.add(c)
    calls.append(_log(purpose, c))
    _flag_structured_via(trace, purpose, [c])
    if not c.text.strip():  # a backend that lets a blank completion through: make it visible
        flag(trace, f"the LLM returned a blank completion for {purpose}")
    return c


_STRUCTURED_VIA = {
    "json_object": "JSON mode and the schema in the prompt",
    "prompt": "the schema in the prompt only (JSON mode refused too)",
}


def _flag_structured_via(trace: Trace, purpose: str, completions: list[Completion]) -> None:
    """An endpoint that refused the schema as a response format answered under a weaker
    constraint (engine.floor.llm.openai_api): visible, as every fallback is."""
    via = next((c.structured_via for c in completions if c.structured_via), None)
    if via is not None:
        flag(trace, f"the endpoint refused a JSON schema response format: {purpose} asked with {_STRUCTURED_VIA[via]}")


def _log(purpose: str, c: Completion, error: str | None = None) -> dict[str, Any]:
    d = {
        "purpose": purpose,
        "prompt_tokens": c.prompt_tokens,
        "completion_tokens": c.completion_tokens,
        "seconds": round(c.seconds, 3),
        "cached": c.cached,
    }
    if c.attempts > 1:
        d["attempts"] = c.attempts
    if c.structured_via:
        d["structured_via"] = c.structured_via
    confidence = answer_confidence(c)
    if confidence is not None:
        d["confidence"] = round(confidence, 4)
    if error:
        d["error"] = error
    return d


def answer_confidence(c: Completion) -> float | None:
    """How sure the model was of its reply: the geometric mean of its tokens' probabilities
    (exp of their mean log-probability), in (0, 1]. None when the backend gave no log-probabilities."""
    if not c.token_logprobs:
        return None
    return math.exp(sum(c.token_logprobs) / len(c.token_logprobs))


def flag(trace: Trace, message: str) -> None:
    """Record a visible fallback in the trace."""
    trace.flag(message)


class Stopwatch:
    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0
