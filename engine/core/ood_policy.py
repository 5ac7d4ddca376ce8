"""What RoutedRAG does with a question far from the router's training questions (router.ood).

A router only knows the questions it was trained on; on a question unlike any of them its
probabilities are a guess. The policy (RagConfig.ood_policy: `logicroute ask --set ood_policy=...`):

- "chunk-escalate" (default): the chunk route with escalation on: the cheapest answer, retried
  on the logic route when it looks unanswered or the self-check says the passages do not
  answer it;
- "chunk" / "logic": that route, escalation as the caller set it;
- "route": the router's own choice.

Every far question gets a flag in trace["flags"], whatever the policy, and the decision's
OodCheck (trace["ood"]) holds the measurement. Only auto-routed questions are measured: a forced
route is the caller's choice.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine.floor.base.errors import LogicRouteError

OOD_POLICIES = ("chunk-escalate", "chunk", "logic", "route")
DEFAULT_OOD_POLICY = "chunk-escalate"
_FALLBACK_ROUTE = {"chunk-escalate": "chunk", "chunk": "chunk", "logic": "logic"}


def check_ood_policy(policy: str) -> str:
    if policy not in OOD_POLICIES:
        raise LogicRouteError(f"unknown ood_policy {policy!r}; choose {', '.join(OOD_POLICIES)}")
    return policy


@dataclass(frozen=True)
class OodCheck:
    """The guard's measure of one question (router.ood.OodGuard.measure: its similarity to the
    nearest training question, the threshold, whether it is far) and, where the policy stage ran,
    the policy, the router's route and the fallback taken (None: the router's route kept)."""

    similarity: float
    threshold: float
    far: bool
    policy: str | None = None  # None: the bare measure, no policy stage (the lab's paths)
    router_route: str | None = None
    fallback: str | None = None

    @classmethod
    def measured(cls, measure: dict | None) -> OodCheck | None:
        """The guard's measure {similarity, threshold, far} as a check; None without a guard."""
        if measure is None:
            return None
        return cls(measure["similarity"], measure["threshold"], measure["far"])

    def to_dict(self) -> dict:
        """trace["ood"]: the measure, then the policy stage's part where it ran."""
        out: dict = {"similarity": self.similarity, "threshold": self.threshold, "far": self.far}
        if self.policy is not None:
            out |= {"policy": self.policy, "router_route": self.router_route, "fallback": self.fallback}
        return out


@dataclass(frozen=True)
class OodOutcome:
    """The route after the guard, whether it turns escalation on, and what the trace records."""

    route: str
    escalate: bool  # True: escalation on whatever the caller chose
    check: OodCheck | None  # the measurement, the policy, the router's route, the fallback taken
    flag: str | None  # the visible flag of a far question


def apply_ood_policy(route: str, ood: dict | None, policy: str) -> OodOutcome:
    """The outcome for a question the router sent to `route`, given its measurement `ood`
    ({similarity, threshold, far}; None when the router has no guard)."""
    check_ood_policy(policy)
    measured = OodCheck.measured(ood)
    if measured is None:
        return OodOutcome(route, False, None, None)
    if not measured.far:
        return OodOutcome(route, False, replace(measured, policy=policy, router_route=route), None)
    why = (
        f"out of distribution: similarity {measured.similarity:.2f} to the router's training questions, "
        f"below its threshold {measured.threshold:.2f}"
    )
    if policy == "route":
        kept = replace(measured, policy=policy, router_route=route)
        return OodOutcome(route, False, kept, f"{why}; kept the router's {route} (ood policy route)")
    fallback = _FALLBACK_ROUTE[policy]
    taken = "chunk with escalation" if policy == "chunk-escalate" else fallback
    return OodOutcome(
        fallback,
        policy == "chunk-escalate",
        replace(measured, policy=policy, router_route=route, fallback=fallback),
        f"{why}; {taken} instead of the router's {route} (ood policy {policy})",
    )
