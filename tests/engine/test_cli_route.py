"""`logicroute ask --dry-run --questions FILE --json` (engine.face.cli_route): one JSON line per item in input
order, route + probabilities + out-of-distribution flag, a per-line error record for a bad line,
the router loaded once and fed in batches. A tiny hashed embedder stands in for MiniLM."""

from __future__ import annotations

import json
import logging

import pytest
import torch
from click.testing import CliRunner

import engine.face.cli_route as cli_route
from router.checkpoint import save_checkpoint
from router.model import RouterConfig, RouterMLP
from router.ood import build_guard
from tests.fakes import HashedBowEmbedder

DIM = 64
TRAINING = [f"What is the capital of land {i}?" for i in range(8)] + [
    f"Who was born first, person {i} or person {i + 1}?" for i in range(8)
]
NEAR, FAR = "What is the capital of land 3?", "Photosynthesis converts sunlight into chemical energy in plants."


def embedder() -> HashedBowEmbedder:
    return HashedBowEmbedder("tiny-bow", DIM)


@pytest.fixture
def checkpoint(tmp_path):
    """An untrained two-route router with an out-of-distribution guard over TRAINING."""
    torch.manual_seed(0)
    model = RouterMLP(RouterConfig(routes=("chunk", "logic"), embed_dim=DIM, features=("length",), hidden=(8, 4)))
    path = tmp_path / "r.ckpt"
    save_checkpoint(path, model, {"embedder": {"id": "tiny-bow", "dim": DIM}}, build_guard(embedder().encode(TRAINING)))
    return path


def run_route(path, checkpoint, emb=None, **kw):
    from engine.face.cli import main

    res = CliRunner().invoke(
        main,
        ["ask", "--dry-run", "--questions", str(path), "--set", f"checkpoint={checkpoint}", "--json"],
        obj={"embedder": emb or embedder()},
        **kw,
    )
    return res


def records(res) -> list[dict]:
    return [json.loads(line) for line in res.stdout.splitlines()]


def test_every_line_gets_a_record_in_order_and_bad_lines_an_error(tmp_path, checkpoint, caplog):
    lines = [
        json.dumps({"question": NEAR, "id": 7}).encode(),
        b"",  # blank: skipped, still counted in line numbers
        b"{not json",
        json.dumps(["a", "list"]).encode(),
        json.dumps({"text": "no question field"}).encode(),
        json.dumps({"question": 42}).encode(),
        json.dumps({"question": "   "}).encode(),
        b'{"question": "caf\xe9?"}',  # Latin-1, not UTF-8
        json.dumps({"question": "word " * 401}).encode(),
        json.dumps({"question": FAR}, ensure_ascii=False).encode(),
    ]
    path = tmp_path / "qs.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    emb = embedder()
    with caplog.at_level(logging.WARNING, logger="logicroute.cli"):
        res = run_route(path, checkpoint, emb)
    assert res.exit_code == 0, res.output
    out = records(res)
    assert [r["line"] for r in out] == [1, 3, 4, 5, 6, 7, 8, 9, 10]
    good, bad = out[0], out[1:-1]
    assert good["question"] == NEAR and good["route"] in ("chunk", "logic") and good["policy"] == "argmax"
    assert abs(sum(good["probs"].values()) - 1) < 1e-5 and good["ood"]["far"] is False
    assert out[-1]["question"] == FAR and out[-1]["ood"]["far"] is True
    assert all("route" not in r and r["error"] for r in bad)
    assert bad[0]["error"].startswith("not JSON") and "JSON object" in bad[1]["error"]
    assert bad[2]["error"] == 'no "question" field' and bad[3]["error"] == 'a non-string (int) "question" field'
    assert bad[4] == {"line": 7, "question": "   ", "error": "the question is empty"}
    assert bad[5]["error"] == "not UTF-8 text" and "401 words" in bad[6]["error"]
    assert emb.calls == [[NEAR, FAR]]  # the router loaded once: one embedding batch for the good lines
    assert "7 of 9 items" in caplog.text


def test_a_text_file_is_routed_in_batches(tmp_path, checkpoint, monkeypatch):
    monkeypatch.setattr(cli_route, "BATCH", 2)
    questions = [NEAR, FAR, "Who was born first, person 2 or person 9?", "", "Which river flows through town 4?"]
    path = tmp_path / "qs.txt"
    path.write_text("\n".join(questions) + "\n", encoding="utf-8")
    emb = embedder()
    res = run_route(path, checkpoint, emb)
    assert res.exit_code == 0, res.output
    out = records(res)
    assert [r["question"] for r in out] == [q for q in questions if q]
    assert [r["line"] for r in out] == [1, 2, 3, 5]
    assert emb.calls == [questions[:2], [questions[2], questions[4]]]  # batches of two routable questions
    assert [r["ood"]["far"] for r in out[:2]] == [False, True]


def test_a_qa_data_file_in_jsonl_is_read_as_a_data_set(tmp_path, checkpoint):
    ircot = {
        "question_id": "q1",
        "question_text": NEAR,
        "answers_objects": [{"spans": ["X"]}],
        "contexts": [{"id": 0, "title": "Land 3", "paragraph_text": "Its capital is X.", "is_supporting": True}],
    }
    path = tmp_path / "hotpotqa_dev.jsonl"
    path.write_text(json.dumps(ircot) + "\n")
    out = records(run_route(path, checkpoint))
    assert [(r["line"], r["question"]) for r in out] == [(1, NEAR)]


def test_a_file_that_cannot_be_read_fails_before_the_router_loads(tmp_path, checkpoint):
    path = tmp_path / "qs.csv"
    path.write_text("question\nWho?\n")
    emb = embedder()
    res = run_route(path, checkpoint, emb)
    assert res.exit_code == 2 and "error:" in res.stderr
    assert emb.calls == []
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    res = run_route(empty, checkpoint)
    assert res.exit_code == 0 and res.stdout == ""
