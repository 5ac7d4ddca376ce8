"""Hop priors: the one-hop sub-questions a multi-hop set writes out (2Wiki's qa_pairs), labelled
chunk, so that a multi-hop set's topic alone does not send a lookup to logic. Like set priors they
train and never judge, and a fold that leaves their set out never sees them."""

from __future__ import annotations

import json

import pytest

from engine.floor.base.errors import LogicRouteError
from tests.fakes import HashedBowEmbedder
from training.common.shared_data import resolve_data
from training.fitting import lodo, train
from training.fitting.fit import TrainConfig
from training.fitting.set_priors import BENCHMARK_QUESTIONS, HOP_ROUTE, build_priors, hop_rows, pair_rows

ROUTES = ("chunk", "summary", "logic")


def _raw_2wiki() -> list[dict]:
    return json.loads(open(resolve_data("2wiki"), encoding="utf-8").read())


def test_hop_priors_are_2wikis_own_sub_questions_after_the_benchmarks_labelled_chunk(shared_data):
    rows = hop_rows(ROUTES, per_set=20, strength=0.8)
    records = _raw_2wiki()
    later = {p["question"].strip() for r in records[BENCHMARK_QUESTIONS:] for p in r["qa_pairs"]}
    benchmark_only = {p["question"].strip() for r in records[:BENCHMARK_QUESTIONS] for p in r["qa_pairs"]} - later
    assert len(rows) == 20 and len({r["question"] for r in rows}) == 20
    for r in rows:
        assert r["question"] in later and r["question"] not in benchmark_only
        assert r["dataset"] == "2wiki" and r["prior"] is True and r["hop"] is True and r["oracle"] == HOP_ROUTE
        assert r["pref"] == {"chunk": 0.8, "summary": 0.1, "logic": 0.1}
    assert HOP_ROUTE == "chunk" and hop_rows(ROUTES, per_set=20, strength=0.8) == rows  # the same every time
    assert "Who is the director of" in " ".join(r["question"] for r in hop_rows(ROUTES, per_set=200))


def test_hop_priors_leave_out_answer_labelled_questions_and_need_a_chunk_route(shared_data):
    first = hop_rows(ROUTES, per_set=5)
    again = hop_rows(ROUTES, per_set=5, exclude={first[0]["question"]})
    assert first[0]["question"] not in {r["question"] for r in again}
    with pytest.raises(LogicRouteError, match="hop priors name route 'chunk'"):
        hop_rows(("summary", "logic"), per_set=5)


def test_a_config_asks_for_hop_priors_apart_from_set_priors_and_counts_them_apart(shared_data):
    emb = HashedBowEmbedder(dim=16)
    cfg = TrainConfig(features=(), prior_per_set=0, hop_priors=4)
    priors = build_priors([], ROUTES, cfg, emb)
    assert priors.counts() == {"2wiki hops": 4} and priors.x.shape == (4, 16)
    both = build_priors([], ROUTES, TrainConfig(features=(), prior_per_set=2, hop_priors=4), emb)
    assert both.counts()["2wiki hops"] == 4 and both.counts()["2wiki"] == 2 and both.counts()["nq"] == 2
    assert build_priors([], ROUTES, TrainConfig(features=()), emb) is None
    assert len(both.without("2wiki").rows) == len(both.rows) - 6  # a 2Wiki fold sees neither kind


def test_a_fold_that_leaves_2wiki_out_trains_on_no_hop_prior(tmp_path, shared_data, monkeypatch):
    from tests.training.fitting.test_set_priors import _label_file

    files = [_label_file(tmp_path, d) for d in ("nq", "2wiki")]
    seen: list[int] = []
    real_fit = train.fit_router

    def recording_fit(*args, priors=None, **kw):
        seen.append(sum(bool(r.get("hop")) for r in priors.rows))
        return real_fit(*args, priors=priors, **kw)

    monkeypatch.setattr(lodo, "fit_router", recording_fit)
    cfg = TrainConfig(features=(), hidden=(8, 4), max_epochs=2, hop_priors=3)
    rep = lodo.lodo_report(files, cfg, embedder=HashedBowEmbedder(dim=16))
    assert sorted(rep["held_out"]) == ["2wiki", "nq"] and seen == [0, 3]  # 2wiki's fold first


def test_train_generalist_takes_hop_priors_and_its_card_records_them(tmp_path, shared_data):
    from click.testing import CliRunner

    from tests.training.fitting.test_set_priors import _label_file
    from training.fitting.cmd_train import train as train_cmd
    from training.fitting.fit import config_from_card

    files = ",".join(_label_file(tmp_path, d) for d in ("nq", "2wiki"))
    out, obj = tmp_path / "g.ckpt", {"embedder": HashedBowEmbedder(dim=16)}
    args = ["generalist", "--labels", files, "--out", str(out), "--hop-priors", "3", "--hidden", "8,4", "--epochs", "2"]
    res = CliRunner().invoke(train_cmd, args, obj=obj, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert config_from_card(out).hop_priors == 3  # --recipe retrains every fold with them
    assert json.loads(out.with_suffix(".card.json").read_text())["priors"]["per_set"] == {"2wiki hops": 3}


def test_pairs_are_2wiki_questions_labelled_logic_beside_their_own_sub_questions_labelled_chunk(shared_data):
    rows = pair_rows(ROUTES, per_set=6, strength=0.8)
    later = {r["question"]: [p["question"].strip() for p in r["qa_pairs"]] for r in _raw_2wiki()[BENCHMARK_QUESTIONS:]}
    questions = [r for r in rows if not r.get("hop")]
    assert len(questions) == 6
    for q in questions:  # each question is followed by its own sub-questions
        i = rows.index(q)
        subs = later[q["question"]]
        assert q["oracle"] == "logic" and q["pair"] and q["pref"] == {"chunk": 0.1, "summary": 0.1, "logic": 0.8}
        assert [r["question"] for r in rows[i + 1 : i + 1 + len(subs)]] == sorted(set(subs), key=subs.index)
        assert all(r["oracle"] == "chunk" and r["hop"] and r["pair"] for r in rows[i + 1 : i + 1 + len(subs)])
    assert pair_rows(ROUTES, per_set=6, strength=0.8) == rows  # the same every time
    asked = {questions[0]["question"]}
    assert questions[0]["question"] not in {r["question"] for r in pair_rows(ROUTES, per_set=6, exclude=asked)}
    with pytest.raises(LogicRouteError, match="'logic'"):
        pair_rows(("chunk", "summary"), per_set=2)
    priors = build_priors([], ROUTES, TrainConfig(features=(), hop_pairs=3), HashedBowEmbedder(dim=16))
    assert set(priors.counts()) == {"2wiki pairs"} and priors.counts()["2wiki pairs"] == len(priors.rows) > 3
    assert priors.without("2wiki").rows == []  # a 2Wiki fold never sees them
