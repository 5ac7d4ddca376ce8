"""`logicroute bench global` (training/global_qa/bench_global*.py): on a tiny GraphRAG-Bench-format corpus
with the fake embedder and a scripted LLM, every system answers the same questions of each type,
results resume per (system, question), the LLM-written layers' cost sits beside the extractive
one, and every system is compared with chunk question by question (paired bootstrap)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from engine.floor.base.errors import LLMError, LogicRouteError
from tests.engine.logic_scripts import SUFFICIENT, plan
from tests.fakes import HashedBowEmbedder, ScriptedLLM
from tests.samples import make_docs
from training.common.answer_scores import coverage, rouge_l
from training.global_qa.bench_global import GlobalConfig, estimate, main, select_typed
from training.global_qa.bench_global_report import paired, report_markdown, verdict
from training.global_qa.bench_global_systems import DEFAULT_SYSTEMS, SYSTEMS

TYPES = ("Fact Retrieval", "Complex Reasoning", "Contextual Summarize")
ONE_CALL = [s for s in SYSTEMS if SYSTEMS[s].route != "logic"]


def write_set(folder) -> str:
    """A GraphRAG-Bench pair of files: one ~4,600-word corpus (8 topics, ~31 passages of 150
    words) and 3 questions of each of the three types plus one Creative Generation question."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = make_docs(12)
    (folder / "tiny_corpus.json").write_text(
        json.dumps([{"corpus_name": "Tiny", "context": " ".join(d.text for d in docs)}])
    )
    topics = ["volcano", "river", "opera", "film"]
    qs = []
    for t, kind in enumerate((*TYPES, "Creative Generation")):
        for i in range(3 if kind != "Creative Generation" else 1):
            topic = topics[(t + i) % 4]
            qs.append(
                {
                    "id": f"Tiny-{t}{i}",
                    "source": "Tiny",
                    "question": f"What is said about the {topic} ({kind} {i})?",
                    "answer": f"The {topic} of {topic.capitalize()} {i} had many things in 1950.",
                    "question_type": kind,
                }
            )
    path = folder / "tiny_questions.json"
    path.write_text(json.dumps(qs))
    return str(path)


class BenchLLM(ScriptedLLM):
    """ScriptedLLM with the replies a whole benchmark needs: a summary for every summary prompt,
    an answer quoting the start of the first passage shown (so systems shown different passages
    score differently), and any logic-route schema answered with a valid object."""

    name = "fake:bench"

    def __init__(self, fail_on: str | None = None):
        super().__init__(
            rules={
                "Summarize the passages": "A summary of related passages about the topic.",
                "\nAnswer:": self._answer,
                "": "x",  # anything else (a sub-question rewrite) gets a placeholder
            }
        )
        self.fail_on = fail_on  # an answer prompt holding this text fails the call
        self.judge_fails = False
        self._schema = None

    def _answer(self, messages):
        last = messages[-1]["content"]
        if self.fail_on and self.fail_on in last:
            raise LLMError("the scripted endpoint failed")
        m = re.search(r"\[1\] [^:\n]*: ([^\n]*)", last)
        return " ".join((m.group(1) if m else "Not in the indexed documents.").split()[:14]) + " [1]."

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0):
        self._schema = schema
        return super().chat(messages, schema=schema, max_tokens=max_tokens, temperature=temperature)

    def _next(self, messages):
        props = (self._schema or {}).get("properties", {})
        if "subquestions" in props:
            return json.dumps(plan(("q1", "Which topic is it?", []), ("q2", "What about #q1?", ["q1"])))
        if "answers" in props:
            reply = {"answers": {i: "the volcano" for i in props["answers"]["required"]}}
            return json.dumps(reply | ({"memory": "notes"} if "memory" in props else {}))
        if "sufficient" in props:
            return json.dumps(SUFFICIENT)
        if "correct" in props:  # the judge: it agrees with ROUGE-L, or fails when told to
            if self.judge_fails:
                raise LLMError("the scripted judge failed")
            ref, ans = re.search(r"Reference answer: (.*)\nAnswer: (.*)", messages[-1]["content"]).groups()
            return json.dumps({"correct": rouge_l(ans, ref) > 0.4})
        return super()._next(messages)

    def prompts(self, needle: str) -> int:
        return sum(needle in c["messages"][-1]["content"] for c in self.calls)


