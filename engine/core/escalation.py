"""Escalation's policy: after a cheap answer, keep it or answer again on a costlier route.

The reasons to go on: the answer says it has none (and engine.core.absence's evidence lets it climb
the ladder of retry routes), the model's own certainty is under a calibrated threshold, or the
self-check (do the passages the answer used answer the question?) says no. `Escalation.next_step`
decides one step at a time; RoutedRAG runs each step and merges the answers (merge_escalated:
the later route's answer carrying the attempt it replaced). Nothing here runs a route."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from engine.core.absence import retrieved_ids, weigh_absence
from engine.core.budget import too_little_left
from engine.core.routes import CHEAP_ROUTES, ROUTES, TOP_ROUTE, ChunkRoute, SummaryRoute, check_route
from engine.core.routes.common import looks_unanswered
from engine.floor.base.errors import DeadlineError, LogicRouteError, StructuredOutputError
from engine.floor.base.types import Answer, RetrievedChunk, Usage
from engine.floor.llm.base import LLM, call_llm
from engine.floor.prompts.passages import format_passages
from engine.floor.prompts.self_check import SELF_CHECK_SCHEMA, self_check_messages
from engine.floor.question.parse import Question, text_of

if TYPE_CHECKING:
    from engine.core.budget import Budget
    from hierarchy.kb import KnowledgeBase

SELF_CHECK_MAX_TOKENS = 12
# An answer that says it has none goes up this ladder, one costlier route at a time, until one
# answers: every route above the cheapest. Summary first, because it answers some of those
# questions for a fraction of logic's cost (docs/results/router/retry_ladder.md).
RETRY_ROUTES: tuple[str, ...] = ROUTES[1:]


RETRIED = "retried on"  # a step up the ladder after an answer that said it had none
LOOKED_FURTHER = "looked further with"  # the chunk route again, on the next passages by rank
AFTER_ABSENCE = (RETRIED, LOOKED_FURTHER)  # steps taken after an answer that said it had none


@dataclass(frozen=True)
class Step:
    """Answer again on `route`, passing over the chunks in `exclude`; `reason` and `verb`
    ("retried on", "looked further with", "escalated to") name it in flags."""

    route: str
    reason: str
    verb: str
    exclude: tuple[str, ...] = ()


@dataclass
class Escalation:
    """The escalation policy of one answer. retry: climb `ladder` (the retry routes, less summary
    on a KB without layers once a climb starts) when an answer says it has none;
    checks: check the cheap answers that give one (confidence under `below`, else the self-check
    when `self_check`); keep_absence: weigh the evidence before the first climb (engine.core.absence)."""

    kb: "KnowledgeBase"
    llm: LLM
    ladder: tuple[str, ...]
    retry: bool
    checks: bool
    keep_absence: bool
    below: float | None
    self_check: bool
    climbing: bool = False  # a ladder climb is under way: an answer that still has none goes on up it
    looked_further: bool = False  # the next passages were read once: an answer that still has none is final
    checked: bool = False  # a cheap answer is checked once

    def next_step(self, question: str | Question, ans: Answer, budget: "Budget | None") -> Step | None:
        """Where `ans` goes next, or None to keep it."""
        if ans.route not in CHEAP_ROUTES or not (self.retry or self.checks):
            return None
        reason = looks_unanswered(ans.text)
        if reason is not None:
            return self._after_absence(question, ans, reason)
        if not self.checks or self.checked:
            return None
        self.checked = True
        if self.below is not None and ans.trace.confidence is not None:  # the model's own certainty: no call
            reason = confidence_reason(ans, self.below)
        elif self.self_check:
            if budget is not None and too_little_left(budget, ans.usage):
                ans.trace.flag("no self-check: too little budget left")
                return None
            reason = self_check_reason(self.kb, self.llm, text_of(question), ans)
        return Step(TOP_ROUTE, reason, "escalated to") if reason is not None else None

    def _after_absence(self, question: str | Question, ans: Answer, reason: str) -> Step | None:
        if self.looked_further:
            return None  # the next passages said the same: "not in the documents" is the answer
        if not self.climbing:
            verdict = None
            if self.keep_absence:
                verdict = ans.trace.absence = weigh_absence(self.kb, question, retrieved_ids(ans))
                if not verdict["climb"] and not verdict.get("look_further"):
                    return None  # "not in the documents" is the answer: no retry, no self-check
            if not self.retry:
                return Step(TOP_ROUTE, reason, "escalated to") if self.checks else None
            if verdict is not None and verdict.get("look_further"):
                self.looked_further = True
                return Step(ChunkRoute.name, verdict["reason"], LOOKED_FURTHER, tuple(retrieved_ids(ans)))
            self.climbing = True
            self.ladder = ladder_for(self.kb, self.ladder)  # read when a climb starts, not for every answer
        later = routes_after(ans.route, self.ladder)
        return Step(later[0], reason, RETRIED) if later else None


def check_retry_routes(routes: Sequence[str]) -> tuple[str, ...]:
    """The ladder as given, checked: known routes, each costlier than the one before it."""
    ladder = tuple(check_route(r, allow_auto=False) for r in routes)
    if not ladder:
        raise LogicRouteError("retry routes: give at least one route (or turn the retry off)")
    if any(ROUTES.index(a) >= ROUTES.index(b) for a, b in zip(ladder, ladder[1:])):
        order = ", ".join(ROUTES)
        raise LogicRouteError(f"retry routes go from cheaper to costlier ({order}), got {', '.join(ladder)}")
    return ladder


def routes_after(route: str, ladder: Sequence[str]) -> list[str]:
    """The ladder's routes costlier than `route`: where an answer of `route` may be retried."""
    return [r for r in ladder if ROUTES.index(r) > ROUTES.index(route)]


