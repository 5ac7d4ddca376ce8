"""Fitting the list gate (training.fitting.list_gate_fit): the list questions' rows train the gate,
never the MLP; the generalist's checkpoint carries the gate; leave-one-dataset-out judges a corpus's
list questions with a gate that never saw that corpus, and only where the global mode answered."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.core.decide import Decider
from engine.floor.base.errors import LogicRouteError
from hierarchy.datasets import Question
from router.checkpoint import load_router, read_card
from tests.fakes import HashedBowEmbedder
from tests.router.tiny_setup import shape_gate
from training.fitting.fit import TrainConfig
from training.fitting.list_gate_fit import fit_list_gate, gate_targets, is_list_row
from training.fitting.lodo import lodo_report
from training.fitting.train import train_generalist
from training.labels.label_scorers import LabelConfig
from training.labels.labels import make_row

pytestmark = pytest.mark.usefixtures("one_thread")

ROUTES = ("chunk", "summary", "logic")
COSTS = {r: {"tokens": t, "llm_calls": c} for r, t, c in (("chunk", 700, 1), ("summary", 1500, 2), ("logic", 3000, 5))}
ITEMS = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]


def embedder() -> HashedBowEmbedder:
    return HashedBowEmbedder("tiny-bow", 64)


def label_file(tmp_path, dataset: str, questions: list[str], scores: dict, **extra) -> str:
    cfg = LabelConfig(scorer="answer", routes=ROUTES, llm="fake")
    lines = []
    for i, text in enumerate(questions):
        q = Question(id=f"{dataset}{i}", text=text, answers=["x"], type=None, supporting=[], dataset=dataset)
        lines.append(json.dumps({**make_row(q, scores, COSTS, cfg, index=i), **extra}))
    path = tmp_path / f"{dataset}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def lookups(words: list[str]) -> list[str]:
    return [f"Where is the {w} gate of the old town?" for w in words]


def lists(corpus: str, words: list[str]) -> list[str]:
    return [f"Which {corpus} modules document the {w} event?" for w in words]


LOOKUP_SCORES = {"chunk": 1.0, "summary": 0.0, "logic": 0.0}
LIST_SCORES = {"chunk": 0.1, "summary": 0.8, "logic": 0.2}


def test_list_questions_are_the_positives_whichever_route_won_them_and_lookup_priors_are_not():
    rows = [
        {"dataset": "lists_npm", "oracle": "chunk"},  # an answer label: a list question still
        {"dataset": "lists_npm", "oracle": "summary", "prior": True},
        {"dataset": "lists_npm", "oracle": "chunk", "prior": True},  # the corpus's one-value question
        {"dataset": "nq", "oracle": "summary"},
    ]
    assert gate_targets(rows).tolist() == [True, True, False, False]
    assert [is_list_row(r) for r in rows] == [True, True, True, False]


def test_no_gate_is_fitted_without_list_questions_or_without_anything_else():
    e = np.zeros((3, 8), np.float32)
    qs = ["Which a?", "Which b?", "Which c?"]
    assert fit_list_gate(e, qs, np.array([False] * 3)) is None
    assert fit_list_gate(e, qs, np.array([True] * 3)) is None


def test_the_generalist_carries_a_gate_trained_on_the_list_rows_which_never_train_its_mlp(tmp_path):
    files = [
        label_file(tmp_path, "toy", lookups(ITEMS), LOOKUP_SCORES),
        label_file(tmp_path, "lists_npm", lists("npm", ITEMS), LIST_SCORES, summary_mode="global"),
    ]
    cfg = TrainConfig(hidden=(8, 4), max_epochs=3, batch_size=8, val_frac=0.0)
    card = train_generalist(files, tmp_path / "g.ckpt", cfg, embedder=embedder())
    assert card["training"]["n_train"] == len(ITEMS)  # the lookups only
    assert card["list_gate"]["positives"] == len(ITEMS) and card["list_gate"]["negatives"] == len(ITEMS)
    assert read_card(tmp_path / "g.ckpt")["list_gate"]["features"] == ["shape"]
    router = load_router(tmp_path / "g.ckpt", embedder=embedder())
    asked = ["Which npm modules document the zeta event?", *lookups(["zeta"])]
    listed, lookup = Decider().decide_many(router, asked)
    assert listed.route == "summary" and lookup.route != "summary"
    e = router.inputs(asked)[:, :64]
    assert router.gate.fires(e, asked)[1] is None
    assert router.gate.fires(e, asked)[0] is not None

    plain = train_generalist(files[:1], tmp_path / "plain.ckpt", cfg, embedder=embedder())
    assert "list_gate" not in plain and load_router(tmp_path / "plain.ckpt", embedder=embedder()).gate is None


def lodo(tmp_path, *more) -> dict:
    files = [
        label_file(tmp_path, "toy", lookups(ITEMS[:4]), LOOKUP_SCORES),
        label_file(tmp_path, "toy2", lookups(ITEMS[4:]), LOOKUP_SCORES),  # a fold that leaves toy out still has an MLP
        label_file(tmp_path, "lists_npm", lists("npm", ITEMS), LIST_SCORES, summary_mode="global"),
        *more,
    ]
    cfg = TrainConfig(hidden=(8, 4), max_epochs=20, batch_size=8, val_frac=0.0)
    return lodo_report(files, cfg, embedder=embedder())["held_out"]


def test_a_left_out_corpus_is_gated_by_a_gate_trained_on_the_other_corpora(tmp_path):
    node = label_file(tmp_path, "lists_node", lists("node", ITEMS), LIST_SCORES, summary_mode="global")
    held_out = lodo(tmp_path, node)
    assert held_out["lists_node"]["router"]["shares"]["summary"] == 1.0
    assert held_out["toy"]["router"]["shares"]["summary"] == 0.0


def test_the_gate_judges_only_where_the_global_mode_answered(tmp_path, monkeypatch):
    """List questions answered over single passages (no summary_mode: the summary route's
    descent) keep the MLP's route, as ask --kb keeps the gate off on such a KB."""
    import training.fitting.list_gate_fit as gate_fit

    chunk_lists = label_file(tmp_path, "forms", lists("forms", ITEMS), LOOKUP_SCORES)  # the MLP: lists to chunk
    passages = label_file(tmp_path, "medical", lists("medical", ITEMS), LIST_SCORES)
    monkeypatch.setattr(gate_fit, "list_gate_for", lambda *a: None)
    mlp_alone = lodo(tmp_path, chunk_lists, passages)["medical"]["router"]
    assert mlp_alone["shares"]["summary"] < 1.0
    monkeypatch.setattr(gate_fit, "list_gate_for", lambda *a: shape_gate())  # fires on every list
    assert lodo(tmp_path, chunk_lists, passages)["medical"]["router"] == mlp_alone
    documents = label_file(tmp_path, "medical", lists("medical", ITEMS), LIST_SCORES, summary_mode="global")
    assert lodo(tmp_path, chunk_lists, documents)["medical"]["router"]["shares"]["summary"] == 1.0


def test_list_labels_alone_leave_the_mlp_nothing_to_train_on_and_say_so(tmp_path):
    files = [label_file(tmp_path, "lists_npm", lists("npm", ITEMS), LIST_SCORES, summary_mode="global")]
    with pytest.raises(LogicRouteError, match="list questions"):
        train_generalist(files, tmp_path / "g.ckpt", TrainConfig(hidden=(8, 4), max_epochs=1), embedder=embedder())
