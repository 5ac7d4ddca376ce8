"""What an escalated answer is: the logic route's answer carrying the cheap attempt it replaced
(RoutedRAG._maybe_escalate decides when; this module only joins the two)."""

from __future__ import annotations

from engine.base.types import Answer, Usage
from engine.llm.base import flag


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
