"""The routing decision, in one place: given the router a KB answers with, a question and the
settings, which route answers it and why. RoutedRAG's answers, `ask --dry-run`, the server's
/route and MCP's `route` tool all decide here, so the place a user checks "where would this go?"
is the place that answers.

A decision is the router's probabilities turned into a route by a policy (argmax, or a calibrated
threshold on P(logic)), the form policy on top (a question whose form names its sub-questions
goes to logic; one the checkpoint's list gate reads as a list across the corpus goes to summary:
router.policy.decide_with_form), then the out-of-distribution policy
(engine.ood_policy: a question far from the router's training questions gets its fallback). A
forced route is a decision too, with none of the three.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.base.errors import LogicRouteError
from engine.budget import Budget
from engine.ood_policy import apply_ood_policy
from engine.routes import TOP_ROUTE
from router.list_gate import LIST_FORM


@dataclass(frozen=True)
class Decision:
    """Which route answers a question, and everything that decided it."""

    route: str  # the route that answers (after the out-of-distribution policy)
    policy: str  # "forced" | "argmax" | "threshold"
    router_route: str | None = None  # the router's own choice, form policy included; None when forced
    probs: dict[str, float] | None = None
    form: str | None = None  # the question form that sent it to logic, or LIST_FORM: the list gate sent it to summary
    list_gate: float | None = None  # the list gate's probability where it sent the question to summary
    threshold: float | None = None
    logic_share: float | None = None
    router: str | None = None  # which router decided (router.kb_router's label)
    escalate_below: float | None = None  # the confidence threshold `logicroute adapt` calibrated for this style
    ood: dict | None = None  # the guard's measure, the policy and its fallback; None without a guard
    escalate: bool = False  # the out-of-distribution policy turns escalation on
    flag: str | None = None  # the visible flag of a far question

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
        from router.policy import decided_by

        return {
            "route": self.route,
            "router_route": self.router_route,
            "probs": self.probs,
            "policy": decided_by(self.policy, self.form),
            "list_gate": self.list_gate,
            "threshold": self.threshold,
            "ood": self.ood,
            "escalate": self.escalate,
            "router": self.router,
        }


def forced(route: str) -> Decision:
    """The decision of a caller who names the route."""
    return Decision(route=route, policy="forced")


def threshold_policy(budget: Budget | None):
    """The router.policy.Policy a budget's calibrated threshold makes (None: argmax); the one place
    a threshold policy is built."""
    from router.policy import Policy

    if budget is None or budget.threshold is None:
        return None
    return Policy(kind="threshold", route=TOP_ROUTE, threshold=budget.threshold, target_share=budget.logic_share)


def calibrated(budget: Budget | None, p_logic: Sequence[float]) -> Budget | None:
    """`budget` with a threshold sending about its logic_share of these questions to logic (the
    share is calibrated on the batch); as it is when it has a threshold or no share."""
    from dataclasses import replace

    from router.policy import calibrate_share

    if budget is None or budget.logic_share is None or budget.threshold is not None:
        return budget
    return replace(budget, threshold=calibrate_share(list(p_logic), budget.logic_share))


def decide_many(
    router,
    questions: Sequence[str],
    budget: Budget | None,
    ood_policy: str,
    style: str | None = None,
    list_gate: bool = True,
) -> list[Decision]:
    """The decisions for checked questions, from one embedding batch. `router`: a loaded router
    (router.checkpoint.Router or one with .probs_and_ood); a budget with a logic_share and no
    threshold is calibrated on this batch; `style`: the answer style (escalate_below holds for the
    style `logicroute adapt` calibrated it in); `list_gate` False: the router's list gate is not
    consulted (RagConfig.list_gate)."""
    from router.policy import decide_with_form

    if not questions:
        return []
    if hasattr(router, "probs_ood_and_lists"):
        probs, oods, listed = router.probs_ood_and_lists(list(questions))
    else:  # a router without a list gate
        (probs, oods), listed = router.probs_and_ood(list(questions)), [None] * len(questions)
    probs = [{r: float(p) for r, p in pr.items()} for pr in probs]
    budget = calibrated(budget, [p.get(TOP_ROUTE, 0.0) for p in probs])
    policy = threshold_policy(budget)
    label = getattr(router, "label", None)
    below = getattr(router, "escalate_below", None)
    if below is not None and getattr(router, "calibrated_style", None) != style:
        below = None
    out = []
    for q, p, measured, gated in zip(questions, probs, oods, listed):
        router_route, form = decide_with_form(p, policy, q, listed=list_gate and gated is not None)
        outcome = apply_ood_policy(router_route, measured, ood_policy)
        out.append(
            Decision(
                route=outcome.route,
                policy="threshold" if policy else "argmax",
                router_route=router_route,
                probs=p,
                form=form,
                list_gate=gated if form == LIST_FORM else None,
                threshold=budget.threshold if policy else None,
                logic_share=budget.logic_share if policy else None,
                router=label,
                escalate_below=below,
                ood=outcome.trace,
                escalate=outcome.escalate,
                flag=outcome.flag,
            )
        )
    return out


def check_single_budget(budget: Budget | None) -> None:
    """A share of logic calls cannot be calibrated on one question."""
    if budget is not None and budget.logic_share is not None and budget.threshold is None:
        raise LogicRouteError(
            "Budget(logic_share=...) needs a calibrated threshold for a single question: "
            "use rag.calibrate(sample_questions, logic_share) or answer_many"
        )
