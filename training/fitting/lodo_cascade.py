"""Escalation by the model's own certainty, judged leave-one-dataset-out: a cheap answer whose
confidence (engine.floor.llm.base.answer_confidence, the chunk route's answer call) is below a
threshold goes on to the logic route and pays for both answers.

The threshold is fitted on the training sets of each fold, never on the left-out set: the one
that scores best there while spending at most TOKEN_SHARE of always-logic's tokens (the router
issue's bar). Label rows carry the confidence under "confidence" ({route: value}); a row
without one is never escalated.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.core.escalation import RETRY_ROUTES
from training.labels.labels import route_cost

STRONG = "logic"
TOKEN_SHARE = 0.5  # of always-logic's tokens: the most the fitted threshold may spend on training rows
ROUTER_CASCADE, CHUNK_CASCADE = "router+confidence", "chunk+confidence"
ROUTER_FORMS = (
    "router+forms"  # the router, then logic for every question with a form plan (engine.floor.question.forms)
)
ROUTER_RETRY = "router+forms+retry"  # and logic after a cheap answer that says it has none: RoutedRAG's default
ROUTER_RETRY_LOGIC = "router+forms+retry:logic"  # the retry straight to logic (retry_routes=logic)
RETRY_CASCADE = "router+forms+retry+confidence"  # and logic below the confidence threshold: escalate_below
ESCALATING = (ROUTER_CASCADE, CHUNK_CASCADE, ROUTER_RETRY, ROUTER_RETRY_LOGIC, RETRY_CASCADE)  # pay for attempts


def confidence_of(row: dict, route: str) -> float | None:
    value = (row.get("confidence") or {}).get(route)
    return None if value is None else float(value)


def _escalated(rows: Sequence[dict], first: Sequence[str], fires) -> tuple[list[str], list[dict]]:
    """(decisions, overhead): a cheap first route for which `fires(row, route)` becomes the
    strong route, and the cheap attempt's tokens and calls are its overhead."""
    decisions, overhead = [], []
    for row, route in zip(rows, first):
        if route != STRONG and fires(row, route):
            cost = row["costs"][route]
            decisions.append(STRONG)
            overhead.append({"tokens": route_cost(cost), "llm_calls": float(cost.get("llm_calls", 1))})
        else:
            decisions.append(route)
            overhead.append({})
    return decisions, overhead


def escalate(rows: Sequence[dict], first: Sequence[str], threshold: float) -> tuple[list[str], list[dict]]:
    """A cheap first route whose confidence is below `threshold` goes on to the strong route."""

    def unsure(row: dict, route: str) -> bool:
        conf = confidence_of(row, route)
        return conf is not None and conf < threshold

    return _escalated(rows, first, unsure)


def retry_unanswered(
    rows: Sequence[dict], first: Sequence[str], ladder: Sequence[str] = RETRY_ROUTES
) -> tuple[list[str], list[dict]]:
    """RoutedRAG.retry_unanswered replayed along `ladder` (RoutedRAG.retry_routes): a cheap route
    whose stored answer says it has no answer (engine.core.routes.common.looks_unanswered) goes on to
    the next route of the ladder costlier than itself, while the answers say they have none, and
    pays for every attempt. A route without a stored answer text counts as answered (kept); one the
    row did not label is skipped, as RoutedRAG skips summary on a KB without summary layers."""
    from engine.core.routes import ROUTES
    from engine.core.routes.common import looks_unanswered

    def unanswered(row: dict, route: str) -> bool:
        text = (row.get("answers_pred") or {}).get(route)
        return text is not None and looks_unanswered(text) is not None

    decisions, overhead = [], []
    for row, route in zip(rows, first):
        paid: dict = {}
        for nxt in ladder:
            if route == STRONG or not unanswered(row, route):
                break
            if ROUTES.index(nxt) <= ROUTES.index(route) or nxt not in row["scores"]:
                continue
            cost = row["costs"][route]
            paid["tokens"] = paid.get("tokens", 0.0) + route_cost(cost)
            paid["llm_calls"] = paid.get("llm_calls", 0.0) + float(cost.get("llm_calls", 1))
            route = nxt
        decisions.append(route)
        overhead.append(paid)
    return decisions, overhead


def logic_cap(rows: Sequence[dict], share: float = TOKEN_SHARE) -> float:
    """The mean tokens per question `share` of always-logic's comes to on `rows`."""
    return share * sum(route_cost(row["costs"][STRONG]) for row in rows) / max(len(rows), 1)


def _mean_score_tokens(rows: Sequence[dict], decisions: Sequence[str], overhead: Sequence[dict]) -> tuple[float, float]:
    n = max(len(rows), 1)
    score = sum(row["scores"][d] for row, d in zip(rows, decisions)) / n
    tokens = sum(route_cost(row["costs"][d]) + o.get("tokens", 0.0) for row, d, o in zip(rows, decisions, overhead))
    return score, tokens / n


def fit_threshold(rows: Sequence[dict], first: Sequence[str], share: float = TOKEN_SHARE) -> float:
    """The threshold with the best mean score on `rows` among those that spend at most `share`
    of always-logic's mean tokens (ties: the lower threshold, fewer escalations); 0.0 = never
    escalate, when even that spends too much."""
    cap = logic_cap(rows, share)
    seen = sorted({c for row, r in zip(rows, first) if (c := confidence_of(row, r)) is not None})
    # escalating below each seen value, and below a value above them all (every answer)
    candidates = [0.0, *seen, (seen[-1] + 1e-6) if seen else 1.0]
    best = (float("-inf"), 0.0)
    for t in candidates:
        score, tokens = _mean_score_tokens(rows, *escalate(rows, first, t))
        if tokens <= cap and score > best[0] + 1e-12:
            best = (score, t)
    return best[1]


