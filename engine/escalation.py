"""Escalation's parts: the self-check (do the passages a cheap answer used answer the question?)
and what an escalated answer is, the logic route's answer carrying the cheap attempt it replaced.
RoutedRAG._maybe_escalate decides when."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.base.errors import StructuredOutputError
from engine.base.types import Answer, RetrievedChunk, Usage
from engine.llm.base import LLM, call_llm, flag
from engine.prompts.passages import format_passages
from engine.prompts.self_check import SELF_CHECK_SCHEMA, self_check_messages

if TYPE_CHECKING:
    from hierarchy.kb import KnowledgeBase

SELF_CHECK_MAX_TOKENS = 12


def self_check_reason(kb: "KnowledgeBase", llm: LLM, question: str, answer: Answer) -> str | None:
    """One structured call: do the passages the route used answer the question? None when
    they do (or there are none); else the reason to escalate. Booked in `answer`'s usage and
    trace. A failed check keeps the answer (visibly)."""
    passages = passages_of(kb, answer)
    if not passages:
        return None
    try:
        c = call_llm(
            llm,
            self_check_messages(question, answer.text, passages),
            purpose="self_check",
            usage=answer.usage,
            trace=answer.trace,
            schema=SELF_CHECK_SCHEMA,
            max_tokens=SELF_CHECK_MAX_TOKENS,
        )
    except StructuredOutputError as e:
        flag(answer.trace, f"self-check failed ({e}); answer kept")
        return None
    answered = bool((c.data or {}).get("answered", True))
    answer.trace["self_check"] = {"answered": answered}
    return None if answered else "self-check: the passages do not answer the question"


def passages_of(kb: "KnowledgeBase", ans: Answer) -> str:
    """The text the route answered from, rebuilt from the chunk ids in its trace."""
    chunks = []
    for r in ans.trace.get("retrieved", []) or []:
        cid = r.get("chunk_id") if isinstance(r, dict) else None
        ch = kb.chunks.get(cid) if cid else None
        if ch is not None:
            chunks.append(RetrievedChunk.of(ch, r.get("score", 0.0)))
    return format_passages(chunks)


def merge_escalated(first: Answer, second: Answer, reason: str) -> Answer:
    """The logic answer, carrying the first attempt: trace["escalated_from"], every LLM call
    of both in trace["llm_calls"] (so usage.llm_calls == len(llm_calls)), usage summed."""
    usage = Usage()
    usage.merge(first.usage)
    usage.merge(second.usage)
    trace = dict(second.trace)
    first_calls = [{**c, "route": first.route} for c in first.trace.get("llm_calls", [])]
    trace["llm_calls"] = first_calls + [{**c, "route": second.route} for c in second.trace.get("llm_calls", [])]
    trace["flags"] = [f"{first.route}: {f}" for f in first.trace.get("flags", [])] + list(second.trace.get("flags", []))
    flag(trace, f"escalated from {first.route} to {second.route}: {reason}")
    trace["escalated_from"] = {
        "route": first.route,
        "text": first.text,
        "reason": reason,
        "usage": first.usage.to_dict(),
        "trace": first.trace,
    }
    return Answer(text=second.text, route=second.route, usage=usage, trace=trace, sources=second.sources)
