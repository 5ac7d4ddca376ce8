"""The LLM interface every route talks to, the spec string that picks a backend, and the
one helper routes use to make a call and book its cost.

Contract of `LLM.chat`:
- messages: OpenAI-style [{"role": "system"|"user"|"assistant", "content": str}].
- schema: a JSON schema (dict) or None. With a schema the backend constrains decoding to it
  (llama.cpp grammar / OpenAI response_format), parses and validates the text (jsonschema);
  on failure it retries once with the validation error appended to the conversation; if the
  retry fails too it raises StructuredOutputError carrying both completions.
- Returns a Completion; temperature defaults to 0 for reproducibility.
- Transport failures (timeouts, 429, 5xx, connection) are retried with backoff inside the
  backend and end in LLMError.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from engine.base.errors import LogicRouteError, StructuredOutputError
from engine.base.types import Completion, Usage

DEFAULT_LLM = "local:qwen2.5-coder-1.5b"


class LLM(Protocol):
    name: str  # the spec string it was made from, used in cache keys and cards

    def chat(
        self, messages: list[dict], *, schema: dict | None = None, max_tokens: int = 256, temperature: float = 0.0
    ) -> Completion: ...


@dataclass(frozen=True)
class LLMSpec:
    backend: str  # "local" | "openai"
    model: str
    base_url: str | None = None

    def __str__(self) -> str:
        return f"{self.backend}:{self.model}" + (f"@{self.base_url}" if self.base_url else "")


def parse_spec(spec: str) -> LLMSpec:
    """'local:qwen2.5-coder-1.5b', 'openai:gpt-4o-mini', 'openai:MODEL@http://host:port/v1'."""
    spec = (spec or "").strip()
    backend, sep, rest = spec.partition(":")
    if not sep or backend not in ("local", "openai") or not rest:
        raise LogicRouteError(
            f"bad LLM spec {spec!r}: expected 'local:MODEL', 'openai:MODEL' or 'openai:MODEL@BASE_URL'"
        )
    model, at, base_url = rest.partition("@")
    if backend == "local" and at:
        raise LogicRouteError(f"bad LLM spec {spec!r}: a local model takes no @BASE_URL")
    return LLMSpec(backend, model, base_url or None)


def call_llm(
    llm: LLM,
    messages: list[dict],
    *,
    purpose: str,
    usage: Usage,
    trace: dict,
    schema: dict | None = None,
    max_tokens: int = 256,
) -> Completion:
    """Make one call, add its cost to `usage` and log it in trace["llm_calls"].

    A StructuredOutputError is booked too (its attempts cost tokens) and re-raised, so the
    caller decides the visible fallback."""
    calls = trace.setdefault("llm_calls", [])
    try:
        c = llm.chat(messages, schema=schema, max_tokens=max_tokens, temperature=0.0)
    except StructuredOutputError as e:
        for a in e.completions:
            usage.add(a)
            calls.append(_log(purpose, a, error=str(e)))
        raise
    usage.add(c)
    calls.append(_log(purpose, c))
    return c


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
    if error:
        d["error"] = error
    return d


def flag(trace: dict, message: str) -> None:
    """Record a visible fallback in the trace."""
    trace.setdefault("flags", []).append(message)


class Stopwatch:
    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0


# --- Structured output (shared by every backend) and the factory ------------------------


def chat_structured(send: Callable[[list[dict]], Completion], messages: list[dict], schema: dict) -> Completion:
    """Call `send(messages)`, parse and validate the text against `schema`; on failure retry
    once with the error appended to the conversation, then raise StructuredOutputError.

    The one place this logic lives: every backend calls it with its own raw `send`.
    A success after a retry returns the last completion with the tokens and seconds of both
    attempts summed, so `call_llm` books what the answer really cost."""
    import jsonschema  # lazy: keeps `import engine.llm` cheap

    attempts: list[Completion] = []
    for _ in range(2):
        c = send(messages)
        attempts.append(c)
        try:
            data = json.loads(c.text)
            jsonschema.validate(data, schema)
        except json.JSONDecodeError as e:
            error = f"not valid JSON ({e})"
        except jsonschema.ValidationError as e:
            where = "/".join(str(p) for p in e.absolute_path) or "top level"
            error = f"does not match the schema at {where}: {e.message}"
        else:
            c.data = data
            if len(attempts) > 1:
                c.attempts = len(attempts)
                c.prompt_tokens = sum(a.prompt_tokens for a in attempts)
                c.completion_tokens = sum(a.completion_tokens for a in attempts)
                c.seconds = sum(a.seconds for a in attempts)
            return c
        messages = messages + [
            {"role": "assistant", "content": c.text},
            {
                "role": "user",
                "content": f"Your reply {error}. Reply again with one JSON object "
                "that matches the schema, and nothing else.",
            },
        ]
    raise StructuredOutputError(f"LLM output failed schema validation twice: {error}", attempts)
