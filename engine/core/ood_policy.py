"""What RoutedRAG does with a question far from the router's training questions (router.ood).

A router only knows the questions it was trained on; on a question unlike any of them its
probabilities are a guess. The policy (RagConfig.ood_policy: `logicroute ask --set ood_policy=...`):

- "chunk-escalate" (default): the chunk route with escalation on: the cheapest answer, retried
  on the logic route when it looks unanswered or the self-check says the passages do not
  answer it;
- "chunk" / "logic": that route, escalation as the caller set it;
- "route": the router's own choice.

Every far question gets a flag in trace["flags"], whatever the policy, and trace["ood"] holds
the measurement. Only auto-routed questions are measured: a forced route is the caller's choice.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.floor.base.errors import LogicRouteError

OOD_POLICIES = ("chunk-escalate", "chunk", "logic", "route")
DEFAULT_OOD_POLICY = "chunk-escalate"
_FALLBACK_ROUTE = {"chunk-escalate": "chunk", "chunk": "chunk", "logic": "logic"}


def check_ood_policy(policy: str) -> str:
    if policy not in OOD_POLICIES:
        raise LogicRouteError(f"unknown ood_policy {policy!r}; choose {', '.join(OOD_POLICIES)}")
    return policy


@dataclass(frozen=True)
class OodOutcome:
    """The route after the guard, whether it turns escalation on, and what the trace records."""

    route: str
    escalate: bool  # True: escalation on whatever the caller chose
    trace: dict | None  # trace["ood"]: the measurement, the policy, the router's route, the fallback taken
    flag: str | None  # the visible flag of a far question


def apply_ood_policy(route: str, ood: dict | None, policy: str) -> OodOutcome:
    """The outcome for a question the router sent to `route`, given its measurement `ood`
    ({similarity, threshold, far}; None when the router has no guard)."""
    check_ood_policy(policy)
    if ood is None:
        return OodOutcome(route, False, None, None)
    entry = {**ood, "policy": policy, "router_route": route, "fallback": None}
    if not ood.get("far"):
        return OodOutcome(route, False, entry, None)
    why = (
        f"out of distribution: similarity {ood['similarity']:.2f} to the router's training questions, "
        f"below its threshold {ood['threshold']:.2f}"
    )
    if policy == "route":
        return OodOutcome(route, False, entry, f"{why}; kept the router's {route} (ood policy route)")
    fallback = _FALLBACK_ROUTE[policy]
    entry["fallback"] = fallback
    taken = "chunk with escalation" if policy == "chunk-escalate" else fallback
    return OodOutcome(
        fallback,
        policy == "chunk-escalate",
        entry,
        f"{why}; {taken} instead of the router's {route} (ood policy {policy})",
    )
