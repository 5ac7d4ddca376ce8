"""Issue 43's bar for an adapted router on one left-out set, and the figures it compares: shared
by `bench adapt` (training.adapt.bench_adapt) and its K-fold measure of the user's own questions
(training.adapt.adapt_own_folds)."""

from __future__ import annotations

from collections.abc import Sequence

GAIN = 2.0  # points over the LODO generalist
NEAR_BEST = 1.0  # points below the best fixed route
TOKEN_SHARE = 0.5  # of always-logic's tokens per question
SPECIALIST = "adapted specialist"
GENERALIST = "LODO generalist"
CONFIDENCE = " + confidence"  # escalation on: cheap answers under a fitted confidence threshold go on to logic


def decisions(router, questions: Sequence[str]) -> tuple[list[str], float | None, list[dict]]:
    """The router's route for each question (the Decider without its out-of-distribution stage: argmax, list
    gate, form), the share its guard flags out of distribution (None without a guard) and its probabilities
    per question."""
    from engine.core.decide import Decider

    decided = Decider().decide_many(router, list(questions))
    oods = [d.ood for d in decided if d.ood is not None]
    far = round(sum(bool(o["far"]) for o in oods) / len(oods), 3) if oods else None
    return [d.route for d in decided], far, [d.probs for d in decided]


def mean_tables(tables: Sequence[dict]) -> dict:
    """Mean of the judge's figures over seeds (route shares averaged too)."""
    out = dict(tables[0])
    for k in ("score", "tokens", "llm_calls", "agreement"):
        out[k] = round(sum(t[k] for t in tables) / len(tables), {"agreement": 3, "llm_calls": 2}.get(k, 1))  # as judge
    out["shares"] = {r: round(sum(t["shares"][r] for t in tables) / len(tables), 3) for r in tables[0]["shares"]}
    far = [t.get("far") for t in tables if t.get("far") is not None]
    out["far"] = round(sum(far) / len(far), 3) if far else None
    return out


def verdict(systems: dict, routes: Sequence[str], name: str = SPECIALIST) -> dict:
    """Whether the adapted router `name` meets issue 43's bar on this set, with the figures it compares."""
    spec, gen = systems[name], systems[GENERALIST]
    fixed = {r: systems[f"always {r}"] for r in routes}
    best = max(fixed, key=lambda r: fixed[r]["score"])
    logic_tokens = fixed["logic"]["tokens"] if "logic" in fixed else None
    gain = spec["score"] >= gen["score"] + GAIN
    near = spec["score"] >= fixed[best]["score"] - NEAR_BEST
    cheap = logic_tokens is None or spec["tokens"] <= TOKEN_SHARE * logic_tokens
    return {
        "gain_over_generalist": round(spec["score"] - gen["score"], 1),
        "best_fixed_route": best,
        "below_best_fixed": round(fixed[best]["score"] - spec["score"], 1),
        "token_share_of_logic": round(spec["tokens"] / logic_tokens, 3) if logic_tokens else None,
        "system": name,
        "passes": bool((gain or near) and cheap),
    }


def score_bar(systems: dict, routes: Sequence[str]) -> float:
    """The lowest score that meets issue 43's bar on this set (the token cap aside): the LODO
    generalist's + GAIN or the best fixed route's - NEAR_BEST, as verdict compares them."""
    best = max(systems[f"always {r}"]["score"] for r in routes)
    return round(min(systems[GENERALIST]["score"] + GAIN, best - NEAR_BEST), 1)
