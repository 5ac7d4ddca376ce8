"""Cost limits for one answer (Budget), the check escalation makes against them, and the
check that refuses up front a budget no LLM call fits in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from engine.base.errors import LogicRouteError
from engine.base.types import Usage


@dataclass(frozen=True)
class Budget:
    """Cost limits for one answer.

    max_llm_calls / max_prompt_tokens / max_seconds bound the logic route (passed down to its
    LogicConfig, which stops solving and answers from what it found; when an answer escalates,
    what the first attempt spent is subtracted first, so the whole answer stays inside the
    budget). logic_share / threshold change the routing decision instead:
    a question goes to "logic" when P(logic) >= threshold, otherwise to the likelier of the
    other routes (router.policy, RouteLLM-style). A logic_share is turned into a threshold by
    calibration: `answer_many` calibrates on its own batch; for single `answer` calls get a
    calibrated Budget once with `rag.calibrate(sample_questions, logic_share)`.

    max_seconds is when the answer stops solving; the logic route's final answer may still take
    one try after it (engine.llm.base.answer_scope), unless hard_seconds has passed: nothing runs
    past that (a server's request deadline, after which nobody waits for the answer).
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
        engine.config.thresholds_budget)."""
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
    # the logic route needs at least a decomposition call and the final answer to help
    return (
        (budget.max_llm_calls is not None and budget.max_llm_calls - spent.llm_calls < 2)
        or (budget.max_prompt_tokens is not None and budget.max_prompt_tokens - spent.prompt_tokens < 1)
        or (budget.max_seconds is not None and budget.max_seconds - spent.seconds <= 0)
    )


def check_a_call_fits(budget: Budget | None, questions: Sequence[str], kb, k: int, style: str) -> None:
    """Refuse, before anything is asked, a prompt-token budget that no answer call fits in: every
    route's cheapest answer is one call over the question and its k best passages (the chunk
    route's only call; the logic route's final answer when it has to stop at once), so a budget
    below that prompt makes no call and gives a blank answer. The prompt is estimated as the logic
    route estimates every call it may make (engine.llm.base.estimate_prompt_tokens)."""
    if budget is None or budget.max_prompt_tokens is None or not questions:
        return
    from engine.llm.base import estimate_prompt_tokens
    from engine.prompts.answer import answer_messages
    from engine.prompts.passages import format_passages

    def smallest(q: str) -> int:
        return estimate_prompt_tokens(answer_messages(q, format_passages(kb.search(q, k=k)), style=style))

    need = max(smallest(q) for q in questions)
    if budget.max_prompt_tokens < need:
        which = "this question" if len(questions) == 1 else "the batch's longest question"
        raise LogicRouteError(
            f"max_prompt_tokens={budget.max_prompt_tokens} allows no LLM call: the answer prompt for {which} "
            f"and its {k} passages takes about {need} tokens; give at least {need}"
        )
