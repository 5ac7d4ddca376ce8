"""training.adapt.adapt_ceiling: the best one threshold on one signal reaches within the token cap,
fitted on the judged rows (an upper bound), beside the exact expected score of a random pick."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from training.adapt.adapt_ceiling import (
    Rule,
    ceiling,
    cheap_choice,
    logic_cap,
    noise_ceiling,
    random_pick,
    seed_groups,
    set_ceilings,
    sweep,
)

CHUNK, LOGIC = 100, 1000  # tokens: the cap (half of logic's) allows 8 of 20 rows to go to logic


def row(chunk: float, logic: float, confidence: float | None = None, chunk_tokens: int = CHUNK) -> dict:
    r = {
        "scores": {"chunk": chunk, "logic": logic},
        "costs": {"chunk": {"tokens": chunk_tokens}, "logic": {"tokens": LOGIC}},
    }
    if confidence is not None:
        r["confidence"] = {"chunk": confidence}
    return r


def gains_and_losses() -> list[dict]:
    """10 rows logic answers and chunk does not, then 10 where chunk answers and logic does not."""
    return [row(0.0, 1.0) for _ in range(10)] + [row(1.0, 0.0) for _ in range(10)]


def test_a_signal_that_separates_logic_wins_reaches_the_best_score_the_token_cap_allows():
    rows = gains_and_losses()
    signal = [0.9 + i / 1000 for i in range(10)] + [0.1] * 10
    e = ceiling(rows, Rule("perfect", signal, "chunk", ["chunk"] * 20))
    # 8 of the 10 wins fit under the cap (100 + 900 * 8 / 20 = 460 <= 500; 9 would spend 505)
    assert (e["score"], e["to_logic"], e["tokens"], e["direction"]) == (90.0, 0.4, 460.0, "high")
    assert e["token_share_of_logic"] == 0.46


def test_a_signal_read_backwards_is_found_from_its_low_end():
    rows = gains_and_losses()
    signal = [-(0.9 + i / 1000) for i in range(10)] + [-0.1] * 10
    e = ceiling(rows, Rule("reversed", signal, "chunk", ["chunk"] * 20))
    assert (e["score"], e["direction"]) == (90.0, "low")
    assert e["threshold"] <= -0.9


def test_a_signal_that_says_nothing_scores_what_a_random_pick_of_as_many_would():
    # five levels, each holding 2 rows logic wins and 2 where both routes fail: any cut is chance
    rows, signal = [], []
    for level in range(5):
        rows += [row(0.0, 1.0), row(0.0, 1.0), row(0.0, 0.0), row(0.0, 0.0)]
        signal += [float(level)] * 4
    e = ceiling(rows, Rule("flat", signal, "chunk", ["chunk"] * 20))
    assert e["to_logic"] == 0.4  # two whole levels: a threshold never splits a tie
    assert e["score"] == e["random_score"] == 20.0


def brute_force(rows: list[dict], values: list[float], first: list[str], cap: float, after: bool) -> float:
    """The best mean score within `cap` over sending none, and every cut in either direction, by
    building each decision list; -1 when none is within the cap."""
    choices = [[False] * len(rows)]
    for cut in set(values):
        choices += [[v >= cut for v in values], [v <= cut for v in values]]
    best = -1.0
    for sent in choices:
        decided = ["logic" if s else f for s, f in zip(sent, first)]
        score = sum(r["scores"][d] for r, d in zip(rows, decided)) / len(rows)
        paid = [
            r["costs"][d]["tokens"] + (r["costs"][f]["tokens"] if after and s else 0)
            for r, d, f, s in zip(rows, decided, first, sent)
        ]
        if sum(paid) / len(rows) <= cap + 1e-9:
            best = max(best, score)
    return best


@pytest.mark.parametrize("after_answer", [False, True])
@pytest.mark.parametrize("share", [0.2, 0.5, 0.8])
def test_the_sweep_finds_the_best_threshold_and_never_spends_more_than_the_cap(share, after_answer):
    rng = np.random.default_rng(7)
    for _ in range(20):
        rows = [
            row(float(rng.random() < 0.4), float(rng.random() < 0.6), chunk_tokens=int(rng.integers(50, 400)))
            for _ in range(12)
        ]
        values = [float(v) for v in rng.integers(0, 5, size=12)]  # ties on purpose
        first = ["chunk"] * 12
        cap = logic_cap(rows, share)
        best = sweep(rows, Rule("s", values, "chunk", first, after_answer=after_answer), cap)
        want = brute_force(rows, values, first, cap, after_answer)
        if want < 0:
            assert best["score"] is None
            continue
        assert best["tokens"] <= cap + 1e-9
        assert best["score"] == pytest.approx(want)


def test_escalating_on_the_cheap_answer_pays_for_both_answers():
    rows = [row(0.0, 1.0, confidence=0.2), row(1.0, 1.0, confidence=0.9)]
    rule = Rule("confidence", [0.2, 0.9], "chunk", ["chunk", "chunk"], after_answer=True)
    best = sweep(rows, rule, cap=10_000)
    assert (best["score"], best["direction"], best["sent"]) == (1.0, "low", 1)
    assert best["tokens"] == (CHUNK + LOGIC + CHUNK) / 2  # the escalated row paid for chunk and logic


def test_a_row_without_a_value_is_never_sent_to_logic():
    rows = [row(0.0, 1.0), row(0.0, 1.0)]
    best = sweep(rows, Rule("s", [None, 0.5], "chunk", ["chunk", "chunk"]), cap=10_000)
    assert (best["sent"], best["candidates"], best["score"]) == (1, 1, 0.5)


def test_the_random_pick_expectation_is_the_mean_over_every_subset_of_that_size():
    rows = [row(0.0, 1.0), row(1.0, 0.0), row(0.5, 1.0), row(0.0, 0.0), row(0.2, 0.9)]
    tokens = [CHUNK, 300, 150, CHUNK, 80]
    for r, t in zip(rows, tokens):
        r["costs"]["chunk"]["tokens"] = t
    rule = Rule("s", [0.0] * 5, "chunk", ["chunk"] * 5)
    for k in range(6):
        subsets = list(itertools.combinations(range(5), k))
        scores = [sum(r["scores"]["logic" if i in s else "chunk"] for i, r in enumerate(rows)) / 5 for s in subsets]
        costs = [sum(LOGIC if i in s else tokens[i] for i in range(5)) / 5 for s in subsets]
        assert random_pick(rows, rule, k) == pytest.approx((np.mean(scores), np.mean(costs)))


def test_a_threshold_fitted_on_the_judged_rows_finds_points_in_noise_that_a_real_signal_must_beat():
    rng = np.random.default_rng(3)
    rows = [row(float(rng.random() < 0.3), float(rng.random() < 0.4)) for _ in range(100)]
    first = ["chunk"] * 100
    base = 100 * sum(r["scores"]["chunk"] for r in rows) / 100
    noise = noise_ceiling(rows, Rule("s", [0.0] * 100, "chunk", first), draws=200)
    assert noise["noise_mean"] > base  # the fit alone gains over sending nothing
    assert noise["noise_p95"] >= noise["noise_mean"]
    knows = [r["scores"]["logic"] - r["scores"]["chunk"] + i / 1000 for i, r in enumerate(rows)]
    assert ceiling(rows, Rule("knows", knows, "chunk", first))["score"] > noise["noise_p95"]
    # rows the signal never sends stay out of the noise too
    nothing = noise_ceiling(rows, Rule("s", [None] * 100, "chunk", first), draws=20)
    assert nothing["noise_mean"] == nothing["noise_p95"] == round(base, 1)


def test_the_router_probability_falls_back_to_the_routers_best_route_other_than_logic():
    probs = [{"chunk": 0.2, "summary": 0.3, "logic": 0.5}, {"chunk": 0.6, "summary": 0.1, "logic": 0.3}]
    assert cheap_choice(probs) == ["summary", "chunk"]


def test_seeds_that_decide_alike_are_one_router():
    same = [{"chunk": 0.7, "logic": 0.3}]
    other = [{"chunk": 0.4, "logic": 0.6}]
    groups = seed_groups({0: same, 1: list(same), 2: other}, "adapted")
    assert list(groups) == ["adapted (seeds 0, 1)", "adapted (seed 2)"]


def test_a_set_passes_only_where_a_fitted_threshold_reaches_the_bar():
    rows = gains_and_losses()
    for r in rows:
        r["confidence"] = {"chunk": 0.5}  # one value for every answer: no threshold can pick 8 of 20
    probs = [{"chunk": 0.3 - i / 100, "logic": 0.7 + i / 100} for i in range(10)] + [{"chunk": 0.8, "logic": 0.2}] * 10
    out = set_ceilings(rows, {"router": probs}, "router", bar=90.0)
    by_rule = {(e["signal"], e["base"]): e for e in out["rules"]}
    assert by_rule[("P(logic), router", "chunk")]["score"] == 90.0
    assert by_rule[("P(logic), router", "chunk")]["passes"] is True
    assert by_rule[("cheap answer's confidence", "chunk")]["score"] == 50.0
    assert by_rule[("cheap answer's confidence", "chunk")]["passes"] is False
    assert out["best"]["signal"] == "P(logic), router" and out["any_passes"]
    assert max(e["score"] for e in out["reference"]) == 90.0  # the perfect signal at the cap
