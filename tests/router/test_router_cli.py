"""The router's commands on tiny data (label, train, route, calibrate, eval) and their clean
errors, seeded training, and the LLM-as-router baseline. A tiny hashed embedder stands in for
MiniLM."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from router.checkpoint import load_router, read_card
from tests.router.tiny_setup import ROUTES, tiny_embedder

pytestmark = pytest.mark.usefixtures("one_thread")


# ---------------------------------------------------------------- CLI on tiny data


SINGLE = [
    ("Who wrote the novel Emma?", "Jane Austen", "Emma", "Emma is a novel written by Jane Austen."),
    ("What is the capital of Peru?", "Lima", "Peru", "Lima is the capital of Peru."),
    ("Where is the Eiffel Tower?", "Paris", "Eiffel Tower", "The Eiffel Tower stands in Paris."),
    ("When did the Titanic sink?", "1912", "Titanic", "The Titanic sank in 1912."),
]


MULTI = [
    (
        "Who was born first, Alan Turing or Ada Lovelace?",
        "Ada Lovelace",
        [("Alan Turing", "Alan Turing was born in 1912."), ("Ada Lovelace", "Ada Lovelace was born in 1815.")],
    ),
    (
        "Which river is longer, the Nile or the Danube?",
        "Nile",
        [("Nile", "The Nile is 6650 km long."), ("Danube", "The Danube is 2850 km long.")],
    ),
    (
        "What country is the director of Amelie from?",
        "France",
        [
            ("Amelie", "Amelie is a film directed by Jean-Pierre Jeunet."),
            ("Jean-Pierre Jeunet", "Jean-Pierre Jeunet is a French film director."),
        ],
    ),
]


@pytest.fixture
def tiny_data(tmp_path):
    rows = []
    for i in range(3):  # repeat so every stratum has a few rows
        for j, (q, a, t, txt) in enumerate(SINGLE):
            rows.append(
                {
                    "id": f"s{i}{j}",
                    "question": q if i == 0 else f"{q} ({i})",
                    "answers": [a],
                    "passages": [{"title": t, "text": txt, "supporting": True}],
                }
            )
        for j, (q, a, ps) in enumerate(MULTI):
            rows.append(
                {
                    "id": f"m{i}{j}",
                    "question": q if i == 0 else f"{q} ({i})",
                    "answers": [a],
                    "passages": [{"title": t, "text": x, "supporting": True} for t, x in ps],
                }
            )
    path = tmp_path / "tiny.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_cli_label_train_route_calibrate_eval(tmp_path, tiny_data):
    from engine.face.cli_ask import ask
    from training.fitting.cmd_eval import calibrate, eval_router
    from training.fitting.cmd_train import train
    from training.labels.cmd_label import label

    assert set(train.commands) == {"generalist", "specialist"}
    emb = tiny_embedder()
    run = CliRunner()
    obj = {"embedder": emb}

    def ok(cmd, args):
        res = run.invoke(cmd, [str(a) for a in args], obj=obj, catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return res

    labels = tmp_path / "labels.jsonl"
    ok(
        label,
        [
            tiny_data,
            "--kb",
            tmp_path / "kb",
            "--out",
            labels,
            "--scorer",
            "retrieval",
            "--routes",
            "chunk,logic",
            "--k",
            "1",
            "--build-kb",
        ],
    )
    rows = [json.loads(line) for line in labels.read_text().splitlines()]
    assert len(rows) == 21 and set(rows[0]["scores"]) == {"chunk", "logic"}
    # resumed: nothing new
    res = ok(
        label,
        [
            tiny_data,
            "--kb",
            tmp_path / "kb",
            "--out",
            labels,
            "--scorer",
            "retrieval",
            "--routes",
            "chunk,logic",
            "--k",
            "1",
        ],
    )
    assert "0 rows written, 21 already there" in res.output
    assert len(labels.read_text().splitlines()) == 21

    ckpt = tmp_path / "g.ckpt"
    ok(
        train,
        ["generalist", "--labels", labels, "--out", ckpt, "--epochs", "4", "--hidden", "8,4", "--eval-labels", labels],
    )
    card = read_card(ckpt)
    assert card["routes"] == ["chunk", "logic"] and card["embedder"]["id"] == "tiny-bow"
    assert card["training"]["label_files"][0]["rows"] == 21
    assert "logreg" in card["heldout"]["baselines"]

    res = ok(ask, ["--dry-run", "Who wrote the novel Emma?", "--set", f"checkpoint={ckpt}", "--json"])
    out = json.loads(res.output)
    assert out["route"] in ("chunk", "logic") and abs(sum(out["probs"].values()) - 1) < 1e-5
    again = json.loads(
        ok(ask, ["--dry-run", "Who wrote the novel Emma?", "--set", f"checkpoint={ckpt}", "--json"]).output
    )
    assert again["probs"] == out["probs"]  # deterministic across loads
    assert "route:" in ok(ask, ["--dry-run", "Who wrote the novel Emma?", "--set", f"checkpoint={ckpt}"]).output

    qfile = tmp_path / "qs.txt"
    qfile.write_text("\n".join(r["question"] for r in rows) + "\n")
    th = tmp_path / "th.json"
    ok(calibrate, [qfile, "--checkpoint", ckpt, "--logic-share", "0.3", "--out", th])
    pol = json.loads(th.read_text())
    assert pol["kind"] == "threshold" and abs(pol["meta"]["achieved_share"] - 0.3) < 0.1
    ok(calibrate, [labels, "--checkpoint", ckpt, "--token-budget", "900", "--out", tmp_path / "tb.json"])
    res = ok(
        ask,
        [
            "--dry-run",
            "Who wrote the novel Emma?",
            "--set",
            f"checkpoint={ckpt}",
            "--set",
            f"budget.thresholds={th}",
            "--json",
        ],
    )
    assert json.loads(res.output)["policy"].startswith("threshold")

    rep = tmp_path / "rep.json"
    res = ok(eval_router, ["--checkpoint", ckpt, "--labels", labels, "--latency-n", "3", "--json", rep])
    assert "macro-F1" in res.output
    report = json.loads(rep.read_text())
    assert report["splits"]["overall"]["router"]["n"] == 21
    assert report["speed"]["batch_questions"] == 21  # every held-out question went through the batch timing

    spec = tmp_path / "s.ckpt"
    res = ok(train, ["specialist", "--from", ckpt, "--labels", labels, "--out", spec, "--epochs", "2"])
    scard = read_card(spec)
    assert scard["kind"] == "specialist" and set(scard["heldout"]["target"]) >= {"generalist", "specialist"}
    assert "specialist" in res.output


def test_cli_errors_are_clean(tmp_path, tiny_data):
    from engine.face.cli import main

    run = CliRunner()
    res = run.invoke(
        main, ["route", "Who?", "--set", f"checkpoint={tmp_path / 'nope.ckpt'}"], obj={"embedder": tiny_embedder()}
    )
    assert res.exit_code == 2 and "not found" in res.output
    res = run.invoke(
        main,
        [
            "label",
            str(tiny_data),
            "--kb",
            str(tmp_path / "nokb"),
            "--out",
            str(tmp_path / "l.jsonl"),
            "--scorer",
            "retrieval",
            "--routes",
            "chunk,logic",
        ],
        obj={"embedder": tiny_embedder()},
    )
    assert res.exit_code == 2 and "--build-kb" in res.output


# ---------------------------------------------------------------- training and baselines


def test_training_is_seeded_and_deterministic(tmp_path):
    from hierarchy.datasets import Question
    from training.labels.label_scorers import LabelConfig
    from training.labels.labels import make_row

    cfg = LabelConfig(scorer="retrieval", routes=ROUTES)
    costs = {"chunk": {"tokens_est": 540}, "logic": {"tokens_est": 1780}}
    rows = []
    for i in range(24):
        multi = i % 2 == 1
        text = f"Who was born first, person {i} or person {i + 1}?" if multi else f"What is the capital of land {i}?"
        qq = Question(id=f"q{i}", text=text, answers=["x"], type=None, supporting=[], dataset="toy")
        rows.append(make_row(qq, {"chunk": 0.5 if multi else 1.0, "logic": 1.0}, costs, cfg, index=i))
    path = tmp_path / "l.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    from training.fitting.fit import TrainConfig
    from training.fitting.train import train_generalist

    tc = TrainConfig(hidden=(8, 4), max_epochs=3, batch_size=8)
    probs = []
    for name in ("a.ckpt", "b.ckpt"):
        train_generalist([path], tmp_path / name, tc, embedder=tiny_embedder())
        r = load_router(tmp_path / name, embedder=tiny_embedder())
        probs.append(r.probs_array([row["question"] for row in rows]))
    np.testing.assert_array_equal(probs[0], probs[1])


def test_llm_as_router_baseline_is_scored_and_timed():
    from tests.fakes import ScriptedLLM
    from training.fitting.eval_router import llm_route_baseline

    rows = [
        {
            "question": "Who wrote Emma?",
            "oracle": "chunk",
            "pref": {"chunk": 0.9, "logic": 0.1},
            "scores": {"chunk": 1.0, "logic": 1.0},
            "costs": {"chunk": {"tokens_est": 540}, "logic": {"tokens_est": 1780}},
            "dataset": "toy",
        },
        {
            "question": "Who was born first, A or B?",
            "oracle": "logic",
            "pref": {"chunk": 0.2, "logic": 0.8},
            "scores": {"chunk": 0.5, "logic": 1.0},
            "costs": {"chunk": {"tokens_est": 540}, "logic": {"tokens_est": 1780}},
            "dataset": "toy",
        },
    ]
    llm = ScriptedLLM(
        replies=[{"route": "summary"}],  # the retry after the invalid pick: invalid again
        rules={"born first": {"route": "logic"}, "Emma": {"route": "summary"}},
        delay=0.02,
    )  # summary: not allowed
    m = llm_route_baseline(llm, rows, ROUTES)
    assert m["n"] == 2 and m["failed"] == 1 and m["accuracy"] == 1.0  # the failed pick falls back to chunk
    assert m["seconds_median"] >= 0.02 and m["llm"] == "fake:scripted"  # timed around the LLM call
    # three calls (the failed pick and its retry, then the valid one), every token booked
    assert len(llm.completions) == 3 and m["tokens_per_decision"] == pytest.approx(
        sum(llm.reported_tokens) / 2, abs=0.05
    )
