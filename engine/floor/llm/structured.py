"""Structured output, shared by every backend: parse and validate a reply against its JSON
schema, retry once with the error stated, and replay attempts a cache kept.

A reply that fails validation is kept too (by engine.floor.llm.cache, through `attempt_log`), under its
own request and attempt number: a rerun replays the failed first attempt and the retry that
followed it, so it sends nothing and fails or succeeds as the first run did, even against an
endpoint that would reply differently the second time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from engine.floor.base.errors import StructuredOutputError
from engine.floor.base.types import Completion
from engine.floor.prompts.structured import retry_instruction


@dataclass(frozen=True)
class AttemptLog:
    """Where the attempts of one structured call are looked up and kept: `replay(attempt,
    messages)` gives a kept reply or None; `keep(attempt, messages, completion)` keeps a reply
    that failed validation. `messages` is the conversation that attempt sends."""

    replay: Callable[[int, list[dict]], Completion | None]
    keep: Callable[[int, list[dict], Completion], None]


_ATTEMPT_LOG: ContextVar[AttemptLog | None] = ContextVar("logicroute_attempt_log", default=None)


@contextmanager
def attempt_log(log: AttemptLog) -> Iterator[None]:
    """The structured call made inside (in this thread) replays and keeps its attempts in `log`."""
    token = _ATTEMPT_LOG.set(log)
    try:
        yield
    finally:
        _ATTEMPT_LOG.reset(token)


def chat_structured(send: Callable[[list[dict]], Completion], messages: list[dict], schema: dict) -> Completion:
    """Call `send(messages)`, parse and validate the text against `schema`; on failure retry
    once with the error appended to the conversation, then raise StructuredOutputError.
    A reply cut off at the token limit is not retried: the retry has the same limit, and a
    runaway field (a 1.5B model repeating itself) ran into it again every time it was measured;
    the caller decides (keep what came back, ask for less).

    The one place this logic lives: every backend calls it with its own raw `send`.
    A success after a retry returns the last completion with the tokens and seconds of both
    attempts summed, so `call_llm` books what the answer really cost."""
    import jsonschema  # lazy: keeps `import engine.floor.llm` cheap

    log = _ATTEMPT_LOG.get()
    attempts: list[Completion] = []
    for attempt in range(2):
        kept = log.replay(attempt, messages) if log is not None else None
        c = kept if kept is not None else send(messages)
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
                _sum_attempts(c, attempts)
            return c
        if log is not None and kept is None:
            log.keep(attempt, messages, c)
        if c.finish_reason == "length":
            raise StructuredOutputError(f"LLM output cut off at the token limit: {error}", attempts)
        messages = messages + [
            {"role": "assistant", "content": c.text},
            {"role": "user", "content": retry_instruction(error)},
        ]
    raise StructuredOutputError(f"LLM output failed schema validation twice: {error}", attempts)


def _sum_attempts(c: Completion, attempts: list[Completion]) -> None:
    """`c`, the last attempt, carries the cost of all of them."""
    c.attempts = len(attempts)
    c.prompt_tokens = sum(a.prompt_tokens for a in attempts)
    c.completion_tokens = sum(a.completion_tokens for a in attempts)
    c.seconds = sum(a.seconds for a in attempts)
    if all(a.prompt_tokens_evaluated is not None for a in attempts):
        c.prompt_tokens_evaluated = sum(a.prompt_tokens_evaluated or 0 for a in attempts)