def config(tmp_path, **kw) -> GlobalConfig:
    data = write_set(tmp_path / "data")
    return GlobalConfig(**{"data": data, "out": str(tmp_path / "out"), "n": 2, "offset": 1, "bootstrap": 500, **kw})


def rows(cfg) -> list[dict]:
    """Every line of the run's results.jsonl, in file order."""
    return [json.loads(x) for x in (Path(cfg.out) / "results.jsonl").read_text().splitlines()]


@pytest.fixture
def emb():
    return HashedBowEmbedder(dim=128)


# ---------------------------------------------------------------- the run


def test_every_system_answers_the_same_questions_of_each_type_and_a_rerun_answers_nothing(tmp_path, emb):
    cfg = config(tmp_path, systems=tuple(SYSTEMS))
    report = main(cfg, llm=BenchLLM(), embedder=emb, show_progress=False)
    got = rows(cfg)
    asked = {(r["type"], r["qid"]) for r in got}
    # questions [1, 3) of each asked type; Creative Generation was not asked
    assert asked == {(t, f"Tiny-{i}{j}") for i, t in enumerate(TYPES) for j in (1, 2)}
    for s in SYSTEMS:
        assert {r["qid"] for r in got if r["system"] == s} == {q for _, q in asked}
    assert len(got) == len(SYSTEMS) * 6 and report["answered_this_run"] == len(got)
    assert report["questions_per_type"] == dict.fromkeys(TYPES, 2)

    rerun_llm = BenchLLM(fail_on="")  # any answer call would fail
    again = main(cfg, llm=rerun_llm, embedder=emb, show_progress=False)
    assert again["answered_this_run"] == 0 and rerun_llm.calls == []
    assert again["per_type"] == report["per_type"] and again["vs_chunk"] == report["vs_chunk"]


def test_each_answer_is_scored_on_the_sentence_answer_and_carries_its_costs(tmp_path, emb):
    cfg = config(tmp_path, systems=tuple(SYSTEMS))
    main(cfg, llm=BenchLLM(), embedder=emb, show_progress=False)
    for r in rows(cfg):
        assert r["rouge_l"] == rouge_l(r["pred"], r["golds"]) and r["coverage"] == coverage(r["pred"], r["golds"])
        assert r["prompt_tokens"] > 0 and r["completion_tokens"] > 0 and r["seconds"] >= 0 and not r["error"]
        route = SYSTEMS[r["system"]].route
        assert r["llm_calls"] == 1 if route != "logic" else r["llm_calls"] >= 3
        if route != "logic":  # every one-call system is shown passages within the same word budget
            assert 0 < r["context_words"] <= 450
        if r["system"].startswith("summary-only"):
            assert r["chunk_ids"] == [] and r["summary_ids"]
        if r["system"] in ("chunk", "chunk-wide"):
            assert r["summary_ids"] == []
        if r["system"] == "chunk-wide":  # more than the chunk route's k=3 chunks
            assert len(r["chunk_ids"]) > 3


def test_the_llm_written_layers_are_built_once_and_their_cost_is_reported_beside_the_extractive_one(tmp_path, emb):
    cfg = config(tmp_path, systems=("chunk", "summary", "summary-llm"))
    llm = BenchLLM()
    report = main(cfg, llm=llm, embedder=emb, show_progress=False)
    costs = report["layer_costs"]
    summaries = llm.prompts("Summarize the passages")
    assert costs["llm"]["llm_calls"] == summaries == sum(costs["llm"]["nodes_per_level"]) > 0
    assert costs["llm"]["completion_tokens"] > 0
    assert costs["extractive"]["llm_calls"] == 0 and costs["extractive"]["total_tokens"] == 0
    assert set(report["index_cost"]) == {"extractive", "llm"}  # both KBs hold the same chunks
    # a rerun builds nothing and reports the same costs, read from the layers
    llm2 = BenchLLM()
    again = main(cfg, llm=llm2, embedder=emb, show_progress=False)
    assert llm2.prompts("Summarize the passages") == 0 and again["layer_costs"] == costs
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Summary layers: build cost" in md and "| llm |" in md and "| extractive |" in md


def test_only_the_layers_the_systems_read_are_built(tmp_path, emb):
    llm = BenchLLM()
    report = main(config(tmp_path, systems=("chunk", "summary")), llm=llm, embedder=emb, show_progress=False)
    assert set(report["layer_costs"]) == {"extractive"} and llm.prompts("Summarize the passages") == 0


