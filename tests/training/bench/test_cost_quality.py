"""The routing benchmark's pure parts: cost-quality metrics on hand-made curves, the oracle
choice and the confusion matrix."""

from __future__ import annotations

import pytest

from training.bench.bench_analysis import oracle_choice
from training.bench.cost_quality import apgr, cost_quality, cost_quality_curve, cpt, curve_auc, pgr
from training.fitting.route_metrics import confusion


def test_auc_apgr_cpt_on_a_hand_made_curve():
    shares, quality = [0.0, 0.5, 1.0], [0.2, 0.6, 0.7]
    assert curve_auc(shares, quality) == pytest.approx(0.5 * 0.4 + 0.5 * 0.65)  # 0.525
    assert apgr(shares, quality, 0.2, 0.7) == pytest.approx((0.525 - 0.2) / 0.5)  # 0.65
    # 50% of the gap = quality 0.45: between (0, .2) and (.5, .6) -> 0.5 * .25/.4
    assert cpt(shares, quality, 0.2, 0.7, 0.5) == pytest.approx(0.3125)
    assert cpt(shares, quality, 0.2, 0.7, 0.8) == pytest.approx(0.5)  # 0.6 is reached exactly at 0.5
    assert pgr(0.45, 0.2, 0.7) == pytest.approx(0.5)


def test_random_and_perfect_routing_reference_values():
    line_x, line_y = [0.0, 1.0], [0.3, 0.5]
    assert apgr(line_x, line_y, 0.3, 0.5) == pytest.approx(0.5)
    assert cpt(line_x, line_y, 0.3, 0.5, 0.5) == pytest.approx(0.5)
    assert cpt(line_x, line_y, 0.3, 0.5, 0.8) == pytest.approx(0.8)
    # all the gain in the first 10% of calls: APGR near 1, CPT tiny
    step_x, step_y = [0.0, 0.1, 1.0], [0.3, 0.5, 0.5]
    assert apgr(step_x, step_y, 0.3, 0.5) == pytest.approx(0.95)
    assert cpt(step_x, step_y, 0.3, 0.5, 0.8) == pytest.approx(0.08)


def test_no_gap_gives_none():
    assert apgr([0, 1], [0.5, 0.5], 0.5, 0.5) is None
    assert cpt([0, 1], [0.6, 0.4], 0.6, 0.4, 0.5) is None
    assert pgr(0.5, 0.6, 0.4) is None


def test_cost_quality_curve_from_questions():
    p = [0.9, 0.8, 0.2, 0.1]
    strong = [1.0, 1.0, 0.0, 1.0]
    weak = [0.0, 1.0, 0.0, 0.0]
    pts = cost_quality_curve(p, strong, weak)
    assert [pt["share"] for pt in pts] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert [pt["quality"] for pt in pts] == pytest.approx([0.25, 0.5, 0.5, 0.5, 0.75])
    assert pts[0]["threshold"] is None and pts[1]["threshold"] == 0.9
    xs, ys = [pt["share"] for pt in pts], [pt["quality"] for pt in pts]
    assert curve_auc(xs, ys) == pytest.approx(0.5)
    assert apgr(xs, ys, 0.25, 0.75) == pytest.approx(0.5)
    assert cpt(xs, ys, 0.25, 0.75, 0.5) == pytest.approx(0.25)
    assert cpt(xs, ys, 0.25, 0.75, 0.8) == pytest.approx(0.9)
    a = cost_quality(p, strong, weak)
    assert a["weak"] == 0.25 and a["strong"] == 0.75
    assert a["oracle_point"] == {"share": 0.5, "quality": 0.75}
    assert a["oracle"]["apgr"] > a["router"]["apgr"] and a["random"]["apgr"] == pytest.approx(0.5)


def test_tied_probabilities_move_together():
    pts = cost_quality_curve([0.5, 0.5, 0.1], [1, 1, 1], [0, 0, 0])
    assert [pt["share"] for pt in pts] == pytest.approx([0, 2 / 3, 1])


def test_oracle_prefers_score_then_fewer_tokens():
    rows = {
        "chunk": {"f1": 1.0, "prompt_tokens": 500, "completion_tokens": 3},
        "summary": {"f1": 1.0, "prompt_tokens": 700, "completion_tokens": 3},
        "logic": {"f1": 1.0, "prompt_tokens": 2000, "completion_tokens": 40},
    }
    assert oracle_choice(rows, "f1", ["chunk", "summary", "logic"]) == "chunk"
    rows["logic"]["f1"] = 1.0
    rows["chunk"]["f1"] = 0.5
    rows["summary"]["f1"] = 0.5
    assert oracle_choice(rows, "f1", ["chunk", "summary", "logic"]) == "logic"
    cm = confusion(["chunk", "logic", "logic"], ["chunk", "chunk", "logic"], ["chunk", "logic"])
    assert cm["matrix"] == [[1, 0], [1, 1]] and cm["agreement"] == pytest.approx(2 / 3)
