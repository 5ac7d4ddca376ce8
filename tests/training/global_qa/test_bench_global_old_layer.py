"""bench global's context check puts the default extractive layer beside the layer before issue 57
(every sentence embedded): each system's `-embedded` twin is built over the same chunks in its own
KB, and the report pairs the two question by question."""

from __future__ import annotations

import json

from click.testing import CliRunner

from tests.fakes import HashedBowEmbedder
from tests.training.global_qa.test_bench_global import write_set
from training.global_qa.bench_global_context import old_layer_markdown, versus_old_layer
from training.global_qa.bench_global_systems import LAYER_BUILDS, SYSTEMS


def test_every_summary_variant_has_a_twin_on_the_old_layer_and_on_the_text_vector_ablation():
    for name in ("summary", "summary-l1", "summary-only", "summary-wide", "collapsed"):
        assert SYSTEMS[f"{name}-embedded"].layers == "extractive-embedded"
        assert SYSTEMS[f"{name}-text"].layers == "extractive-text"
        assert SYSTEMS[f"{name}-embedded"].summary == SYSTEMS[name].summary
    assert LAYER_BUILDS["extractive-embedded"] == ("extractive", {"scoring": "embedded", "node_vectors": "summary"})


def test_versus_old_layer_pairs_each_system_with_its_twin_on_the_same_questions():
    rows = [
        {"system": s, "qid": q, "type": "T", "coverage": c}
        for s, q, c in [
            ("summary", "a", 1.0),
            ("summary", "b", 0.5),
            ("summary-embedded", "a", 0.5),
            ("summary-embedded", "b", 0.5),
            ("collapsed", "a", 1.0),  # no twin ran: not compared
        ]
    ]
    out = versus_old_layer(rows, ["summary", "summary-embedded", "collapsed"], ["T"], resamples=100, seed=0)
    assert list(out["T"]) == ["summary"]
    v = out["T"]["summary"]
    assert v["n"] == 2 and v["mean_diff"] == 25.0 and (v["wins"], v["losses"], v["ties"]) == (1, 0, 1)
    per_type = {"T": {"summary": {"coverage": 75.0}, "summary-embedded": {"coverage": 50.0}}}
    md = "\n".join(old_layer_markdown(out, per_type))
    assert "| T | summary | 75.0 | 50.0 | +25.0 (" in md


def test_context_only_builds_the_old_layer_in_its_own_kb_and_reports_the_pairs(tmp_path):
    from engine.face.cli import main as cli

    emb = HashedBowEmbedder(dim=128)
    data = write_set(tmp_path / "data")
    out = tmp_path / "out"
    args = ["bench", "global", data, "--n", "2", "--out", str(out), "--context-only"]
    res = CliRunner().invoke(cli, [*args, "--systems", "chunk,summary,summary-embedded"], obj={"embedder": emb})
    assert res.exit_code == 0, res.output
    report = json.loads((out / "context_report.json").read_text())
    assert report["systems"] == ["chunk", "summary", "summary-embedded"]
    meta = json.loads((out / "kb_extractive-embedded" / "layers" / "meta.json").read_text())
    assert meta["sentence_scoring"] == "embedded" and meta["node_vectors"] == "summary"
    assert json.loads((out / "kb_extractive" / "layers" / "meta.json").read_text())["sentence_scoring"] == "lexical"
    assert all(v["summary"]["n"] == 2 for v in report["versus_old_layer"].values())
    assert "against the old one" in (out / "context_report.md").read_text()