def test_a_changed_setting_is_answered_again_and_failed_answers_only_on_request(tmp_path, emb):
    cfg = config(tmp_path, systems=("chunk", "chunk-wide"))
    main(cfg, llm=BenchLLM(), embedder=emb, show_progress=False)
    wider = config(tmp_path, systems=("chunk", "chunk-wide"), wide_chunks=6)
    report = main(wider, llm=BenchLLM(), embedder=emb, show_progress=False)
    assert report["answered_this_run"] == 6  # only chunk-wide, whose setting changed
    assert {r["system"] for r in rows(cfg)[12:]} == {"chunk-wide"}

    failing = config(tmp_path / "f", systems=("chunk",))
    report = main(failing, llm=BenchLLM(fail_on="volcano"), embedder=emb, show_progress=False)
    failed = [r for r in rows(failing) if r["error"]]
    assert failed and all(r["rouge_l"] == 0 and "LLMError" in r["error"] for r in failed)
    assert report["per_type"]["Fact Retrieval"]["chunk"]["n"] == 2  # a failure is a row, never dropped
    assert main(failing, llm=BenchLLM(), embedder=emb, show_progress=False)["answered_this_run"] == 0
    retry = config(tmp_path / "f", systems=("chunk",), retry_errors=True)
    report = main(retry, llm=BenchLLM(), embedder=emb, show_progress=False)
    assert report["answered_this_run"] == len(failed) and report["overall"]["chunk"]["errors"] == 0


def test_the_report_tables_systems_by_types_and_each_system_against_chunk(tmp_path, emb):
    cfg = config(tmp_path, systems=("chunk", "summary", "summary-only", "collapsed"))
    report = main(cfg, llm=BenchLLM(), embedder=emb, show_progress=False)
    for t in TYPES:
        for s in cfg.systems:
            cell = report["per_type"][t][s]
            assert cell["n"] == 2 and {"rouge_l", "coverage", "tokens", "seconds", "seconds_uncached"} <= set(cell)
    vs = report["vs_chunk"]["Contextual Summarize"]
    assert set(vs) == {"summary", "summary-only", "collapsed"}
    assert all(
        v[m]["n"] == 2 and v[m]["wins"] + v[m]["losses"] + v[m]["ties"] == 2 for v in vs.values() for m in vs["summary"]
    )
    assert report["verdict"].startswith("on Contextual Summarize, ")
    md = (tmp_path / "out" / "report.md").read_text()
    assert md == report_markdown(report)
    for heading in ("## ROUGE-L by system and question type", "## Coverage by system", "## Against the chunk route"):
        assert heading in md
    assert "| system | Fact Retrieval | Complex Reasoning | Contextual Summarize | all |" in md
    assert json.loads((tmp_path / "out" / "report.json").read_text())["verdict"] == report["verdict"]


# ---------------------------------------------------------------- the pieces


def test_paired_bootstrap_counts_wins_losses_ties_and_brackets_the_mean():
    p = paired([1.0, 1.0, 0.5, 0.2], [0.0, 1.0, 0.5, 0.4], resamples=2000, seed=1)
    assert (p["n"], p["wins"], p["losses"], p["ties"]) == (4, 1, 1, 2)
    assert p["mean_diff"] == pytest.approx(20.0)
    assert -20.0 <= p["ci95"][0] <= p["mean_diff"] <= p["ci95"][1] <= 100.0
    assert p == paired([1.0, 1.0, 0.5, 0.2], [0.0, 1.0, 0.5, 0.4], resamples=2000, seed=1)  # seeded
    same = paired([0.3, 0.3], [0.1, 0.1], resamples=100)
    assert same["ci95"] == [20.0, 20.0] and same["p_not_better"] == 0.0
    assert paired([], [])["n"] == 0


def test_the_verdict_needs_the_interval_above_zero():
    def vs(lo, hi, mean):
        p = {"n": 40, "mean_diff": mean, "ci95": [lo, hi], "wins": 25, "losses": 10, "ties": 5}
        return {"Contextual Summarize": {"summary": {"rouge_l": p}, "logic": {"rouge_l": {**p, "mean_diff": 99}}}}

    assert verdict(vs(1.2, 6.0, 3.5)).endswith("the summary route beats chunk")
    assert "summary - chunk = +3.5" in verdict(vs(1.2, 6.0, 3.5))  # logic is not a summary system
    assert verdict(vs(-0.5, 6.0, 2.5)).endswith("no summary-route system beats chunk by more than the spread")
    assert verdict({}) == "no Contextual Summarize questions were asked"


