"""Cost limits for one answer (Budget) and the check escalation makes against them. The check
that refuses up front a budget no answer fits in needs the routes: engine.core.routes.check_a_call_fits."""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine.floor.base.errors import LogicRouteError
from engine.floor.base.types import Usage


@dataclass(frozen=True)
class Budget:
    """Cost limits for one answer.

    max_llm_calls / max_prompt_tokens / max_seconds bound the logic route (passed down to its
    LogicConfig, which stops solving and answers from what it found; when an answer escalates,
    what the first attempt spent is subtracted first, so the whole answer stays inside the
    budget). logic_share / threshold change the routing decision instead:
    a question goes to "logic" when P(logic) >= threshold, otherwise to the likelier of the
    other routes (engine.core.decide.ThresholdStage, RouteLLM-style). A logic_share is turned into a threshold by
    calibration: `answer_many` calibrates on its own batch; for single `answer` calls get a
    calibrated Budget once with `rag.calibrate(sample_questions, logic_share)`.

    max_seconds bounds the whole answer, every route and every call: no LLM call runs past it
    (engine.floor.llm.base.answer_scope). The logic route stops solving a quarter before it, so its
    final answer is made inside it. hard_seconds is a second such end (a server's request
    deadline, after which nobody waits for the answer); the earlier of the two holds.
    """

    max_llm_calls: int | None = None
    max_prompt_tokens: int | None = None
    max_seconds: float | None = None
    logic_share: float | None = None
    threshold: float | None = None
    hard_seconds: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_llm_calls", "max_prompt_tokens"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise LogicRouteError(f"Budget.{name} must be a positive integer, got {v!r}")
        for name in ("max_seconds", "hard_seconds"):
            v = getattr(self, name)
            if v is not None and not v > 0:
                raise LogicRouteError(f"Budget.{name} must be > 0, got {v!r}")
        if self.logic_share is not None and not 0.0 <= self.logic_share <= 1.0:
            raise LogicRouteError(f"Budget.logic_share must be in [0, 1], got {self.logic_share!r}")

    @classmethod
    def from_policy(cls, policy, **limits) -> "Budget":
        """A Budget from a threshold policy (router.policy.Policy; a thresholds.json file:
        engine.core.config.thresholds_budget)."""
        if policy.kind != "threshold" or policy.route != "logic":
            raise LogicRouteError("a Budget takes a threshold policy on the logic route")
        return cls(threshold=float(policy.threshold), logic_share=policy.target_share, **limits)


LIMITS = ("max_llm_calls", "max_prompt_tokens", "max_seconds")  # what a route is bounded by (Route.bounded)


def limits_of(budget: Budget | None) -> dict:
    """The limits `budget` sets on a route: {name: value} of those it has."""
    return {} if budget is None else {n: getattr(budget, n) for n in LIMITS if getattr(budget, n) is not None}


def left_after(budget: Budget | None, spent: Usage) -> Budget | None:
    """What `budget` leaves for a later route once `spent` is paid: each limit less its part of
    `spent` (call too_little_left first: what is left must still be a budget)."""
    if budget is None:
        return None
    used = {"max_llm_calls": spent.llm_calls, "max_prompt_tokens": spent.prompt_tokens, "max_seconds": spent.seconds}
    return replace(budget, **{n: v - used[n] for n, v in limits_of(budget).items()})


def too_little_left(budget: Budget, spent: Usage) -> bool:
    # the logic route needs at least a decomposition call and the final answer to help; a final
    # answer's prompt is about the size of the answer already paid for (the question, a few passages)
    tokens = budget.max_prompt_tokens
    return (
        (budget.max_llm_calls is not None and budget.max_llm_calls - spent.llm_calls < 2)
        or (tokens is not None and tokens - spent.prompt_tokens < max(1, spent.prompt_tokens))
        or (budget.max_seconds is not None and budget.max_seconds - spent.seconds <= 0)
    )
