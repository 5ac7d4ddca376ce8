"""Escalation by the model's certainty, judged leave-one-dataset-out: a chunk answer the model
was unsure of goes on to logic and pays for both; the threshold comes from the other sets."""

from __future__ import annotations

import json

import pytest

from hierarchy.datasets import Question
from tests.fakes import HashedBowEmbedder
from training.fitting.fit import TrainConfig
from training.fitting.lodo import lodo_report
from training.fitting.lodo_cascade import escalate, fit_threshold, fit_threshold_utility, retry_unanswered
from training.fitting.lodo_format import format_lodo
from training.labels.label_scorers import LabelConfig
from training.labels.labels import make_row

CHUNK, LOGIC = {"tokens": 700, "llm_calls": 1}, {"tokens": 3000, "llm_calls": 5}


def _row(chunk: float, logic: float, confidence: float | None) -> dict:
    row = {"scores": {"chunk": chunk, "logic": logic}, "costs": {"chunk": CHUNK, "logic": LOGIC}}
    if confidence is not None:
        row["confidence"] = {"chunk": confidence}
    return row


def test_an_unsure_cheap_answer_becomes_logic_and_pays_for_the_cheap_attempt():
    rows = [_row(0, 1, 0.3), _row(1, 1, 0.9), _row(0, 1, None), _row(0, 1, 0.2)]
    decisions, paid = escalate(rows, ["chunk", "chunk", "chunk", "logic"], threshold=0.5)
    assert decisions == ["logic", "chunk", "chunk", "logic"]  # no confidence: kept; logic first: as it was
    assert paid == [{"tokens": 700, "llm_calls": 1.0}, {}, {}, {}]


def test_a_cheap_answer_that_says_it_has_none_is_retried_on_logic_and_pays_for_both():
    rows = [_row(0, 1, None) for _ in range(4)]
    texts = ["Not in the indexed documents.", "Warsaw", "unknown", "unknown"]
    for row, text in zip(rows, texts):
        row["answers_pred"] = {"chunk": text, "logic": "Warsaw"}
    rows.append(_row(0, 1, None))  # no stored answer text: kept
    decisions, paid = retry_unanswered(rows, ["chunk", "chunk", "chunk", "logic", "chunk"])
    assert decisions == ["logic", "chunk", "logic", "logic", "chunk"]
    assert paid == [{"tokens": 700, "llm_calls": 1.0}, {}, {"tokens": 700, "llm_calls": 1.0}, {}, {}]


def test_the_retry_climbs_to_summary_first_and_on_to_logic_only_while_the_answers_say_they_have_none():
    rows = [_row(0, 1, None) for _ in range(3)]
    for row, summary in zip(rows, ["Warsaw", "Not in the indexed documents.", "Warsaw"]):
        row["scores"]["summary"], row["costs"]["summary"] = 0.5, {"tokens": 900, "llm_calls": 1}
        row["answers_pred"] = {"chunk": "Not in the indexed documents.", "summary": summary, "logic": "Warsaw"}
    rows[2]["answers_pred"]["chunk"] = "Warsaw"
    decisions, paid = retry_unanswered(rows, ["chunk"] * 3)
    assert decisions == ["summary", "logic", "chunk"]
    assert paid == [{"tokens": 700, "llm_calls": 1.0}, {"tokens": 1600, "llm_calls": 2.0}, {}]
    assert retry_unanswered(rows, ["chunk"] * 3, ("logic",))[0] == ["logic", "logic", "chunk"]
    assert retry_unanswered(rows, ["summary"] * 3)[0] == ["summary", "logic", "summary"]  # summary's own "none"


def test_the_fitted_threshold_scores_best_within_half_of_always_logics_tokens():
    # logic wins on the unsure answers only; escalating a sure one costs tokens and gains nothing
    rows = [_row(0, 1, 0.2), _row(0, 1, 0.4), *(_row(1, 1, c) for c in (0.8, 0.85, 0.9, 0.9, 0.95, 0.99))]
    t = fit_threshold(rows, ["chunk"] * 8)
    assert 0.4 < t <= 0.8  # both unsure answers escalated: 1,450 tokens a question, within 1,500
    assert escalate(rows, ["chunk"] * 8, t)[0] == ["logic", "logic", *["chunk"] * 6]
    assert fit_threshold(rows, ["chunk"] * 8, share=0.2) == 0.0  # the chunk route alone spends 23%: never


def _unsure_wrong_rows() -> list[dict]:
    """Eight rows: the four unsure chunk answers (0.1-0.4) are wrong, logic is right everywhere;
    escalating k of them spends (8 x 700 + k x 3,000) / 8 tokens a question, 23% + 12.5% k of logic's."""
    return [*(_row(0, 1, c) for c in (0.1, 0.2, 0.3, 0.4)), *(_row(1, 1, c) for c in (0.8, 0.85, 0.9, 0.95))]


def _token_share(rows: list[dict], threshold: float) -> float:
    decisions, paid = escalate(rows, ["chunk"] * len(rows), threshold)
    spent = sum(row["costs"][d]["tokens"] + p.get("tokens", 0) for row, d, p in zip(rows, decisions, paid))
    return spent / sum(row["costs"]["logic"]["tokens"] for row in rows)