def test_questions_are_taken_per_type_and_a_missing_type_is_named(tmp_path):
    from hierarchy.datasets import load_dataset

    ds = load_dataset(write_set(tmp_path))
    qs = select_typed(ds, ["Contextual Summarize", "Fact Retrieval"], n=1, offset=2)
    assert [q.id for q in qs] == ["Tiny-22", "Tiny-02"]
    with pytest.raises(LogicRouteError, match="no question of type 'Opinion'.*Creative Generation"):
        select_typed(ds, ["Opinion"], n=1, offset=0)
    with pytest.raises(LogicRouteError, match="at offset 3"):
        select_typed(ds, ["Fact Retrieval"], n=1, offset=3)


def test_the_config_refuses_unknown_systems_and_a_narrow_widening(tmp_path):
    with pytest.raises(ValueError, match="unknown system.*summary-deep"):
        GlobalConfig(systems=("chunk", "summary-deep"))
    with pytest.raises(ValueError, match="wide_chunks > k"):
        GlobalConfig(k=3, wide_chunks=3)
    assert GlobalConfig().systems == DEFAULT_SYSTEMS and "logic" in DEFAULT_SYSTEMS
    assert all(GlobalConfig.__dataclass_fields__[f].metadata["help"] for f in GlobalConfig.__dataclass_fields__)


def test_the_estimate_counts_answers_left_and_one_call_per_llm_summary_node():
    cfg = GlobalConfig(systems=("chunk", "summary-llm", "logic"), n=40)
    qs = [object()] * 120
    est = estimate(cfg, None, qs, chunks=1165, built=set())
    # 1,165 chunks: 116 level-1 clusters, 12 above them, 1 top node
    assert est["layer_llm_calls"] == 116 + 12 + 1
    assert est["answer_llm_calls"] == 120 + 120 + 120 * 5
    assert estimate(cfg, None, qs, chunks=1165, built={"llm"})["layer_llm_calls"] == 0


# ---------------------------------------------------------------- the command


def test_the_command_plans_then_runs_and_resumes(tmp_path, emb):
    from engine.face.cli import main as cli

    data = write_set(tmp_path / "data")
    out = tmp_path / "out"
    args = [
        "bench",
        "global",
        data,
        "--n",
        "1",
        "--systems",
        "chunk,summary-only",
        "--out",
        str(out),
        "--llm",
        "fake:bench",
    ]
    dry = CliRunner().invoke(cli, [*args, "--dry-run"], obj={"embedder": emb}, catch_exceptions=False)
    assert json.loads(dry.stdout)["answer_llm_calls"] == 3 * 1 * 2 and not out.joinpath("results.jsonl").exists()
    res = CliRunner().invoke(cli, ["-q", *args], obj={"embedder": emb, "llm": BenchLLM()}, catch_exceptions=False)
    assert res.exit_code == 0 and "report: " in res.stdout and (out / "report.md").is_file()
    assert "on Contextual Summarize, summary-only - chunk" in res.stdout
    dry = CliRunner().invoke(cli, [*args, "--dry-run"], obj={"embedder": emb}, catch_exceptions=False)
    assert json.loads(dry.stdout)["answer_llm_calls"] == 0
    bad = CliRunner().invoke(cli, [*args, "--systems", "chunk,nope"], obj={"embedder": emb})
    assert bad.exit_code != 0 and "unknown system" in bad.output


