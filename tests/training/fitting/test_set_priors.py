"""Set priors: silver router labels from the kind of set a question comes from (single-hop sets
to chunk, multi-hop sets to logic). They train a router, never judge one, and a leave-one-
dataset-out fold never trains on the priors of the set it leaves out."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.floor.base.errors import LogicRouteError
from hierarchy.datasets import Question, load_dataset
from tests.fakes import HashedBowEmbedder
from training.common.shared_data import resolve_data
from training.fitting import lodo, train
from training.fitting.fit import TrainConfig
from training.fitting.lodo_format import format_lodo
from training.fitting.set_priors import BENCHMARK_QUESTIONS, SET_ROUTES, Priors, prior_rows
from training.labels.label_scorers import LabelConfig
from training.labels.labels import make_row

ROUTES = ("chunk", "summary", "logic")


def test_each_set_contributes_rows_labelled_by_its_kind(shared_data):
    rows = prior_rows(ROUTES, per_set=4, strength=0.8)

    assert [r["dataset"] for r in rows] == [name for name in SET_ROUTES for _ in range(4)]
    for r in rows:
        assert r["prior"] is True and r["oracle"] == SET_ROUTES[r["dataset"]]
        assert r["pref"][r["oracle"]] == 0.8 and sum(r["pref"].values()) == pytest.approx(1.0)
    assert {SET_ROUTES[n] for n in ("nq", "squad")} == {"chunk"}
    assert {SET_ROUTES[n] for n in ("hotpotqa", "2wiki", "musique")} == {"logic"}
    assert prior_rows(ROUTES, per_set=4, strength=0.8) == rows  # the same rows every time


def test_benchmark_and_answer_labelled_questions_are_never_priors(shared_data):
    benchmark = {q.text for q in load_dataset(resolve_data("musique")).questions[:BENCHMARK_QUESTIONS]}
    first = prior_rows(ROUTES, per_set=3, sets={"musique": "logic"})
    labelled = {first[0]["question"]}

    rows = prior_rows(ROUTES, per_set=500, sets={"musique": "logic"}, exclude=labelled)

    texts = {r["question"] for r in rows}
    assert not texts & benchmark and not texts & labelled
    assert len(rows) == 200 - BENCHMARK_QUESTIONS - 1  # every other question of the 200, once


def test_a_strength_that_does_not_favour_the_sets_route_or_an_unknown_route_is_refused(shared_data):
    with pytest.raises(LogicRouteError, match="strength"):
        prior_rows(ROUTES, per_set=2, strength=0.3)
    with pytest.raises(LogicRouteError, match="summary"):
        prior_rows(("chunk", "logic"), per_set=2, sets={"nq": "summary"})


def test_priors_join_the_training_part_only_and_early_stopping_stays_on_answers():
    routes = ("chunk", "logic")
    cfg_rows = LabelConfig(scorer="answer", routes=routes, llm="fake")
    rows = []
    for i in range(20):
        q = Question(id=str(i), text=f"Where is town {i}?", answers=["x"], type=None, supporting=[], dataset="a")
        scores = {"chunk": 1.0, "logic": 1.0}
        costs = {"chunk": {"tokens": 700, "llm_calls": 1}, "logic": {"tokens": 3000, "llm_calls": 5}}
        rows.append(make_row(q, scores, costs, cfg_rows, index=i))
    emb = HashedBowEmbedder(dim=16)
    cfg = TrainConfig(features=(), hidden=(8, 4), max_epochs=2, patience=2, val_frac=0.2)
    x = np.asarray(emb.encode([r["question"] for r in rows]), dtype=np.float32)
    priors = Priors(
        [{"question": "q", "dataset": "b", "pref": {"chunk": 0.2, "logic": 0.8}, "oracle": "logic", "prior": True}]
        * 30,
        np.ones((30, 16), dtype=np.float32),
    )

    _, tr, va, _ = train.fit_router(x, rows, routes, cfg, 16, priors=priors)

    assert len(tr) + len(va) == len(rows) and len(va) > 0  # the split is over answer rows alone
    assert priors.without("b").rows == [] and len(priors.without("a").rows) == 30


def _label_file(tmp_path, dataset: str) -> str:
    cfg = LabelConfig(scorer="answer", routes=ROUTES, llm="fake")
    lines = []
    for i in range(8):
        q = Question(id=f"{dataset}{i}", text=f"Who wrote book {i} of {dataset}?", answers=["x"], type=None,
                     supporting=[], dataset=dataset)  # fmt: skip
        scores = {"chunk": float(i % 2), "summary": 0.0, "logic": 1.0}
        costs = {r: {"tokens": t, "llm_calls": 1} for r, t in zip(ROUTES, (700, 900, 3000))}
        lines.append(json.dumps(make_row(q, scores, costs, cfg, index=i)))
    path = tmp_path / f"{dataset}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_fold_never_trains_on_the_priors_of_the_set_it_leaves_out(tmp_path, shared_data, monkeypatch):
    files = [_label_file(tmp_path, d) for d in ("nq", "2wiki", "musique")]
    seen: list[set[str]] = []
    real_fit = train.fit_router

    def recording_fit(*args, priors=None, **kw):
        seen.append({r["dataset"] for r in priors.rows})
        return real_fit(*args, priors=priors, **kw)

    monkeypatch.setattr(lodo, "fit_router", recording_fit)
    cfg = TrainConfig(features=(), hidden=(8, 4), max_epochs=2, patience=2, val_frac=0.2, prior_per_set=3)

    rep = lodo.lodo_report(files, cfg, embedder=HashedBowEmbedder(dim=16))

    assert rep["priors"] == {name: 3 for name in SET_ROUTES}
    assert "router trained with set priors (nq 3, squad 3, hotpotqa 3, 2wiki 3, musique 3)" in format_lodo(rep)
    left_out = sorted(rep["held_out"])  # the folds run in this order
    assert left_out == ["2wiki", "musique", "nq"]
    for dataset, datasets_trained in zip(left_out, seen):
        assert dataset not in datasets_trained and len(datasets_trained) == len(SET_ROUTES) - 1


def test_train_and_eval_router_take_set_priors_and_the_card_records_them(tmp_path, shared_data):
    from click.testing import CliRunner

    from training.fitting.cmd_eval import eval_router
    from training.fitting.cmd_train import train
    from training.fitting.fit import config_from_card

    files = ",".join(_label_file(tmp_path, d) for d in ("nq", "2wiki"))
    out, obj = tmp_path / "g.ckpt", {"embedder": HashedBowEmbedder(dim=16)}
    args = ["generalist", "--labels", files, "--out", str(out), "--set-priors", "2", "--hidden", "8,4", "--epochs", "2"]
    assert CliRunner().invoke(train, args, obj=obj, catch_exceptions=False).exit_code == 0
    card = json.loads(out.with_suffix(".card.json").read_text())
    assert card["priors"]["per_set"] == {name: 2 for name in SET_ROUTES} and card["priors"]["strength"] == 0.8
    assert config_from_card(out).prior_per_set == 2  # --recipe retrains every fold with them

    report = tmp_path / "lodo.json"
    args = ["--lodo", "--labels", files, "--set-priors", "3", "--features", "none", "--json", str(report)]
    res = CliRunner().invoke(eval_router, args, obj=obj, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert json.loads(report.read_text())["priors"] == {name: 3 for name in SET_ROUTES}
