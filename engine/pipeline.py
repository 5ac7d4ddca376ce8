"""RoutedRAG: the one public entry point. It wires a knowledge base, an LLM and the router,
and sends each question to the route the router picks (or the one the caller forces).

    rag = RoutedRAG.open("kb/")
    ans = rag.answer("Who ...?")                                   # router decides (argmax)
    ans = rag.answer("Who ...?", route="logic", budget=Budget(max_llm_calls=6))
    answers = rag.answer_many(questions, concurrency=4, escalate=True)

A question far from the router's training questions (router.ood) is flagged and handled by
`ood_policy` (engine.ood_policy; default: chunk with escalation). Budgets: engine.budget.

Thread safety: one RoutedRAG serves concurrent `answer` calls. Per-call state lives in locals;
the lazily built LLM and router are created under a lock; the local llama.cpp backend
serializes its own calls, remote endpoints run concurrently (up to `concurrency` in
`answer_many`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from engine import absence, escalation
from engine.base.errors import DeadlineError, LogicRouteError
from engine.base.types import Answer
from engine.budget import Budget, check_a_call_fits, left_after, limits_of, too_little_left
from engine.config import RagConfig
from engine.llm.base import LLM, LLMSettings, answer_scope
from engine.ood_policy import OodOutcome, apply_ood_policy
from engine.routes import CHEAP_ROUTES, TOP_ROUTE, Route, RouteContext, check_route, route_set
from engine.routes.common import check_question, looks_unanswered
from engine.routes.logic.config import LogicConfig, preset_config, resolve_preset
from engine.routes.summary_config import SummaryConfig

if TYPE_CHECKING:
    from hierarchy.kb import KnowledgeBase


@dataclass(kw_only=True)
class RoutedRAG(RagConfig):
    """A knowledge base + an LLM + a router, answering under a RagConfig's settings (its fields:
    engine.config, docs/configuration.md). Everything heavy loads on first use."""

    kb: "KnowledgeBase"
    llm: LLM | None = field(default=None, metadata={"help": "an LLM object; overrides llm_spec"})
    llm_settings: LLMSettings | None = field(
        default=None,
        metadata={"help": "timeout (s per try) and retries of a remote LLM; the spec's ?timeout=&retries= win"},
    )
    router: object | None = field(
        default=None,
        metadata={
            "help": "a router with .probs(questions) and .probs_and_ood(questions), as router.checkpoint.Router; "
            "overrides checkpoint"
        },
    )
    summary_config: SummaryConfig | None = field(
        default=None, metadata={"help": "the summary route's settings (engine.routes.summary_config); None: defaults"}
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        self._lock = threading.Lock()
        if self.kb is not None and self.retrieval is not None:  # every route's searches (hierarchy.retrieval)
            self.kb.use_retrieval(self.retrieval)

    # ------------------------------------------------------------------ construction
    @classmethod
    def open(cls, kb: str | Path, config: RagConfig | None = None, **options) -> "RoutedRAG":
        """The KB at `kb` under `config`'s settings (default: RagConfig()), `options` over them."""
        from hierarchy.kb import KnowledgeBase

        return cls(kb=KnowledgeBase.open(kb), **{**(config.options() if config else {}), **options})

    @classmethod
    def build(
        cls,
        sources: Iterable[str | Path],
        kb: str | Path,
        *,
        summaries: str = "extractive",
        show_progress: bool = True,
        **options,
    ) -> "RoutedRAG":
        """Index the sources into `kb` (created, or extended when it exists)."""
        from hierarchy.indexing import index_sources

        rag = cls(kb=None, **options)  # type: ignore[arg-type]  # the KB is set below
        built = index_sources(kb, sources, summaries=summaries, make_llm=rag.get_llm, show_progress=show_progress)
        return replace(rag, kb=built.kb)  # __post_init__ again, now with the KB: `retrieval` applies to it

    # ------------------------------------------------------------------ parts, lazily
    def get_llm(self) -> LLM:
        with self._lock:
            if self.llm is None:
                from engine.llm.factory import make_llm

                self.llm = make_llm(self.llm_spec, cache=self.cache, settings=self.llm_settings)
            return self.llm

    def get_router(self):
        with self._lock:
            if self.router is None:
                from router.kb_router import load_for_kb  # the named checkpoint, else the KB's adapted one

                self.router = load_for_kb(self.kb, self.checkpoint, kb_questions=self.ood_kb_questions)
            return self.router

    # ------------------------------------------------------------------ routing
    def route_probs(self, question: str) -> dict[str, float]:
        return self.route_probs_many([question])[0]

    def route_probs_many(self, questions: Sequence[str]) -> list[dict[str, float]]:
        """Router probabilities for a batch: one embedding batch for all questions."""
        if not questions:
            return []
        return [dict(p) for p in self.get_router().probs(list(questions))]

    def _route_signals(self, questions: Sequence[str]) -> tuple[list[dict[str, float]], list[dict | None]]:
        """Router probabilities and the out-of-distribution measure ({similarity, threshold, far};
        None when the router has no guard), from one embedding batch."""
        probs, oods = self.get_router().probs_and_ood(list(questions))
        return [dict(p) for p in probs], list(oods)

    def calibrate(self, questions: Sequence[str], logic_share: float, **limits) -> Budget:
        """A Budget whose P(logic) threshold sends about `logic_share` of questions like these
        to the logic route (the (1 - share) quantile of their P(logic))."""
        from router.policy import calibrate_share

        qs = [check_question(q) for q in questions]
        p = [pr.get(TOP_ROUTE, 0.0) for pr in self.route_probs_many(qs)]
        return Budget(threshold=calibrate_share(p, logic_share), logic_share=logic_share, **limits)

    def _decide(self, probs: dict[str, float], budget: Budget | None, question: str) -> tuple[str, dict]:
        from router.policy import Policy, decide_with_form

        if budget is not None and budget.threshold is not None:
            policy = Policy(
                kind="threshold", route=TOP_ROUTE, threshold=budget.threshold, target_share=budget.logic_share
            )
            route, form = decide_with_form(probs, policy, question)
            decision = {"policy": "threshold", "threshold": budget.threshold, "logic_share": budget.logic_share}
        else:
            route, form = decide_with_form(probs, None, question)
            decision = {"policy": "argmax"}
        if form:
            decision["form"] = form  # the form policy sent it to logic (router.policy.decide_with_form)
        if label := getattr(self.router, "label", None):  # which checkpoint decided (router.kb_router)
            decision["router"] = label
        below = getattr(self.router, "escalate_below", None)  # calibrated by `logicroute adapt` on this KB
        if below is not None and getattr(self.router, "calibrated_style", None) == self.style:
            decision["escalate_below"] = below
        return route, decision

    # ------------------------------------------------------------------ answering
    def answer(
        self, question: str, *, route: str = "auto", budget: Budget | None = None, escalate: bool | None = None
    ) -> Answer:
        """Answer one question. route: "auto" (router) or a route name to force; budget: see
        Budget (None = the instance's default); escalate: None = the instance's default."""
        t0 = time.perf_counter()
        q = check_question(question)
        self.kb.require_chunks()
        budget = self.budget if budget is None else budget
        check_route(route)
        check_a_call_fits(budget, [q], self.kb, self.k, self.style)
        probs, decision, ood = None, {"policy": "forced"}, None
        if route == "auto":
            if budget is not None and budget.logic_share is not None and budget.threshold is None:
                raise LogicRouteError(
                    "Budget(logic_share=...) needs a calibrated threshold for a single question: "
                    "use rag.calibrate(sample_questions, logic_share) or answer_many"
                )
            (probs,), (measured,) = self._route_signals([q])
            route, decision = self._decide(probs, budget, q)
            ood = apply_ood_policy(route, measured, self.ood_policy)
        return self._answer_decided(q, route, probs, decision, budget, escalate, t0, ood)

    def answer_many(
        self,
        questions: Sequence[str],
        concurrency: int = 4,
        *,
        route: str = "auto",
        budget: Budget | None = None,
        escalate: bool | None = None,
    ) -> list[Answer]:
        """Answer many questions, in input order. Routing is batched (one embedding batch);
        a Budget(logic_share=s) without a threshold is calibrated on this batch, so about s
        of it goes to logic. Up to `concurrency` questions run at once; the first error
        (in input order) is raised once every question has finished."""
        t0 = time.perf_counter()
        qs = [check_question(q) for q in questions]
        self.kb.require_chunks()
        budget = self.budget if budget is None else budget
        check_route(route)
        check_a_call_fits(budget, qs, self.kb, self.k, self.style)
        if not qs:
            return []
        n = len(qs)
        if route == "auto":
            probs_list, measured = self._route_signals(qs)
            if budget is not None and budget.logic_share is not None and budget.threshold is None:
                from router.policy import calibrate_share

                t = calibrate_share([p.get(TOP_ROUTE, 0.0) for p in probs_list], budget.logic_share)
                budget = replace(budget, threshold=t)
            decided = [self._decide(p, budget, q) for p, q in zip(probs_list, qs)]
            oods: list[OodOutcome | None] = [
                apply_ood_policy(r, o, self.ood_policy) for (r, _), o in zip(decided, measured)
            ]
        else:
            probs_list = [None] * n
            decided = [(route, {"policy": "forced"})] * n
            oods = [None] * n
        # the batch's routing time is shared out evenly among its answers
        routing_share = (time.perf_counter() - t0) / n
        self.get_llm()  # build the shared LLM once, before the threads start
        workers = max(1, min(int(concurrency), n))

        def one(i: int) -> Answer:
            return self._answer_decided(
                qs[i],
                decided[i][0],
                probs_list[i],
                decided[i][1],
                budget,
                escalate,
                time.perf_counter() - routing_share,
                oods[i],
            )

        if workers == 1:
            return [one(i) for i in range(n)]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="logicroute") as pool:
            futures = [pool.submit(one, i) for i in range(n)]
            return [f.result() for f in futures]

    def _answer_decided(
        self,
        q: str,
        route: str,
        probs: dict | None,
        decision: dict,
        budget: Budget | None,
        escalate: bool | None,
        t0: float,
        ood: OodOutcome | None = None,
    ) -> Answer:
        """`route` is the router's (or the forced) route; `ood` the guard's outcome for an
        auto-routed question, which may replace the route and turn escalation on."""
        escalate = self.escalate if escalate is None else escalate
        if ood is not None:
            route, escalate = ood.route, escalate or ood.escalate
        # a forced route answers on that route alone: the ladder is climbed only when asked for
        forced = decision.get("policy") == "forced"
        retry = self.retry_unanswered and (escalate or not forced)
        # every LLM call of this answer: inside the budget's time, no waiting twice on a dead endpoint
        seconds, hard = (budget.max_seconds, budget.hard_seconds) if budget is not None else (None, None)
        with answer_scope(seconds, start=t0, hard_seconds=hard):
            ans = self._run_route(q, route, budget)
            if route in CHEAP_ROUTES and (escalate or retry):
                ans = self._escalate(
                    q, ans, budget, checks=escalate, kb_below=decision.get("escalate_below"), retry=retry
                )
        ans.route_probs = probs
        ans.trace.decision = {"route": route, **decision}
        ans.trace.ood = ood.trace if ood is not None else None
        if ood is not None and ood.flag:
            ans.trace.flag(ood.flag)
        ans.usage.seconds = time.perf_counter() - t0  # wall time of the whole answer, routing included
        return ans

    def route(self, name: str, budget: Budget | None = None) -> Route:
        """The route `name` with this instance's settings as they are now, inside `budget`'s limits."""
        routes = route_set(self.summary_config, self.logic_config())
        return routes[check_route(name, allow_auto=False)].bounded(limits_of(budget))

    def _run_route(self, q: str, route: str, budget: Budget | None = None) -> Answer:
        """`route`'s answer to the checked question `q`, inside `budget`'s limits; a logic answer
        that outruns its evidence becomes "not in the documents" (engine.absence)."""
        ans = self.route(route, budget).answer(q, RouteContext(self.kb, self.get_llm(), self.k, self.style))
        if route == TOP_ROUTE and self.abstain_ungrounded and looks_unanswered(ans.text) is None:
            why = absence.ungrounded_reason(self.kb, q, ans)
            if why is not None:
                ans = absence.abstained(ans, why, self.style)
        return ans

    def logic_config(self) -> LogicConfig:
        """The logic route's settings: the preset (logic_preset, for this style) at this top-k."""
        return preset_config(resolve_preset(self.logic_preset, self.style), k=self.k)

    # ------------------------------------------------------------------ escalation
    def _escalate(
        self,
        q: str,
        first: Answer,
        budget: Budget | None,
        checks: bool = True,
        kb_below: float | None = None,
        retry: bool = True,
    ) -> Answer:
        """Up the retry ladder when `first` says it has no answer and `retry` (unless keep_absence
        and the evidence say the absence is final); with `checks` (escalation on), to the top route
        when its confidence is under escalate_below (else `kb_below`, the threshold `logicroute
        adapt` calibrated for the KB's router) or, with neither, the self-check fails it."""
        reason = looks_unanswered(first.text)
        if reason is not None and self.keep_absence:
            retrieved = [r.get("chunk_id") for r in first.trace.retrieved or [] if isinstance(r, dict)]
            first.trace.absence = absence.weigh_absence(self.kb, q, [c for c in retrieved if c])
            if not first.trace.absence["climb"]:
                return first  # "not in the documents" is the answer: no retry, no self-check
        if reason is not None and retry:
            ladder = escalation.ladder_for(self.kb, self.retry_routes)
            first = self._climb(q, first, reason, ladder, budget, "retried on")
            if first.route not in CHEAP_ROUTES or looks_unanswered(first.text) is not None:
                return first
            reason = None  # a cheap route of the ladder answered: checked as any cheap answer
        if not checks:
            return first
        below = self.escalate_below if self.escalate_below is not None else kb_below
        confident = below is not None and first.trace.confidence is not None
        if reason is None and confident:  # the model's own certainty: no extra call
            reason = escalation.confidence_reason(first, below)
        elif reason is None and self.self_check:
            if budget is not None and too_little_left(budget, first.usage):
                first.trace.flag("no self-check: too little budget left")
                return first
            reason = self.self_check_reason(q, first)
        if reason is None:
            return first
        return self._climb(q, first, reason, (TOP_ROUTE,), budget, "escalated to")

    def _climb(
        self, q: str, ans: Answer, reason: str, ladder: tuple[str, ...], budget: Budget | None, verb: str
    ) -> Answer:
        """The ladder's routes costlier than `ans`'s in turn, within what the budget leaves, until one
        answers; each step merged (merge_escalated: every attempt kept and paid for). A step its
        deadline ends keeps the answer so far, flagged. `verb` names the step in flags."""
        for route in escalation.routes_after(ans.route, ladder):
            if budget is not None and too_little_left(budget, ans.usage):
                ans.trace.flag(f"not {verb} {route} ({reason}): too little budget left")
                return ans
            try:
                later = self._run_route(q, route, left_after(budget, ans.usage))
            except DeadlineError as e:
                ans.trace.flag(f"not {verb} {route} ({reason}): {e}")
                return ans
            ans = escalation.merge_escalated(ans, later, reason)
            reason = looks_unanswered(ans.text)
            if reason is None:
                break
        return ans

    def self_check_reason(self, question: str, answer: Answer) -> str | None:
        """engine.escalation.self_check_reason on this instance's KB and LLM (the benchmark replays it)."""
        return escalation.self_check_reason(self.kb, self.get_llm(), question, answer)