def test_context_only_measures_what_each_system_shows_without_an_llm(tmp_path, emb):
    from engine.face.cli import main as cli
    from hierarchy.kb import KnowledgeBase

    data = write_set(tmp_path / "data")
    out = tmp_path / "out"
    args = ["bench", "global", data, "--n", "2", "--out", str(out), "--context-only"]
    args += ["--systems", "chunk,summary,summary-l1,collapsed,summary-llm,logic"]
    res = CliRunner().invoke(cli, args, obj={"embedder": emb}, catch_exceptions=False)  # no LLM is given
    assert res.exit_code == 0 and "Contextual Summarize: the context of" in res.stdout
    report = json.loads((out / "context_report.json").read_text())
    assert report["systems"] == ["chunk", "summary", "summary-l1", "collapsed"]  # no LLM layers, no logic
    assert report["left_out"] == ["summary-llm", "logic"] and not (out / "results.jsonl").exists()
    kb = KnowledgeBase.open(out / "kb_extractive", emb)
    cs = [q for q in json.loads(Path(data).read_text()) if q["question_type"] == "Contextual Summarize"][:2]
    for per in report["per_type"].values():
        assert per["chunk"]["n"] == 2 and "vs_chunk" not in per["chunk"]
        assert all(per[s]["vs_chunk"]["n"] == 2 and 0 <= per[s]["coverage"] <= 100 for s in per if s != "chunk")
    # the chunk route's context is its top k chunks; coverage = share of the gold answer's words in them
    shown = [" ".join(f"{c.title} {c.text}" for c in kb.search(q["question"], k=3)) for q in cs]
    want = sum(coverage(s, q["answer"]) for s, q in zip(shown, cs)) / 2
    assert report["per_type"]["Contextual Summarize"]["chunk"]["coverage"] == round(100 * want, 1)
    assert "| summary-l1 | 2 |" in (out / "context_report.md").read_text()
    # the ceilings: the best passage anywhere holds at least what the chunk route's top k show
    local = report["locality"]["Contextual Summarize"]
    assert local["n"] == 2 and set(local) == {
        "n",
        "best_passage",
        "best_3_adjacent_passages",
        "best_extractive_summary_node",
    }
    assert local["best_3_adjacent_passages"] >= local["best_passage"]
    assert "How local are the answers?" in (out / "context_report.md").read_text()


def test_the_judge_grades_a_sample_books_its_own_cost_resumes_and_reports_its_agreement(tmp_path, emb):
    cfg = config(tmp_path, systems=("chunk", "summary", "summary-only"), judge=1)
    plain = main(config(tmp_path / "plain", systems=cfg.systems), llm=BenchLLM(), embedder=emb, show_progress=False)
    llm = BenchLLM()
    report = main(cfg, llm=llm, embedder=emb, show_progress=False)
    verdicts = [json.loads(x) for x in (Path(cfg.out) / "judge.jsonl").read_text().splitlines()]
    # the first question of each type, every system; each verdict one call, booked apart from the answers
    assert sorted((v["type"], v["qid"], v["system"]) for v in verdicts) == sorted(
        (t, f"Tiny-{i}1", s) for i, t in enumerate(TYPES) for s in cfg.systems
    )
    j = report["judge"]
    assert j["judged"] == len(verdicts) == j["cost"]["llm_calls"] == llm.prompts("Reference answer:")
    assert j["cost"]["prompt_tokens"] > 0
    for s, got in report["overall"].items():  # the answers' own costs are those of a run without a judge
        assert [got[c] for c in ("llm_calls", "prompt_tokens", "completion_tokens", "rouge_l")] == [
            plain["overall"][s][c] for c in ("llm_calls", "prompt_tokens", "completion_tokens", "rouge_l")
        ]
    assert j["rouge_l_auc"] == 1.0  # this judge agrees with ROUGE-L: it ranks them perfectly
    for t in TYPES:
        assert set(j["per_type"][t]) == set(cfg.systems) and all(v["n"] == 1 for v in j["per_type"][t].values())
    assert "LLM judge (fake:bench)" in (Path(cfg.out) / "report.md").read_text()
    again = BenchLLM(fail_on="")
    again.judge_fails = True  # nothing is asked again: every answer and verdict is stored
    assert main(cfg, llm=again, embedder=emb, show_progress=False)["judge"] == j and again.calls == []


def test_a_failed_verdict_is_recorded_not_counted(tmp_path, emb):
    cfg = config(tmp_path, systems=("chunk",), judge=2, types=("Fact Retrieval",))
    llm = BenchLLM()
    llm.judge_fails = True
    j = main(cfg, llm=llm, embedder=emb, show_progress=False)["judge"]
    assert j["judged"] == 0 and j["failed"] == 2 and j["per_type"]["Fact Retrieval"] == {} and j["rouge_l_auc"] is None
    errors = [json.loads(x)["error"] for x in (Path(cfg.out) / "judge.jsonl").read_text().splitlines()]
    assert len(errors) == 2 and all("the scripted judge failed" in e for e in errors)
    with pytest.raises(ValueError, match="judge must be 0"):
        config(tmp_path, judge=-1)
