"""The chunk route: one dense retrieval over text chunks, one answer-only LLM call."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from engine.core.routes.common import ANSWER_MAX_TOKENS, clean_answer, note_confidence
from engine.floor.base.trace import Trace
from engine.floor.base.types import Answer, Usage, numbered_sources
from engine.floor.llm.base import LLM, Stopwatch, call_llm
from engine.floor.prompts.answer import answer_messages
from engine.floor.prompts.passages import format_passages

if TYPE_CHECKING:
    from hierarchy.kb import KnowledgeBase


def answer_chunk(
    q: str, kb: "KnowledgeBase", llm: LLM, *, k: int = 3, style: str = "short", exclude: Collection[str] = ()
) -> Answer:
    """`q` as check_question returns it (the route registry's callers check it once); the top-k
    chunks other than `exclude` (the passages an earlier answer read)."""
    watch = Stopwatch()
    usage = Usage()
    trace = Trace(route="chunk")
    chunks = kb.search(q, k=k, exclude=exclude)
    trace.retrieved = [{"chunk_id": c.chunk_id, "title": c.title, "score": round(c.score, 4)} for c in chunks]
    if exclude:
        trace.details["passed_over"] = list(exclude)
    c = call_llm(
        llm,
        answer_messages(q, format_passages(chunks), style=style),
        purpose="answer",
        usage=usage,
        trace=trace,
        max_tokens=ANSWER_MAX_TOKENS[style],
    )
    note_confidence(trace, c)
    usage.seconds = watch.elapsed()
    return Answer(
        text=clean_answer(c.text, style), route="chunk", usage=usage, trace=trace, sources=numbered_sources(chunks)
    )
