"""How good routing decisions are: the confusion matrix against the oracle route and the
decision metrics of eval-router and the training cards (accuracy, macro-F1, preference mass,
label score, cost, route shares)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from training.labels.labels import route_cost


def confusion(pred: Sequence[str], true: Sequence[str], labels: Sequence[str]) -> dict:
    """matrix[i][j] = questions routed to labels[i] whose oracle route is labels[j]; pairs
    with a route outside `labels` are not counted. agreement = share of pred equal to true."""
    idx = {r: i for i, r in enumerate(labels)}
    m = [[0] * len(labels) for _ in labels]
    for p, t in zip(pred, true):
        if p in idx and t in idx:
            m[idx[p]][idx[t]] += 1
    agree = sum(m[i][i] for i in range(len(labels)))
    return {"labels": list(labels), "matrix": m, "agreement": agree / len(pred) if pred else None}


def route_share(items: Sequence[str], routes: Sequence[str]) -> dict[str, float]:
    n = max(len(items), 1)
    return {r: round(sum(1 for x in items if x == r) / n, 4) for r in routes}


def routing_metrics(pred: Sequence[str], rows: Sequence[dict], routes: Sequence[str]) -> dict:
    """Decision quality of `pred` (one route per row) against the rows' labels."""
    from sklearn.metrics import f1_score

    routes = list(routes)
    n = len(rows)
    if n == 0:
        return {"n": 0}
    oracle = [r["oracle"] for r in rows]
    out = {
        "n": n,
        "accuracy": round(float(np.mean([p == o for p, o in zip(pred, oracle)])), 4),
        "macro_f1": round(float(f1_score(oracle, list(pred), labels=routes, average="macro", zero_division=0)), 4),
        # mean preference mass of the chosen route: 1.0 = always the preferred route
        "quality": round(float(np.mean([r["pref"][p] for r, p in zip(rows, pred)])), 4),
        # mean label score (support recall or answer F1) the decisions get vs the oracle's
        "score": round(float(np.mean([r["scores"][p] for r, p in zip(rows, pred)])), 4),
        "oracle_score": round(float(np.mean([r["scores"][o] for r, o in zip(rows, oracle)])), 4),
        "cost": round(float(np.mean([route_cost(r["costs"][p]) for r, p in zip(rows, pred)])), 1),
        "route_share": route_share(pred, routes),
        "oracle_share": route_share(oracle, routes),
        "confusion": confusion(list(pred), oracle, routes),
    }
    per = {}
    for ds in sorted({str(r.get("dataset")) for r in rows}):
        idx = [i for i, r in enumerate(rows) if str(r.get("dataset")) == ds]
        p = [pred[i] for i in idx]
        o = [oracle[i] for i in idx]
        per[ds] = {
            "n": len(idx),
            "accuracy": round(float(np.mean([a == b for a, b in zip(p, o)])), 4),
            "quality": round(float(np.mean([rows[i]["pref"][pred[i]] for i in idx])), 4),
            "route_share": route_share(p, routes),
            "oracle_share": route_share(o, routes),
        }
    out["per_dataset"] = per
    return out
