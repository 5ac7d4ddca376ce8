"""The routing decision, in one place: the Decider turns a loaded router's probabilities into a
route through its rule stages, in order, and the Decision says which stage set the route and why.
Every caller decides here: RoutedRAG's answers, `ask --dry-run`, the server's /route, MCP's
`route` tool, and the lab's paths (adapt's verdict, eval-router, bench global, the routing
benchmark, LODO and every threshold sweep: a sweep is a Decider with another threshold stage).

The stages, in order:
1. learned: the router's probabilities, its guard's measure and its list gate's probability
   (router.checkpoint.Router.probs_ood_and_lists, one embedding batch);
2. threshold: argmax, or a threshold on P(logic), calibrated on the batch when only a share is set;
3. list gate: a question the checkpoint's gate reads as a list across the corpus goes to summary;
4. form: a question whose form names its sub-questions goes to logic; it outranks the gate;
5. out of distribution: a question far from the router's training questions gets the fallback of
   the policy (engine.core.ood_policy).
A forced route is a decision too, with none of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from engine.core.budget import Budget
from engine.core.ood_policy import DEFAULT_OOD_POLICY, apply_ood_policy, check_ood_policy
from engine.core.routes import TOP_ROUTE
from engine.floor.base.errors import LogicRouteError
from engine.floor.question.parse import Question, as_question, text_of
from router.list_gate import LIST_FORM, LIST_ROUTE

FORM_ROUTE = "logic"  # where a question whose form names its sub-questions goes


def decided_by(policy: str, form: str | None) -> str:
    """How a decision names what decided it: the threshold stage's kind ("argmax", "threshold"),
    "+form" when a question form sent it to logic, "+list" when the list gate sent it to summary."""
    return policy + ("" if not form else "+list" if form == LIST_FORM else "+form")


def overrode(decision: dict) -> str:
    """What overrode the probabilities, from a trace["decision"] dict: "list gate P 0.93; " or
    "form: chain; ", "" when nothing did (`ask`'s route line)."""
    gate, form = decision.get("list_gate"), decision.get("form")
    return f"list gate P {gate:.2f}; " if gate is not None else f"form: {form}; " if form else ""


@dataclass(frozen=True)
class Decision:
    """Which route answers a question, which stage set it and why."""

    route: str  # the route that answers (after the out-of-distribution stage)
    policy: str  # the threshold stage's kind: "argmax" | "threshold"; "forced" for a named route
    router_route: str | None = None  # the route before the out-of-distribution stage; None when forced
    probs: dict[str, float] | None = None  # the learned stage's
    form: str | None = None  # the question form that sent it to logic, or LIST_FORM: the list gate sent it to summary
    list_gate: float | None = None  # the list gate's probability where it sent the question to summary
    threshold: float | None = None
    logic_share: float | None = None
    router: str | None = None  # which router decided (router.kb_router's label)
    escalate_below: float | None = None  # the confidence threshold `logicroute adapt` calibrated for this style
    ood: dict | None = None  # the out-of-distribution stage's trace, or the guard's bare measure without that stage
    escalate: bool = False  # the out-of-distribution stage turns escalation on
    flag: str | None = None  # the visible flag of a far question

    @property
    def decided_by(self) -> str:
        """ "argmax", "threshold", "argmax+form", "threshold+list", ... or "forced"."""
        return decided_by(self.policy, self.form)

    @property
    def stage(self) -> str:
        """The stage that set the route: "forced", "ood", "form", "list_gate", "threshold" or "argmax"."""
        if self.router_route is not None and self.route != self.router_route:
            return "ood"
        if self.form:
            return "list_gate" if self.form == LIST_FORM else "form"
        return self.policy

    def trace(self) -> dict:
        """trace["decision"]: {route, policy, ...} with the router's own route (the answer's route
        may differ after escalation; trace["ood"] says when the guard replaced it)."""
        out: dict = {"route": self.route, "policy": self.policy}
        if self.policy == "threshold":
            out |= {"threshold": self.threshold, "logic_share": self.logic_share}
        if self.form:
            out["form"] = self.form
        if self.list_gate is not None:
            out["list_gate"] = round(self.list_gate, 4)
        if self.router:
            out["router"] = self.router
        if self.escalate_below is not None:
            out["escalate_below"] = self.escalate_below
        return out

    def to_dict(self) -> dict:
        """What /route, MCP's route tool and `ask --dry-run --json` show."""
        return {
            "route": self.route,
            "router_route": self.router_route,
            "probs": self.probs,
            "policy": self.decided_by,
            "list_gate": self.list_gate,
            "threshold": self.threshold,
            "ood": self.ood,
            "escalate": self.escalate,
            "router": self.router,
        }


def forced(route: str) -> Decision:
    """The decision of a caller who names the route."""
    return Decision(route=route, policy="forced")


@dataclass(frozen=True)
class Learned:
    """The learned stage's output for one question: the router's probabilities, its guard's
    measure (None without a guard) and its list gate's probability where the gate fires."""

    probs: dict[str, float]
    ood: dict | None = None
    list_gate: float | None = None


def learned_stage(router, questions: Sequence[str | Question]) -> list[Learned]:
    """The learned stage for a batch, from one embedding batch. `router`: a loaded router
    (router.checkpoint.Router, or one with only .probs_and_ood: no list gate)."""
    if not questions:
        return []
    if hasattr(router, "probs_ood_and_lists"):  # router.checkpoint.Router: its gate and features read Questions
        probs, oods, listed = router.probs_ood_and_lists(list(questions))
    else:
        texts = [text_of(q) for q in questions]
        (probs, oods), listed = router.probs_and_ood(texts), [None] * len(questions)
    return [Learned({r: float(p) for r, p in pr.items()}, o, g) for pr, o, g in zip(probs, oods, listed)]


@dataclass(frozen=True)
class ThresholdStage:
    """Probabilities to a route: argmax, or P(route) >= threshold sends the question to `route`
    and the rest go to the likelier other route (RouteLLM-style). A share without a threshold is
    calibrated on the batch (calibrated); ties go to the earlier route, the checkpoint's order."""

    threshold: float | None = None
    logic_share: float | None = None  # the share of questions the threshold was (or is to be) calibrated for
    route: str = TOP_ROUTE  # the expensive route the threshold gates

    @classmethod
    def of(cls, budget: Budget | None) -> ThresholdStage:
        """The stage a budget's threshold or logic share makes; argmax without either."""
        if budget is None:
            return cls()
        return cls(threshold=budget.threshold, logic_share=budget.logic_share)

    @property
    def kind(self) -> str:
        return "argmax" if self.threshold is None and self.logic_share is None else "threshold"

    def calibrated(self, p_route: Sequence[float]) -> ThresholdStage:
        """This stage with a threshold sending about its share of these values' questions to its
        route (router.policy.calibrate_share); as it is with a threshold or no share."""
        from router.policy import calibrate_share

        if self.logic_share is None or self.threshold is not None:
            return self
        return replace(self, threshold=calibrate_share(list(p_route), self.logic_share))

    def route_of(self, probs: dict[str, float]) -> str:
        if self.kind == "argmax":
            return max(probs, key=probs.get)
        if self.threshold is None:
            raise LogicRouteError("a logic share needs calibrating on a batch of questions first")
        if self.route not in probs:
            raise LogicRouteError(f"the threshold gates route {self.route!r}, but the router has only {list(probs)}")
        if probs[self.route] >= self.threshold:
            return self.route
        rest = {r: p for r, p in probs.items() if r != self.route}
        return max(rest, key=rest.get)


@dataclass(frozen=True)
class ListGateStage:
    """The checkpoint's list gate (router.list_gate) sends a question it reads as a list across
    the corpus to summary, over the threshold stage: a logic share calibrated on a batch is met
    before the gate, which may send some of those questions to summary. `on`: RagConfig.list_gate."""

    on: bool = True

    def fires(self, gate_p: float | None, probs: dict[str, float], route: str) -> bool:
        """Whether the gate moves a question the threshold stage sent to `route`."""
        return self.on and gate_p is not None and LIST_ROUTE in probs and route != LIST_ROUTE


@dataclass(frozen=True)
class FormStage:
    """A question whose form names its sub-questions (engine.floor.question.forms) goes to logic.
    Why: the probabilities tell lookups from multi-hop questions only partly (on questions written
    for the test they sent 11 of 20 comparisons and chains to logic), while such a form is a
    multi-hop question for certain, and the logic route plans it without an LLM call
    (LogicConfig.plan_forms). It outranks the list gate: a chain of lookups is not a list."""

    on: bool = True

    def form_of(self, question: str | Question | None, probs: dict[str, float], route: str, gated: bool) -> str | None:
        """The form that sends the question to logic, or None. The form is read only where it can
        change the route: off logic, or against the gate."""
        if question is None or not self.on or FORM_ROUTE not in probs or (route == FORM_ROUTE and not gated):
            return None
        return as_question(question).form

    def route_of(self, question, probs, route: str, gated: bool) -> tuple[str, str | None] | None:
        """(logic, the form where it overrode the threshold stage, else None: the route was logic
        already and the form kept it from the gate), or None when the form has no say."""
        form = self.form_of(question, probs, route, gated)
        if form is None:
            return None
        return FORM_ROUTE, None if route == FORM_ROUTE else form


@dataclass(frozen=True)
class OodStage:
    """A question far from the router's training questions gets the fallback of `policy`
    (engine.core.ood_policy: RagConfig.ood_policy)."""

    policy: str = DEFAULT_OOD_POLICY

    def __post_init__(self) -> None:
        check_ood_policy(self.policy)

    def apply(self, route: str, measured: dict | None):
        return apply_ood_policy(route, measured, self.policy)


@dataclass(frozen=True)
class Decider:
    """The whole decision, stage by stage. `ood` None: no out-of-distribution stage (the lab's
    paths, which measure the router's own choice); the Decision's ood is then the bare measure."""

    threshold: ThresholdStage = ThresholdStage()
    list_gate: ListGateStage = ListGateStage()
    form: FormStage = FormStage()
    ood: OodStage | None = None

    @classmethod
    def serving(cls, budget: Budget | None, ood_policy: str, list_gate: bool = True) -> Decider:
        """The Decider of an answer under RagConfig's settings: budget, ood_policy, list_gate."""
        return cls(ThresholdStage.of(budget), ListGateStage(list_gate), FormStage(), OodStage(ood_policy))

    def with_threshold(self, threshold: float | None, route: str = TOP_ROUTE) -> Decider:
        """This Decider with a fixed threshold on P(route) (None: argmax): one point of a sweep."""
        stage = ThresholdStage() if threshold is None else ThresholdStage(threshold=threshold, route=route)
        return replace(self, threshold=stage)

    def decide(self, learned: Learned, question: str | Question | None = None) -> Decision:
        """The rule stages on one question's learned stage (the threshold stage calibrated already)."""
        probs, stage = learned.probs, self.threshold
        route = stage.route_of(probs)
        gated = self.list_gate.fires(learned.list_gate, probs, route)
        formed = self.form.route_of(question, probs, route, gated)
        if formed is not None:
            router_route, form = formed
        else:
            router_route, form = (LIST_ROUTE, LIST_FORM) if gated else (route, None)
        threshold = stage.threshold if stage.kind == "threshold" else None
        share = stage.logic_share if stage.kind == "threshold" else None
        common = dict(
            policy=stage.kind,
            router_route=router_route,
            probs=probs,
            form=form,
            list_gate=learned.list_gate if form == LIST_FORM else None,
            threshold=threshold,
            logic_share=share,
        )
        if self.ood is None:
            return Decision(route=router_route, ood=learned.ood, **common)
        outcome = self.ood.apply(router_route, learned.ood)
        return Decision(route=outcome.route, ood=outcome.trace, escalate=outcome.escalate, flag=outcome.flag, **common)

    def route(
        self, probs: dict[str, float], question: str | Question | None = None, gate_p: float | None = None
    ) -> str:
        """The route for bare probabilities (the lab's replays of stored probabilities)."""
        return self.decide(Learned(probs, None, gate_p), question).route

    def decide_many(self, router, questions: Sequence[str | Question], style: str | None = None) -> list[Decision]:
        """The decisions for checked questions (texts, or Questions read once: the form stage
        reads their form), from one embedding batch; a threshold stage with a
        share and no threshold is calibrated on this batch. `style`: the answer style
        (escalate_below holds in the style `logicroute adapt` calibrated it in)."""
        learned = learned_stage(router, questions)
        if not learned:
            return []
        stage = self.threshold.calibrated([x.probs.get(self.threshold.route, 0.0) for x in learned])
        decider = replace(self, threshold=stage)
        label = getattr(router, "label", None)
        below = getattr(router, "escalate_below", None)
        if below is not None and getattr(router, "calibrated_style", None) != style:
            below = None
        return [replace(decider.decide(x, q), router=label, escalate_below=below) for q, x in zip(questions, learned)]


def decide_many(
    router,
    questions: Sequence[str | Question],
    budget: Budget | None,
    ood_policy: str,
    style: str | None = None,
    list_gate: bool = True,
) -> list[Decision]:
    """The serving Decider's decisions (Decider.serving) for checked questions: RoutedRAG's,
    `ask --dry-run`'s without a KB, /route's and MCP's."""
    return Decider.serving(budget, ood_policy, list_gate).decide_many(router, questions, style)


def check_single_budget(budget: Budget | None) -> None:
    """A share of logic calls cannot be calibrated on one question."""
    if budget is not None and budget.logic_share is not None and budget.threshold is None:
        raise LogicRouteError(
            "Budget(logic_share=...) needs a calibrated threshold for a single question: "
            "use rag.calibrate(sample_questions, logic_share) or answer_many"
        )
