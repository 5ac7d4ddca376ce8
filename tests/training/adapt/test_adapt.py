"""`logicroute adapt` on a tiny KB with a scripted writer and scripted routes: labels, a
specialist saved in the KB and recorded there, the report; resuming after a kill without
repeating an LLM call; the specialist moving toward its labels; agreement labels for the
user's own questions; and bad input refused before anything is recorded in the KB."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

import training.adapt.adapt as adapt_mod
from engine.core.decide import Decider
from engine.floor.base.errors import KBEmptyError, LogicRouteError
from router.checkpoint import load_router
from router.kb_router import ADAPTED, MANIFEST_ENTRY
from tests.training.adapt_setup import (
    ScriptedWriter,
    embedder,
    question,
    route_llm,
    runner,
    small_generalist,
    tiny_kb,
)
from training.adapt.adapt import AdaptError, adapt
from training.adapt.adapt_labels import AGREEMENT_METRIC, label_all, own_questions, written_questions
from training.labels.label_scorers import LabelConfig
from training.labels.labels import read_labels

# logic answers the volcano questions, chunk the bank questions
RIGHT = {"logic": {"volcano"}, "chunk": {"bank"}}
QUESTIONS = [question(i, "volcano", "bridge") for i in range(24)] + [question(i, "bank") for i in range(24)]
# The recipe's lr (1e-4) moves this 48-question toy too slowly to test in seconds; the mechanism
# under test is labels -> fine-tuning -> decisions, so the toy trains faster.
FAST = {"lr": 3e-3}


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def generalist(tmp_path_factory):
    return small_generalist(tmp_path_factory.mktemp("gen") / "generalist.ckpt")


def run(kb_path, generalist, llm, writer=None, **kw):
    kw.setdefault("embedder", embedder())
    kw.setdefault("train_options", FAST)
    writer = writer or ScriptedWriter(QUESTIONS)
    return adapt(kb_path, llm, generalist=generalist, writer=writer, runner=runner, progress=False, **kw)


@pytest.fixture(scope="module")
def adapted(tmp_path_factory, generalist):
    """One adaptation of a tiny KB: (kb path, result, the LLM's calls)."""
    kb_path = tmp_path_factory.mktemp("adapted") / "kb"
    tiny_kb(kb_path)
    llm = route_llm(RIGHT)
    return kb_path, run(kb_path, generalist, llm, n=48), len(llm.calls)


def manifest(kb_path) -> dict:
    return json.loads((kb_path / "manifest.json").read_text())


def test_adapt_labels_every_question_trains_a_specialist_and_the_kb_records_it(adapted, generalist):
    kb_path, res, calls = adapted
    rows = read_labels(res.labels)
    assert len(rows) == 48 and calls == 48 * 3  # chunk 1 call, logic 2; summary (no layers) not run
    assert all(tuple(r["scores"]) == ("chunk", "summary", "logic") and r["skipped"] == ["summary"] for r in rows)
    oracle = {r["id"]: r["oracle"] for r in rows}
    assert {oracle[q.id] for q in QUESTIONS[:24]} == {"logic"} and {oracle[q.id] for q in QUESTIONS[24:]} == {"chunk"}

    assert res.checkpoint == kb_path / ADAPTED and res.checkpoint.is_file()
    entry = manifest(kb_path)[MANIFEST_ENTRY]
    assert entry["checkpoint"] == "router/adapted.ckpt" and entry["adapted_from"] == str(generalist)


def test_the_report_compares_routers_fixed_routes_and_the_oracle_on_the_held_out_part(adapted):
    kb_path, res, _ = adapted
    rep = json.loads((kb_path / "adapt" / "report.json").read_text())
    assert rep["labels"]["oracle"] == {"logic": 24, "chunk": 24}
    assert rep["labels"]["per_kind"]["bridge"]["right_share"] == {"chunk": 0.0, "logic": 1.0}
    assert rep["labels"]["per_kind"]["bridge"]["llm_calls"] == 24 * 3
    assert rep["labels"]["per_kind"]["bridge"]["only_logic_share"] == 1.0  # chunk alone fails, logic succeeds
    assert rep["labels"]["per_kind"]["single"]["only_logic_share"] == 0.0
    assert len(rep["examples"]["bridge"]) == 20 and rep["examples"]["single"][0]["routes"]["chunk"]["score"] == 1.0
    held = rep["heldout"]["adapt"]["systems"]
    assert set(held) == {"generalist", "specialist", "always chunk", "always logic", "oracle"}
    assert held["oracle"]["score"] == 100.0 and held["always chunk"]["llm_calls"] == 1.0
    assert held["always logic"]["llm_calls"] == 2.0 and held["always chunk"]["score"] == 50.0
    assert rep["split"]["heldout"] + rep["split"]["train"] == 48 and rep["split"]["heldout"] >= 8
    assert rep["phases"]["labelling"]["llm_calls"] == 48 * 3 and rep["phases"]["writing"]["llm_calls"] == 48
    md = res.report_path.read_text()
    assert "## Held-out (adapt" in md and "| specialist |" in md and "router/adapted.ckpt" in md
    assert "## Examples: bridge" in md and "volcano answer 0 (1.00)" in md


def test_the_specialist_moves_decisions_toward_its_labels(adapted, generalist):
    _, res, _ = adapted
    emb = embedder()
    before, after = load_router(generalist, embedder=emb), load_router(res.checkpoint, embedder=emb)

    def share(router, questions, route):
        decided = Decider().decide_many(router, [q.question for q in questions])
        return sum(d.route == route for d in decided) / len(questions)

    assert share(after, QUESTIONS[24:], "chunk") >= share(before, QUESTIONS[24:], "chunk") + 0.3
    assert share(after, QUESTIONS[:24], "logic") >= 0.75


def test_the_guard_knows_the_kb_questions_after_adapting(adapted, generalist):
    _, res, _ = adapted
    after = load_router(res.checkpoint, embedder=embedder())
    trained = json.loads((res.labels.parent / "train.jsonl").read_text().splitlines()[0])["question"]
    assert after.ood([trained])[0]["similarity"] > 0.99
    assert "questions of" in " ".join(after.card["ood"]["sources"])


# ---------------------------------------------------------------- labels: resume, agreement


class Killed(BaseException):
    """A kill arriving during an LLM call (what KeyboardInterrupt does)."""


def test_a_killed_labelling_resumes_without_repeating_a_finished_question(tmp_path):
    kb = tiny_kb(tmp_path / "kb")
    cfg = LabelConfig(scorer="answer", routes=("chunk", "summary", "logic"), llm="fake", style="short")
    questions = written_questions(QUESTIONS[:10])
    llm = route_llm(RIGHT)
    real = llm.chat

    def chat(*a, **kw):
        if len(llm.calls) == 3 * 4 + 1:  # four questions done, the fifth one call in
            raise Killed()
        return real(*a, **kw)

    llm.chat = chat
    out = tmp_path / "labels.jsonl"
    with pytest.raises(Killed):
        label_all(questions, kb, llm, out, cfg, ("chunk", "logic"), runner=runner, progress=False)
    assert len(read_labels(out)) == 4

    again = route_llm(RIGHT)
    run2 = label_all(questions, kb, again, out, cfg, ("chunk", "logic"), runner=runner, progress=False)
    assert len(again.calls) == 6 * 3 and run2.new == 6 and len(run2.rows) == 10
    assert sorted(r["id"] for r in read_labels(out)) == sorted(q.id for q in questions)  # no duplicates


def test_a_time_budget_stops_labelling_and_a_rerun_labels_the_rest(tmp_path):
    kb = tiny_kb(tmp_path / "kb")
    cfg = LabelConfig(scorer="answer", routes=("chunk", "summary", "logic"), llm="fake", style="short")
    questions, out = written_questions(QUESTIONS[:6]), tmp_path / "labels.jsonl"
    spent = label_all(questions, kb, route_llm(RIGHT), out, cfg, ("chunk", "logic"), runner=runner, deadline=0.0)
    assert spent.new == 0 and spent.left == 6
    rest = label_all(questions, kb, route_llm(RIGHT), out, cfg, ("chunk", "logic"), runner=runner, concurrency=3)
    assert rest.new == 6 and rest.left == 0 and rest.llm_calls == 18


def test_own_questions_prefer_the_cheap_route_where_it_agrees_with_logic(tmp_path):
    kb = tiny_kb(tmp_path / "kb")
    cfg = LabelConfig(scorer="answer", routes=("chunk", "summary", "logic"), llm="fake", style="short")
    texts = [QUESTIONS[0].question, QUESTIONS[30].question]  # volcano: chunk says unknown; bank: agree
    llm = route_llm({"logic": {"volcano", "bank"}, "chunk": {"bank"}})
    run = label_all(own_questions(texts), kb, llm, tmp_path / "l.jsonl", cfg, ("chunk", "logic"), runner=runner)
    volcano, bank = run.rows
    assert volcano["scores"] == {"chunk": 0.0, "summary": 0.0, "logic": 1.0} and volcano["oracle"] == "logic"
    assert bank["scores"]["chunk"] == 1.0 and bank["oracle"] == "chunk"
    assert bank["metric"] == AGREEMENT_METRIC and bank["dataset"] == "own" and bank["answers"] == []


# ---------------------------------------------------------------- bad input


def test_an_empty_kb_is_refused_before_any_question_is_written(tmp_path, generalist):
    tiny_kb(tmp_path / "kb", docs_per_topic=0)
    writer = ScriptedWriter(QUESTIONS)
    with pytest.raises(KBEmptyError, match="empty"):
        run(tmp_path / "kb", generalist, route_llm(RIGHT), writer=writer)
    assert writer.calls == 0 and not (tmp_path / "kb" / "router").exists()


def test_no_kept_question_is_a_clear_error_and_the_kb_records_nothing(tmp_path, generalist):
    tiny_kb(tmp_path / "kb")
    writer = ScriptedWriter([], rejected={"answerable without its chunks": 3, "malformed": 2})
    with pytest.raises(AdaptError, match="no written question was kept.*malformed 2.*nothing was recorded"):
        run(tmp_path / "kb", generalist, route_llm(RIGHT), writer=writer)
    assert MANIFEST_ENTRY not in manifest(tmp_path / "kb") and not (tmp_path / "kb" / "router").exists()


def test_a_malformed_questions_file_names_its_line_before_any_work(tmp_path, generalist):
    tiny_kb(tmp_path / "kb")
    bad = tmp_path / "mine.jsonl"
    bad.write_text('{"question": "Which volcano erupted?"}\n{"question": 7}\n')
    writer = ScriptedWriter(QUESTIONS)
    with pytest.raises(LogicRouteError, match="line 2"):
        run(tmp_path / "kb", generalist, route_llm(RIGHT), writer=writer, questions_file=bad)
    assert writer.calls == 0


# ---------------------------------------------------------------- the command


def judge_file(path) -> str:
    """Answer-label rows of four real questions: chunk right on the bank ones, logic on all."""
    from hierarchy.datasets import Question
    from training.labels.labels import make_row

    cfg = LabelConfig(scorer="answer", routes=("chunk", "summary", "logic"), llm="fake", style="short")
    costs = {"chunk": {"tokens": 500, "llm_calls": 1}, "summary": {"tokens": 600, "llm_calls": 1}}
    costs["logic"] = {"tokens": 2000, "llm_calls": 4}
    rows = []
    for i, topic in enumerate(["volcano", "bank"] * 2):
        q = Question(f"r{i}", f"Which {topic} was first?", ["x"], None, [], "real")
        scores = {"chunk": float(topic == "bank"), "summary": 0.0, "logic": 1.0}
        rows.append(make_row(q, scores, costs, cfg, index=i))
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_the_adapt_command_adapts_the_kb_judges_real_questions_and_reseeds_training_for_free(
    tmp_path, generalist, monkeypatch
):
    import engine.floor.llm.factory as factory
    import training.adapt.adapt_questions as writer_mod
    from engine.face.cli import main

    tiny_kb(tmp_path / "kb")
    llms = []
    monkeypatch.setattr(writer_mod, "write_questions", ScriptedWriter(QUESTIONS[:8] + QUESTIONS[24:32]))
    monkeypatch.setattr(adapt_mod, "answer_route", runner)
    monkeypatch.setattr(factory, "make_llm", lambda spec, **kw: llms.append(route_llm(RIGHT)) or llms[-1])
    real = judge_file(tmp_path / "real.jsonl")
    args = ["adapt", "--kb", str(tmp_path / "kb"), "--n", "16", "--from", str(generalist), "--judge", real]
    res = CliRunner().invoke(main, args, obj={"embedder": embedder()}, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "16 questions written and kept" in res.output and "held-out adapt" in res.output
    assert f"router saved in the KB: {tmp_path / 'kb' / ADAPTED}" in res.output
    report = tmp_path / "kb" / "adapt" / "report.json"
    judged = json.loads(report.read_text())["judged"][real]["systems"]
    assert judged["oracle"]["score"] == 100.0 and judged["always chunk"]["score"] == 50.0
    assert judged["always logic"]["tokens"] == 2000.0 and "judged on" in res.output
    assert len(llms[0].calls) == 16 * 3

    again = CliRunner().invoke(main, [*args, "--train-seed", "1"], obj={"embedder": embedder()})
    assert again.exit_code == 0, again.output
    assert len(llms[1].calls) == 0 and json.loads(report.read_text())["train_seed"] == 1  # the labels were kept


def test_kinds_are_read_as_weights_and_a_bad_weight_names_the_option():
    from training.adapt.cmd_adapt import _kinds

    assert _kinds("single=1, bridge=2.5,overview") == {"single": 1.0, "bridge": 2.5, "overview": 1.0}
    assert _kinds(None) is None
    with pytest.raises(click.BadParameter, match="KIND=WEIGHT"):
        _kinds("bridge=lots")


class ChunkFirst:
    """A router that sends every question to chunk (the cheap first answer escalation judges)."""

    routes = ("chunk", "logic")

    def probs_array(self, questions):
        import numpy as np

        return np.tile([0.9, 0.1], (len(questions), 1))


def confidence_rows() -> list[dict]:
    """Ten label rows: the chunk answer is wrong exactly when the model was unsure of it (confidence
    0.1-0.4), logic is always right at ten times chunk's tokens."""
    rows = []
    for i in range(10):
        conf = round(0.1 * (i + 1), 1)
        rows.append(
            {
                "question": f"q{i}",
                "scores": {"chunk": 0.0 if conf < 0.5 else 1.0, "logic": 1.0},
                "costs": {"chunk": {"tokens": 200, "llm_calls": 1}, "logic": {"tokens": 2000, "llm_calls": 4}},
                "confidence": {"chunk": conf},
            }
        )
    return rows


def test_adapt_calibrates_the_confidence_under_which_the_kbs_cheap_answers_go_to_logic():
    # escalating the four unsure answers makes every row right at 1,000 tokens a question: half of always-logic's
    assert adapt_mod.escalation_threshold(ChunkFirst(), confidence_rows()) == 0.5


def test_the_threshold_escalates_only_what_the_token_budget_pays_for_on_the_training_questions():
    # each escalated answer adds 200 tokens a question (logic's 2,000 over ten rows); chunk alone spends 10%
    assert adapt_mod.escalation_threshold(ChunkFirst(), confidence_rows(), budget=0.3) == 0.3  # two of the four
    assert adapt_mod.escalation_threshold(ChunkFirst(), confidence_rows(), budget=None) == 0.5  # no cap: all four
    assert adapt_mod.escalation_threshold(ChunkFirst(), confidence_rows(), budget=0.05) is None


def test_no_threshold_is_calibrated_when_escalating_never_pays_or_the_llm_reports_no_confidence():
    sure = [{**r, "scores": {"chunk": 1.0, "logic": 1.0}} for r in confidence_rows()]
    assert adapt_mod.escalation_threshold(ChunkFirst(), sure) is None
    silent = [{k: v for k, v in r.items() if k != "confidence"} for r in confidence_rows()]
    assert adapt_mod.escalation_threshold(ChunkFirst(), silent) is None


def test_the_kb_records_the_adapted_routers_threshold_and_the_report_judges_it_as_ask_runs_it(adapted):
    kb_path, res, _ = adapted
    entry = manifest(kb_path)[MANIFEST_ENTRY]
    assert "escalate_below" in entry and entry["escalate_below"] == res.report["escalate_below"]
    router = load_router(res.checkpoint, embedder=embedder())
    assert router.escalate_below == entry["escalate_below"]  # None here: the scripted routes report no confidence
    # the budget the threshold was fitted within, beside it: adapt's default when none is given
    budget = adapt_mod.ESCALATION_BUDGET
    assert router.card["adapted"]["escalation_budget"] == entry["escalation_budget"] == budget
    assert router.calibrated_style == "short"  # the style adapt's routes answered in


def test_an_escalation_worth_less_than_its_tokens_by_the_labels_trade_off_is_not_calibrated():
    # logic barely beats the unsure chunk answers (0.05 against 0): less than its tokens cost at the labels' lam
    rows = [
        {**r, "scores": {**r["scores"], "logic": 0.05}} if r["confidence"]["chunk"] < 0.5 else r
        for r in confidence_rows()
    ]
    assert adapt_mod.escalation_threshold(ChunkFirst(), rows) is None
    assert (
        adapt_mod.escalation_threshold(ChunkFirst(), [{**r, "lam": 0.0} for r in rows]) == 0.5
    )  # free tokens: worth it


def test_the_card_records_the_escalation_budget_adapt_was_given_and_a_bad_one_is_refused_first(tmp_path, generalist):
    kb_path = tmp_path / "kb"
    tiny_kb(kb_path)
    writer = ScriptedWriter(QUESTIONS[:5] + QUESTIONS[24:29])
    with pytest.raises(AdaptError, match="escalation budget"):
        run(kb_path, generalist, route_llm(RIGHT), n=10, writer=writer, escalation_budget=1.5)
    assert writer.calls == 0
    res = run(kb_path, generalist, route_llm(RIGHT), n=10, writer=writer, escalation_budget=None)
    card = load_router(res.checkpoint, embedder=embedder()).card
    assert "escalation_budget" in card["adapted"] and card["adapted"]["escalation_budget"] is None
    assert manifest(kb_path)[MANIFEST_ENTRY]["escalation_budget"] is None and res.report["escalation_budget"] is None
    assert "without a token cap" in res.report_path.read_text()


def test_the_escalation_budget_option_reads_a_share_or_none_and_names_itself_on_anything_else():
    from training.adapt.cmd_adapt import BUDGET_HELP, parse_budget

    assert parse_budget(None, None, None) == {}  # not given: adapt's default
    assert parse_budget(None, None, "0.45") == {"escalation_budget": 0.45}
    assert parse_budget(None, None, "None") == {"escalation_budget": None}
    for bad in ("0", "1.2", "half"):
        with pytest.raises(click.BadParameter, match="share of always-logic"):
            parse_budget(None, None, bad)
    assert f"default: {adapt_mod.ESCALATION_BUDGET}," in BUDGET_HELP  # the help names adapt's own default


def test_reader_style_adaptation_scores_an_answer_by_whether_it_contains_the_written_answer(tmp_path, generalist):
    kb_path = tmp_path / "kb"
    tiny_kb(kb_path)
    llm = route_llm(RIGHT)
    res = run(kb_path, generalist, llm, n=10, style="reader", writer=ScriptedWriter(QUESTIONS[:5] + QUESTIONS[24:29]))
    rows = read_labels(res.labels)
    assert {r["style"] for r in rows} == {"reader"} and {r["metric"] for r in rows} == {"string_acc"}
    assert load_router(res.checkpoint, embedder=embedder()).calibrated_style == "reader"


def test_an_unknown_style_is_refused_before_any_question_is_written(tmp_path, generalist):
    tiny_kb(tmp_path / "kb")
    writer = ScriptedWriter(QUESTIONS)
    with pytest.raises(LogicRouteError, match="answer style"):
        run(tmp_path / "kb", generalist, route_llm(RIGHT), n=4, style="poem", writer=writer)
    assert writer.calls == 0
