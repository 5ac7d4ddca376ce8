"""The benchmark commands and their options, the summary benchmark's report, and the baseline
routers on their own: logreg (on the real MiniLM, marked `embedder`) and LLM-as-router."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from engine.face.cli import main
from engine.floor.base.errors import LogicRouteError
from tests.fakes import ScriptedLLM
from training.bench.bench_data import BenchConfig


def test_cli_command_is_exported_and_documented():
    from training.bench.cmd_benchmark import (
        BENCH_COMMANDS,
        COMMANDS,
        bench_index,
        bench_logic,
        bench_reader,
        bench_summary,
        benchmark,
    )

    assert [benchmark] == COMMANDS and [bench_logic, bench_summary, bench_index, bench_reader] == BENCH_COMMANDS
    res = CliRunner().invoke(benchmark, ["--help"])
    assert res.exit_code == 0 and "--kb-per-dataset" in res.output and "--labels" in res.output
    res = CliRunner().invoke(bench_index, ["--help"])
    assert res.exit_code == 0 and "--no-sandwich" in res.output
    from training.bench.bench_logic import SYSTEMS

    systems_help = next(p.help for p in bench_logic.params if p.name == "systems")
    assert [s for s in SYSTEMS if s not in systems_help.replace(",", " ").split()] == []  # the help names every system


def test_component_benchmarks_are_cli_commands_with_clean_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["bench", "logic", "--help"])
    assert res.exit_code == 0 and "--kb-n" in res.output and "ablations" in res.output
    res = CliRunner().invoke(main, ["bench", "logic", "--systems", "chunk,nonsense", "--n", "1"])
    assert res.exit_code == 2 and "unknown system 'nonsense'" in res.output
    res = CliRunner().invoke(main, ["bench", "summary", "--parts", "nope"])
    assert res.exit_code == 2 and "unknown parts" in res.output
    res = CliRunner().invoke(main, ["bench", "summary", "--parts", "build", "--modes", "tepid"])
    assert res.exit_code == 2 and "unknown build modes" in res.output
    assert not (tmp_path / "runs").exists()  # refused before anything is written


def test_metric_acc_is_read_as_string_acc(tmp_path):
    assert BenchConfig(data=[], out=str(tmp_path), metric="acc").metric == "string_acc"
    with pytest.raises(LogicRouteError, match="unknown route"):
        BenchConfig(data=[], out=str(tmp_path), routes=("chunk", "graph"))


def test_the_benchmark_answers_logic_with_the_preset_asked_for(tmp_path, monkeypatch):
    """--logic-preset reaches the RoutedRAG that answers; auto (RoutedRAG's default) when not given."""
    seen = []
    monkeypatch.setattr("training.bench.benchmark.run_benchmark", lambda cfg, echo=None: seen.append(cfg) or {})
    for extra in ([], ["--logic-preset", "paper"]):
        CliRunner().invoke(main, ["benchmark", "nq", "--n", "1", "--out", str(tmp_path), *extra])
    assert [c.logic_preset for c in seen] == ["auto", "paper"]
    with pytest.raises(LogicRouteError, match="logic_preset must be one of auto, paper, lean"):
        BenchConfig(data=[], out=str(tmp_path), logic_preset="fast")
    res = CliRunner().invoke(
        main, ["benchmark", "nq", "--logic-preset", "fast", "--out", str(tmp_path)], usage_error_expected=True
    )
    assert res.exit_code == 2 and "fast" in res.output


def test_bench_summary_report_keeps_parts_of_earlier_runs(tmp_path):
    from training.bench.bench_summary import main
    from training.bench.bench_summary_build import PUBLISHED

    step = {"total_tokens": 0, "seconds": 120.0, "cpu_seconds": 90.0}
    (tmp_path / "build.json").write_text(
        json.dumps(
            {
                "corpus": "tiny",
                "published": PUBLISHED,
                "cold": {"full_rebuild": step, "incremental_add": {"documents": 2, "layer_update": step}},
            }
        )
    )
    pooled = {"n": 1, "em": 1.0, "f1": 1.0, "prompt_tokens": 500, "completion_tokens": 4.0, "seconds": 3.0}
    (tmp_path / "qa.json").write_text(json.dumps({"corpora": {"small": {"systems": {"chunk": {"all": pooled}}}}}))
    main(tmp_path, parts=["build"])  # build.json exists: reused, nothing is rebuilt
    md = (tmp_path / "report.md").read_text()
    assert "incremental add of 2 docs (cold)" in md and "| small | chunk | all | 1 |" in md


@pytest.mark.embedder
def test_logreg_baseline_router_is_fitted_on_the_routers_own_labels(tmp_path):
    from types import SimpleNamespace

    from hierarchy.datasets import Question
    from tests.real_embedder import shared_test_embedder
    from training.fitting.eval_router import logreg_router_probs
    from training.labels.label_scorers import LabelConfig
    from training.labels.labels import make_row

    cfg = LabelConfig(scorer="retrieval", routes=("chunk", "logic"), k=3)
    cost = {"tokens_est": 500.0}
    rows = []
    for i, film in enumerate(["Jaws", "Alien", "Heat", "Up", "Cars", "Rocky", "Fargo", "Big"]):
        for text, scores in (
            (f"Who directed {film}?", {"chunk": 1.0, "logic": 1.0}),
            (f"Where was the director of {film} born and when did he die?", {"chunk": 0.0, "logic": 1.0}),
        ):
            q = Question(f"{i}-{len(rows)}", text, ["x"], None, [], "toy")
            rows.append(make_row(q, scores, {"chunk": cost, "logic": {"tokens_est": 1800.0}}, cfg, index=len(rows)))
    labels = tmp_path / "train.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows))
    router = SimpleNamespace(
        card={"training": {"label_files": [{"path": str(labels)}]}},
        routes=("chunk", "logic"),
        embedder=shared_test_embedder(),
        features=(),
        model=SimpleNamespace(config=SimpleNamespace(text_form="question")),
    )
    p = logreg_router_probs(
        router, ["Who directed Psycho?", "Where was the director of Psycho born and when did he die?"]
    )
    assert p[0]["chunk"] > 0.5 > p[1]["chunk"]
    router.card = {}  # no label files: no baseline
    assert logreg_router_probs(router, ["Who directed Psycho?"]) is None


def test_llm_router_books_every_attempt_and_falls_back_to_the_cheapest_route():
    from training.fitting.llm_router import llm_route

    llm = ScriptedLLM(replies=[{"route": "nope"}, {"route": "nope"}])  # invalid twice: the retry fails too
    d = llm_route(llm, "Who founded Alpha Corp?", ("chunk", "logic"))
    assert d.route == "chunk" and d.error and d.usage.llm_calls == 2
    assert (d.usage.prompt_tokens, d.usage.completion_tokens) == llm.reported_tokens  # both attempts
    ok = llm_route(ScriptedLLM(replies=[{"route": "logic"}]), "Who founded Alpha Corp?", ("chunk", "logic"))
    assert ok.route == "logic" and ok.error is None and ok.usage.llm_calls == 1


def _report(metric_value: float, tokens: float) -> dict:
    row = {"n": 2, "f1": metric_value, "prompt_tokens": tokens, "completion_tokens": 0.0}
    systems = {"chunk": row, "logic": dict(row, f1=metric_value + 0.1)}
    return {
        "config": {"metric": "f1"},
        "routes": ["chunk", "logic"],
        "systems_order": ["chunk", "logic"],
        "systems": {"nq": systems, "pooled": systems},
        "answered_this_run": 0,
        "seconds": 1.0,
    }


def test_repeated_retrieval_runs_the_benchmark_once_per_mode_and_compares_them(tmp_path, monkeypatch):
    seen = []

    def fake_run(cfg, echo=None):
        seen.append((cfg.retrieval, cfg.out))
        return _report(0.4 if cfg.retrieval == "dense" else 0.5, 1000.0 if cfg.retrieval == "dense" else 1100.0)

    monkeypatch.setattr("training.bench.benchmark.run_benchmark", fake_run)
    monkeypatch.setattr("training.bench.bench_report.pooled_lines", lambda report: [])
    args = ["benchmark", "nq", "--n", "2", "--out", str(tmp_path), "--retrieval", "dense", "--retrieval", "hybrid"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert seen == [("dense", str(tmp_path / "dense")), ("hybrid", str(tmp_path / "hybrid"))]
    table = (tmp_path / "retrieval.md").read_text()
    assert "| chunk | 40.0 | 50.0 | +10.0 | 1,000 | 1,100 | 1.10 |" in table
    assert "| logic | 50.0 | 60.0 | +10.0 |" in table


def test_one_retrieval_mode_keeps_the_output_folder(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(
        "training.bench.benchmark.run_benchmark",
        lambda cfg, echo=None: seen.append((cfg.retrieval, cfg.out)) or _report(0.4, 9),
    )
    monkeypatch.setattr("training.bench.bench_report.pooled_lines", lambda report: [])
    CliRunner().invoke(main, ["benchmark", "nq", "--out", str(tmp_path), "--retrieval", "dense"])
    CliRunner().invoke(main, ["benchmark", "nq", "--out", str(tmp_path)])
    assert seen == [("dense", str(tmp_path)), (None, str(tmp_path))]
    assert not (tmp_path / "retrieval.md").exists()


def test_a_run_searches_every_kb_the_way_it_was_asked(tmp_path):
    from types import SimpleNamespace

    from training.bench.bench_data import open_kbs

    def hybrid_kb(path, passages, show_progress):
        kb = SimpleNamespace(retrieval="hybrid")
        kb.use_retrieval = lambda mode: setattr(kb, "retrieval", mode)
        return kb

    passages = {"nq": {"p1": "Paris is the capital of France."}}
    kbs, fp = open_kbs(passages, hybrid_kb, tmp_path, False, lambda _: None, retrieval="dense")
    assert kbs["nq"].retrieval == "dense" and not fp["nq"].endswith("+hybrid")
    with pytest.raises(LogicRouteError, match="unknown retrieval 'sparse'"):
        BenchConfig(data=[], out="unused", retrieval="sparse")