def ladder_for(kb: "KnowledgeBase", routes: Sequence[str]) -> tuple[str, ...]:
    """The ladder `routes`, less summary on a KB without summary layers (it would answer as chunk did)."""
    from hierarchy.layers.persist import has_summary_layers

    if SummaryRoute.name in routes and not has_summary_layers(kb):
        return tuple(r for r in routes if r != SummaryRoute.name)
    return tuple(routes)


def confidence_reason(ans: Answer, below: float) -> str | None:
    """The reason to escalate a cheap answer whose confidence (the model's certainty, in its
    trace) is under `below`; None when it is not."""
    confidence = ans.trace.confidence
    return f"low confidence ({confidence:.2f} < {below:g})" if confidence < below else None


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
    except (StructuredOutputError, DeadlineError) as e:
        answer.trace.flag(f"self-check failed ({e}); answer kept")
        return None
    answered = bool((c.data or {}).get("answered", True))
    answer.trace.self_check = {"answered": answered}
    return None if answered else "self-check: the passages do not answer the question"


def passages_of(kb: "KnowledgeBase", ans: Answer) -> str:
    """The text the route answered from, rebuilt from the chunk ids in its trace."""
    chunks = []
    for r in ans.trace.retrieved or []:
        cid = r.get("chunk_id") if isinstance(r, dict) else None
        ch = kb.chunks.get(cid) if cid else None
        if ch is not None:
            chunks.append(RetrievedChunk.of(ch, r.get("score", 0.0)))
    return format_passages(chunks)


def merge_escalated(first: Answer, second: Answer, reason: str, verb: str = "escalated to") -> Answer:
    """The later route's answer, carrying the first attempt: trace["escalated_from"], every LLM call
    of both in trace["llm_calls"] (so usage.llm_calls == len(llm_calls)), usage summed; the flag
    names the step (`verb`: a look at the next passages is no escalation)."""
    usage = Usage()
    usage.merge(first.usage)
    usage.merge(second.usage)
    # a call keeps the route it was made on: `first` may itself be an escalated answer
    calls = [{"route": a.route, **c} for a in (first, second) for c in a.trace.llm_calls]
    trace = replace(
        second.trace,
        llm_calls=calls,
        flags=[f"{first.route}: {f}" for f in first.trace.flags] + second.trace.flags,
        escalated_from={
            "route": first.route,
            "text": first.text,
            "reason": reason,
            "usage": first.usage.to_dict(),
            "trace": first.trace.to_dict(),
        },
    )
    if verb == LOOKED_FURTHER:
        trace.flag(f"looked further: {second.route} again on the next passages ({reason})")
    else:
        trace.flag(f"escalated from {first.route} to {second.route}: {reason}")
    return Answer(text=second.text, route=second.route, usage=usage, trace=trace, sources=second.sources)
