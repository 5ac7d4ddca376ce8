"""RoutedRAG: the one public entry point. It wires a knowledge base, an LLM and the router,
and sends each question to the route the router picks (or the one the caller forces).

    rag = RoutedRAG.open("kb/")
    ans = rag.answer("Who ...?")                                   # router decides (argmax)
    ans = rag.answer("Who ...?", route="logic", budget=Budget(max_llm_calls=6))
    answers = rag.answer_many(questions, concurrency=4, escalate=True)

A question far from the router's training questions (router.ood) is flagged and handled by
`ood_policy` (engine.core.ood_policy; default: chunk with escalation). Budgets: engine.core.budget.

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

from engine.core import escalation
from engine.core.budget import Budget, left_after, limits_of, too_little_left
from engine.core.config import RagConfig
from engine.core.decide import Decision, check_single_budget, decide_many, forced
from engine.core.routes import (
    ROUTE_TYPES,
    TOP_ROUTE,
    Route,
    RouteContext,
    check_a_call_fits,
    check_route,
    make_route,
)
from engine.core.routes.common import check_question
from engine.core.routes.logic.config import LogicConfig, preset_config, resolve_preset
from engine.core.routes.summary_config import SummaryConfig
from engine.floor.base.errors import DeadlineError
from engine.floor.base.types import Answer
from engine.floor.llm.base import LLM, LLMSettings, answer_scope
from engine.floor.question.parse import Question, read_question

if TYPE_CHECKING:
    from hierarchy.kb import KnowledgeBase


@dataclass(kw_only=True)
class RoutedRAG(RagConfig):
    """A knowledge base + an LLM + a router, answering under a RagConfig's settings (its fields:
    engine.core.config, docs/configuration.md). Everything heavy loads on first use."""

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
        default=None,
        metadata={"help": "the summary route's settings (engine.core.routes.summary_config); None: defaults"},
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
                from engine.floor.llm.factory import make_llm

                self.llm = make_llm(self.llm_spec, cache=self.cache, settings=self.llm_settings)
            return self.llm

    def get_router(self):
        with self._lock:
            if self.router is None:
                from router.kb_router import load_for_kb  # the named checkpoint, else the KB's adapted one

                self.router = load_for_kb(self.kb, self.checkpoint, kb_questions=self.ood_kb_questions)
            return self.router

    # ------------------------------------------------------------------ routing
    def route_probs_many(self, questions: Sequence[str]) -> list[dict[str, float]]:
        """Router probabilities for a batch: one embedding batch for all questions."""
        if not questions:
            return []
        return [dict(p) for p in self.get_router().probs(list(questions))]

    def calibrate(self, questions: Sequence[str], logic_share: float, **limits) -> Budget:
        """A Budget whose P(logic) threshold sends about `logic_share` of questions like these
        to the logic route (the (1 - share) quantile of their P(logic))."""
        from engine.core.decide import ThresholdStage

        qs = [check_question(q) for q in questions]
        p = [pr.get(TOP_ROUTE, 0.0) for pr in self.route_probs_many(qs)]
        threshold = ThresholdStage(logic_share=logic_share).calibrated(p).threshold
        return Budget(threshold=threshold, logic_share=logic_share, **limits)

    def decide_many(self, questions: Sequence[str | Question], budget: Budget | None = None) -> list[Decision]:
        """The routing decision for each checked question (engine.core.decide), from one embedding batch,
        with this KB's router, this instance's out-of-distribution policy and answer style."""
        budget = self.budget if budget is None else budget
        return decide_many(self.get_router(), questions, budget, self.ood_policy, self.style, self.list_gate)

    # ------------------------------------------------------------------ answering
    def answer(
        self,
        question: str,
        *,
        route: str = "auto",
        budget: Budget | None = None,
        escalate: bool | None = None,
        started: float | None = None,
    ) -> Answer:
        """Answer one question. route: "auto" (router) or a route name to force; budget: see
        Budget (None = the instance's default); escalate: None = the instance's default;
        started: the time.perf_counter() the caller's clock started (default now): the budget's
        max_seconds counts from it, so a command's own start-up (loading the embedder) is
        inside its limit."""
        t0 = time.perf_counter() if started is None else started
        q = read_question(check_question(question))  # read once: every stage below reads this Question
        self.kb.require_chunks()
        budget = self.budget if budget is None else budget
        check_route(route)
        check_a_call_fits(budget, [q], self, route)
        if route == "auto":
            check_single_budget(budget)
            (decision,) = self.decide_many([q], budget)
        else:
            decision = forced(route)
        return self._answer_decided(q, decision, budget, escalate, t0)

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
        qs = [read_question(check_question(q)) for q in questions]  # each read once
        self.kb.require_chunks()
        budget = self.budget if budget is None else budget
        check_route(route)
        check_a_call_fits(budget, qs, self, route)
        if not qs:
            return []
        n = len(qs)
        decided = self.decide_many(qs, budget) if route == "auto" else [forced(route)] * n
        # the batch's routing time is shared out evenly among its answers
        routing_share = (time.perf_counter() - t0) / n
        self.get_llm()  # build the shared LLM once, before the threads start
        workers = max(1, min(int(concurrency), n))

        def one(i: int) -> Answer:
            return self._answer_decided(qs[i], decided[i], budget, escalate, time.perf_counter() - routing_share)

        if workers == 1:
            return [one(i) for i in range(n)]
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="logicroute") as pool:
            futures = [pool.submit(one, i) for i in range(n)]
            return [f.result() for f in futures]

    def _answer_decided(
        self, q: Question, decision: Decision, budget: Budget | None, escalate: bool | None, t0: float
    ) -> Answer:
        """One pass: answer on the decided route, then each step the escalation policy asks for
        (it takes every answer as it comes), then the answer's decision, flags and wall time."""
        escalate = (self.escalate if escalate is None else escalate) or decision.escalate
        # a forced route answers on that route alone: the ladder is climbed only when asked for
        retry = self.retry_unanswered and (escalate or decision.policy != "forced")
        below = self.escalate_below if self.escalate_below is not None else decision.escalate_below
        # every LLM call of this answer: inside the budget's time, no waiting twice on a dead endpoint
        seconds, hard = (budget.max_seconds, budget.hard_seconds) if budget is not None else (None, None)
        with answer_scope(seconds, start=t0, hard_seconds=hard):
            policy = escalation.Escalation(
                kb=self.kb,
                llm=self.get_llm(),
                ladder=self.retry_routes if retry else (),
                retry=retry,
                checks=escalate,
                keep_absence=self.keep_absence,
                below=below,
                self_check=self.self_check,
                question=q,
                answer=self._run_route(q, decision.route, budget),
                budget=budget,
                style=self.style,
                abstain=self.abstain_ungrounded,
            )
            while (step := policy.step) is not None:
                ans, why = policy.answer, f"not {step.verb} {step.route} ({step.reason})"
                if budget is not None and too_little_left(budget, ans.usage):
                    ans.trace.flag(f"{why}: too little budget left")
                    break
                try:
                    later = self._run_route(q, step.route, left_after(budget, ans.usage), step.exclude)
                except DeadlineError as e:  # the deadline ends the step: the answer so far, flagged
                    ans.trace.flag(f"{why}: {e}")
                    break
                policy.review(later)
        ans = policy.answer
        ans.route_probs = decision.probs
        ans.trace.decision = decision  # with its OOD check: trace["decision"] and trace["ood"]
        if decision.flag:
            ans.trace.flag(decision.flag)
        ans.usage.seconds = time.perf_counter() - t0  # wall time of the whole answer, routing included
        return ans

    def route(self, name: str, budget: Budget | None = None) -> Route:
        """The route `name` with this instance's settings as they are now, inside `budget`'s limits.
        Only that route's settings are resolved: a chunk answer builds no logic preset."""
        name = check_route(name, allow_auto=False)
        settings = ROUTE_TYPES[name].settings
        config = (
            self.logic_config()
            if settings is LogicConfig
            else self.summary_config
            if settings is SummaryConfig
            else None
        )
        return make_route(name, config).bounded(limits_of(budget))

    def _run_route(self, q: Question, route: str, budget: Budget | None = None, exclude: tuple = ()) -> Answer:
        """`route`'s answer to the checked question `q`, inside `budget`'s limits, passing over the
        chunks in `exclude`. The escalation policy applies engine.core.absence's rules to it."""
        return self.route(route, budget).answer(q, RouteContext(self.kb, self.get_llm(), self.k, self.style, exclude))

    def logic_config(self) -> LogicConfig:
        """The logic route's settings: the preset (logic_preset, for this style) at this top-k."""
        return preset_config(resolve_preset(self.logic_preset, self.style), k=self.k)

    # ------------------------------------------------------------------ escalation
    def self_check_reason(self, question: str, answer: Answer) -> str | None:
        """engine.core.escalation.self_check_reason on this instance's KB and LLM (the benchmark replays it)."""
        return escalation.self_check_reason(self.kb, self.get_llm(), question, answer)
