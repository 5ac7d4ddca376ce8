"""RouteLLM-style cost-quality analysis: pure functions over per-question scores.

The logic route is the "strong" model, the chunk route the "weak" one. Sending questions with
P(logic) >= t to logic, for every t, traces quality against the share of logic calls; AUC, APGR
(average performance gap recovered: 0.5 for random routing, 1.0 for a perfect step) and CPT(x%)
(the share of logic calls needed to recover x% of the weak-strong gap) summarize the curve.
"""

from __future__ import annotations

from collections.abc import Sequence


def pgr(quality: float, weak: float, strong: float) -> float | None:
    """Performance gap recovered: (quality - weak) / (strong - weak); None without a gap."""
    gap = strong - weak
    return None if gap <= 0 else (quality - weak) / gap


def cost_quality_curve(p_strong: Sequence[float], strong: Sequence[float], weak: Sequence[float]) -> list[dict]:
    """Quality vs share of strong calls when questions with P(strong) >= t go to the strong
    route, for every distinct t (from none to all; tied probabilities move together).

    Returns points {threshold, share, quality} with share rising from 0 to 1; the first point
    (no strong call) has threshold None."""
    n = len(p_strong)
    if n == 0 or len(strong) != n or len(weak) != n:
        raise ValueError("cost_quality_curve needs equally long, non-empty sequences")
    order = sorted(range(n), key=lambda i: -p_strong[i])
    total = float(sum(weak))
    points = [{"threshold": None, "share": 0.0, "quality": total / n}]
    i = 0
    while i < n:
        t = p_strong[order[i]]
        while i < n and p_strong[order[i]] == t:
            total += strong[order[i]] - weak[order[i]]
            i += 1
        points.append({"threshold": float(t), "share": i / n, "quality": total / n})
    return points


def curve_auc(shares: Sequence[float], quality: Sequence[float]) -> float:
    """Area under quality vs share (trapezoids; the curve spans shares 0..1)."""
    pts = sorted(zip(shares, quality))
    return float(sum((x1 - x0) * (y0 + y1) / 2 for (x0, y0), (x1, y1) in zip(pts, pts[1:])))


def apgr(shares: Sequence[float], quality: Sequence[float], weak: float, strong: float) -> float | None:
    """Average performance gap recovered = integral of PGR over the share of strong calls,
    i.e. (AUC - weak) / (strong - weak). 0.5 for random routing, 1.0 for a perfect step."""
    gap = strong - weak
    return None if gap <= 0 else (curve_auc(shares, quality) - weak) / gap


def cpt(shares: Sequence[float], quality: Sequence[float], weak: float, strong: float, target: float) -> float | None:
    """Call-performance threshold: the smallest share of strong calls whose quality recovers
    `target` (0..1) of the weak-strong gap, interpolating linearly between curve points
    (mixing two neighbouring thresholds at random reaches any point in between)."""
    gap = strong - weak
    if gap <= 0:
        return None
    goal = weak + target * gap
    pts = sorted(zip(shares, quality))
    eps = 1e-12
    for i, (x, y) in enumerate(pts):
        if y >= goal - eps:
            if i == 0:
                return float(x)
            x0, y0 = pts[i - 1]
            return float(x0 + (goal - y0) * (x - x0) / (y - y0))
    return None


def curve_summary(points: list[dict], weak: float, strong: float) -> dict:
    xs, ys = [p["share"] for p in points], [p["quality"] for p in points]
    return {
        "points": points,
        "auc": curve_auc(xs, ys),
        "apgr": apgr(xs, ys, weak, strong),
        "cpt50": cpt(xs, ys, weak, strong, 0.5),
        "cpt80": cpt(xs, ys, weak, strong, 0.8),
    }


def cost_quality(p_logic: Sequence[float], strong: Sequence[float], weak: Sequence[float]) -> dict:
    """The whole analysis for one scope: router curve, oracle curve (perfect ordering by the
    gain), random routing (the straight line), weak/strong/oracle qualities."""
    n = len(strong)
    w, s = sum(weak) / n, sum(strong) / n
    gain = [a - b for a, b in zip(strong, weak)]
    oracle_q = sum(max(a, b) for a, b in zip(strong, weak)) / n
    random_pts = [{"threshold": None, "share": 0.0, "quality": w}, {"threshold": None, "share": 1.0, "quality": s}]
    return {
        "n": n,
        "weak": w,
        "strong": s,
        "router": curve_summary(cost_quality_curve(p_logic, strong, weak), w, s),
        "oracle": curve_summary(cost_quality_curve(gain, strong, weak), w, s),
        "random": curve_summary(random_pts, w, s),
        # the chunk/logic oracle as one point: logic only where it scores strictly better
        "oracle_point": {"share": sum(g > 0 for g in gain) / n, "quality": oracle_q},
    }