def utility(rows: Sequence[dict], decisions: Sequence[str], overhead: Sequence[dict], lam: float) -> float:
    """The mean utility the label preference gives each answer (training.labels.labels.preference):
    its score minus lam times its tokens (the cheap attempt it replaced included) over the row's
    costliest route."""
    total = 0.0
    for row, d, extra in zip(rows, decisions, overhead):
        top = max(route_cost(c) for c in row["costs"].values()) or 1.0
        total += row["scores"][d] - lam * (route_cost(row["costs"][d]) + extra.get("tokens", 0.0)) / top
    return total / max(len(rows), 1)


def fit_threshold_utility(rows: Sequence[dict], first: Sequence[str], max_token_share: float | None = None) -> float:
    """The threshold with the best mean utility on `rows` (utility: the labels' own trade-off of
    score against tokens, at the lam the rows were labelled with, so escalation is worth what the
    router's labels say a route is worth; ties: the lower threshold). 0.0 = never escalate.
    `max_token_share`: a threshold is a candidate only when its mean tokens on `rows` (the first
    answer, then logic for the escalated ones) are at most that share of always-logic's there:
    the utility's own price of tokens lets a threshold fitted on a few written questions escalate
    more than a cheap router can afford on real ones (docs/results/router/adapt.md). None: no cap."""
    from training.labels.label_scorers import LabelConfig

    lam = float(rows[0].get("lam", LabelConfig.lam)) if rows else LabelConfig.lam
    cap = float("inf") if max_token_share is None else logic_cap(rows, max_token_share)
    seen = sorted({c for row, r in zip(rows, first) if (c := confidence_of(row, r)) is not None})
    best = (utility(rows, first, [{}] * len(rows), lam), 0.0)
    for t in [*seen, (seen[-1] + 1e-6)] if seen else []:
        decided = escalate(rows, first, t)
        if _mean_score_tokens(rows, *decided)[1] > cap + 1e-9:
            break  # a higher threshold escalates these rows and more, so spends at least as much
        u = utility(rows, *decided, lam)
        if u > best[0] + 1e-12:
            best = (u, t)
    return best[1]


def logic_gain_ranking(
    rows: Sequence[dict], p_logic: Sequence[float], signals: dict[str, Sequence[float]] | None = None
) -> dict:
    """Whether a signal known before the strong route runs ranks the rows where logic beats chunk
    above the others: the ROC AUC of the router's P(logic), of the chunk answer's lack of
    confidence and of each of `signals` (training.fitting.retrieval_signals; 0.5 = no better than chance,
    below 0.5 = its low end ranks them). Routing within a set can only be as good as this."""
    from sklearn.metrics import roc_auc_score

    gain = [row["scores"][STRONG] - row["scores"]["chunk"] for row in rows]
    better = [g > 1e-9 for g in gain]
    out: dict = {"n": len(rows), "logic_better": sum(better), "chunk_better": sum(g < -1e-9 for g in gain)}
    if 0 < sum(better) < len(rows):
        out["auc_p_logic"] = round(float(roc_auc_score(better, p_logic)), 3)
        unsure = [-(c if (c := confidence_of(row, "chunk")) is not None else 0.5) for row in rows]
        out["auc_chunk_unsure"] = round(float(roc_auc_score(better, unsure)), 3)
        for name, values in (signals or {}).items():
            out[f"auc_{name}"] = round(float(roc_auc_score(better, values)), 3)
    return out


def escalation_systems(rows: list[dict], test: list[int], decided: dict, paid: dict, systems) -> float | None:
    """Add the escalation systems to one fold's `decided` (and their cheap attempts to `paid`):
    the router's unanswered cheap answers retried up RoutedRAG's ladder, and on logic alone; the
    chunk route, the router's cheap routes, and those the retry kept, escalated to logic below the
    confidence threshold fitted on the fold's training rows (the chunk cascade's). Returns that
    threshold (None: no confidence systems)."""
    test_rows = [rows[i] for i in test]
    if ROUTER_RETRY in systems:
        decided[ROUTER_RETRY], paid[ROUTER_RETRY] = retry_unanswered(test_rows, decided[ROUTER_FORMS])
        retried = retry_unanswered(test_rows, decided[ROUTER_FORMS], (STRONG,))
        decided[ROUTER_RETRY_LOGIC], paid[ROUTER_RETRY_LOGIC] = retried
    if ROUTER_CASCADE not in systems:
        return None
    held = set(test)
    train = [rows[i] for i in range(len(rows)) if i not in held]
    t = fit_threshold(train, ["chunk"] * len(train))
    decided[CHUNK_CASCADE], paid[CHUNK_CASCADE] = escalate(test_rows, ["chunk"] * len(test), t)
    decided[ROUTER_CASCADE], paid[ROUTER_CASCADE] = escalate(test_rows, decided["router"], t)
    if RETRY_CASCADE in systems and ROUTER_RETRY in decided:
        after, more = escalate(test_rows, decided[ROUTER_RETRY], t)  # a retried row is logic already: no overhead
        decided[RETRY_CASCADE] = after
        paid[RETRY_CASCADE] = [
            {k: first.get(k, 0.0) + extra.get(k, 0.0) for k in {*first, *extra}}
            for first, extra in zip(paid[ROUTER_RETRY], more)
        ]
    return t