def test_a_token_budget_leaves_out_every_threshold_that_spends_more_than_it_on_the_fitting_rows():
    rows, first = _unsure_wrong_rows(), ["chunk"] * 8
    uncapped = fit_threshold_utility(rows, first)
    assert uncapped == 0.8 and _token_share(rows, uncapped) > 0.5  # all four unsure answers: 73% of logic's
    capped = fit_threshold_utility(rows, first, max_token_share=0.5)
    assert capped == 0.3 and _token_share(rows, capped) <= 0.5  # the two it can pay for (48%), not a third (61%)
    assert fit_threshold_utility(rows, first, max_token_share=0.2) == 0.0  # chunk alone spends 23%: never escalate


def test_no_token_budget_fits_the_threshold_as_the_utility_alone_picks_it():
    rows, first = _unsure_wrong_rows(), ["chunk"] * 8
    assert fit_threshold_utility(rows, first, max_token_share=None) == fit_threshold_utility(rows, first) == 0.8
    assert fit_threshold_utility(rows, first, max_token_share=1.0) == 0.8  # a budget it stays within changes nothing


def _label_file(tmp_path, dataset: str, n: int) -> str:
    """A quarter of the chunk answers are wrong and unsure, the rest right and sure, in every set."""
    cfg = LabelConfig(scorer="answer", routes=("chunk", "logic"), llm="fake")
    lines = []
    for i in range(n):
        wrong = i % 4 == 0
        q = Question(f"q{i}", f"Question {i} of {dataset}?", ["x"], type="one", supporting=[], dataset=dataset)
        costs = {"chunk": dict(CHUNK), "logic": dict(LOGIC)}
        extra = {"confidence": {"chunk": 0.3 if wrong else 0.9}}
        lines.append(json.dumps(make_row(q, {"chunk": 0.0 if wrong else 1.0, "logic": 1.0}, costs, cfg, i, extra)))
    path = tmp_path / f"{dataset}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_lodo_judges_the_chunk_and_router_cascades_with_thresholds_from_the_other_sets(tmp_path):
    files = [_label_file(tmp_path, d, 8) for d in ("a", "b", "c")]
    cfg = TrainConfig(hidden=(8, 4), max_epochs=2, patience=2, val_frac=0.25)
    rep = lodo_report(files, cfg, embedder=HashedBowEmbedder(dim=16))

    assert set(rep["confidence_thresholds"]) == {"a", "b", "c"}
    assert all(0.3 < t <= 0.9 for t in rep["confidence_thresholds"].values())
    for table in rep["held_out"].values():
        cascade = table["chunk+confidence"]
        assert cascade["score"] == 100.0 and cascade["shares"] == {"chunk": 0.75, "logic": 0.25}
        assert cascade["tokens"] == pytest.approx((6 * 700 + 2 * (700 + 3000)) / 8)  # both answers paid
        assert table["router+confidence"]["score"] >= table["router"]["score"]
        assert table["router+forms+retry"] == table["router+forms"]  # no stored answer says it has none
        # the shipped default with --escalate-below: every unsure cheap answer it kept goes on to logic
        assert table["router+forms+retry+confidence"]["score"] == 100.0
        assert table["router+forms+retry+confidence"]["score"] >= table["router+forms+retry"]["score"]
    assert rep["pooled"]["chunk+confidence"]["n"] == 24
    assert "chunk+confidence / router+confidence / router+forms+retry+confidence" in format_lodo(rep)


def test_the_retry_cascade_pays_once_for_a_retried_answer_and_once_for_an_unsure_one():
    from training.fitting.lodo_cascade import ROUTER_FORMS, ROUTER_RETRY, escalation_systems

    rows = [_row(0, 1, 0.9), _row(0, 1, 0.2), _row(1, 1, 0.9)]
    rows[0]["answers_pred"] = {"chunk": "Not in the indexed documents."}
    decided, paid = {"router": ["chunk"] * 3, ROUTER_FORMS: ["chunk"] * 3}, {}
    train = [_row(0, 1, 0.2), *(_row(1, 1, 0.9) for _ in range(7))]
    escalation_systems([*rows, *train], [0, 1, 2], decided, paid, [ROUTER_RETRY, "router+confidence"])
    assert "router+forms+retry+confidence" not in decided  # not asked for
    escalation_systems(
        [*rows, *train], [0, 1, 2], decided, paid, [ROUTER_RETRY, "router+confidence", "router+forms+retry+confidence"]
    )
    assert decided["router+forms+retry+confidence"] == ["logic", "logic", "chunk"]
    assert paid["router+forms+retry+confidence"] == [{"tokens": 700, "llm_calls": 1.0}] * 2 + [{}]


def test_the_ranking_check_scores_each_signal_by_how_it_orders_the_rows_logic_wins():
    from training.fitting.lodo_cascade import logic_gain_ranking

    rows = [
        {"scores": {"chunk": c, "logic": g}, "confidence": {"chunk": conf}}
        for c, g, conf in ((0.0, 1.0, 0.2), (0.0, 1.0, 0.3), (1.0, 1.0, 0.9), (1.0, 0.0, 0.8))
    ]
    got = logic_gain_ranking(rows, [0.9, 0.1, 0.5, 0.5])
    assert got == {"n": 4, "logic_better": 2, "chunk_better": 1, "auc_p_logic": 0.5, "auc_chunk_unsure": 1.0}
    assert "auc_p_logic" not in logic_gain_ranking(rows[2:], [0.5, 0.5])  # no row that logic wins: no AUC
