"""Decisions from route probabilities: argmax, or a calibrated threshold on P(logic).

RouteLLM-style calibration: the user's own questions are run through the router once, and
the threshold is the (1 - share) quantile of their P(logic), so about `share` of such
questions go to the expensive route. A token budget is turned into a share first:
share = (budget - cost_cheap) / (cost_logic - cost_cheap), clipped to [0, 1].

Pure Python + numpy: no torch here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from engine.base.errors import LogicRouteError
from hierarchy.question_forms import form_plan
from router.list_gate import LIST_FORM, LIST_ROUTE

# Tokens per question of each route, used when no measured costs are given (vanilla top-3 RAG and
# the LogicRAG paper's figure); "summary" is one call over a slightly longer context.
NOMINAL_TOKENS: dict[str, float] = {"chunk": 540.0, "summary": 640.0, "logic": 1780.0}


@dataclass
class Policy:
    """How probabilities become a route."""

    kind: str = field(default="argmax", metadata={"help": "argmax | threshold"})
    route: str = field(default="logic", metadata={"help": "the expensive route the threshold gates"})
    threshold: float = field(
        default=0.5,
        metadata={"help": "P(route) >= threshold sends the question there; otherwise argmax over the other routes"},
    )
    target_share: float | None = field(default=None, metadata={"help": "share the threshold was calibrated for"})
    token_budget: float | None = field(default=None, metadata={"help": "tokens/question the share was derived from"})
    meta: dict = field(default_factory=dict, metadata={"help": "calibration details (n questions, checkpoint, costs)"})
    forms: bool = field(
        default=True,
        metadata={"help": "a question whose form names its sub-questions (question_forms) goes to logic"},
    )
    lists: bool = field(
        default=True,
        metadata={"help": "a question the checkpoint's list gate reads as a list across the corpus goes to summary"},
    )

    def to_dict(self) -> dict:
        return asdict(self)

    def save(self, path: str | Path) -> None:
        from engine.base.files import atomic_write_json

        atomic_write_json(Path(path), self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> "Policy":
        try:
            d = json.loads(Path(path).read_text())
            return cls(
                **{
                    k: d[k]
                    for k in ("kind", "route", "threshold", "target_share", "token_budget", "meta", "forms", "lists")
                    if k in d
                }
            )
        except (OSError, ValueError, TypeError) as e:
            raise LogicRouteError(f"{path}: not a thresholds file ({type(e).__name__}: {e})") from None


ARGMAX = Policy()


def decide(probs: dict[str, float], policy: Policy | None = None, question: str | None = None) -> str:
    """The route for one question. Ties go to the earlier route in the dict (the checkpoint's
    order, cheapest first by convention). With the question, the form policy applies
    (decide_with_form)."""
    return decide_with_form(probs, policy, question)[0]


FORM_ROUTE = "logic"


def decide_with_form(
    probs: dict[str, float], policy: Policy | None = None, question: str | None = None, listed: bool = False
) -> tuple[str, str | None]:
    """(the route, what overrode the router's choice or None: the question form that sent it to
    logic, or LIST_FORM when the list gate sent it to summary). Why the form policy: the router's
    probabilities tell lookups from multi-hop questions only partly (on questions written for
    the test it sent 11 of 20 comparisons and chains to logic), while a form that names its
    sub-questions is a multi-hop question for certain, and the logic route plans it without
    an LLM call (LogicConfig.plan_forms). Such a form also outranks the list gate (`listed`: the
    checkpoint's gate fired, router.list_gate): a chain of lookups is not a list across a corpus.
    The gate outranks the probabilities' policy, a calibrated threshold on P(logic) included: a
    logic share calibrated on a batch is met before the gate, which may send some of those
    questions to summary."""
    policy = policy or ARGMAX
    route = _decided(probs, policy)
    gated = listed and policy.lists and LIST_ROUTE in probs and route != LIST_ROUTE
    # the form is read only where it can change the route: off logic, or against the gate
    if question is not None and policy.forms and FORM_ROUTE in probs and (route != FORM_ROUTE or gated):
        form = form_plan(question)
        if form:
            return (FORM_ROUTE, None) if route == FORM_ROUTE else (FORM_ROUTE, form[0])
    return (LIST_ROUTE, LIST_FORM) if gated else (route, None)


def decided_by(policy_kind: str, form: str | None) -> str:
    """How a decision names what decided it: the policy, "+form" when a question form sent it to
    logic, "+list" when the list gate sent it to summary ("argmax+list")."""
    return policy_kind + ("" if not form else "+list" if form == LIST_FORM else "+form")


def _decided(probs: dict[str, float], policy: Policy) -> str:
    if policy.kind == "argmax":
        return max(probs, key=probs.get)
    if policy.kind != "threshold":
        raise LogicRouteError(f"unknown policy kind {policy.kind!r}: argmax or threshold")
    if policy.route not in probs:
        raise LogicRouteError(f"policy gates route {policy.route!r}, but the router has only {list(probs)}")
    if probs[policy.route] >= policy.threshold:
        return policy.route
    rest = {r: p for r, p in probs.items() if r != policy.route}
    return max(rest, key=rest.get)


def calibrate_share(p_route: Sequence[float], share: float) -> float:
    """Threshold t such that about `share` of the values are >= t (the (1-share) quantile).

    share 0 -> a threshold above every value (never); share 1 -> the minimum (always)."""
    if not 0.0 <= share <= 1.0:
        raise LogicRouteError(f"share must be in [0, 1], got {share}")
    p = np.sort(np.asarray(p_route, dtype=np.float64))[::-1]
    if p.size == 0:
        raise LogicRouteError("calibration needs at least one question")
    k = int(round(share * p.size))
    if k == 0:
        return float(np.nextafter(p[0], np.inf))
    return float(p[k - 1])
