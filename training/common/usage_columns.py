"""The cost columns a benchmark row stores for one answer, read off its Usage."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from engine.floor.base.types import Usage


def usage_columns(u: "Usage") -> dict:
    """LLM calls, tokens (total, prompt, completion), cached calls, wall seconds and the LLM
    seconds the calls took when they were made."""
    return {
        "llm_calls": u.llm_calls,
        "tokens": u.total_tokens,
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "cached_calls": u.cached_calls,
        "seconds": round(u.seconds, 3),
        "llm_seconds_uncached": round(u.llm_seconds_uncached, 3),
    }
