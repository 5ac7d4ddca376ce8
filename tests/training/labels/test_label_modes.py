"""The label run's modes beyond one pass: the cascade that skips costlier routes once a cheap
one is perfect, --complete that measures what it skipped, --rerun that answers one route again
under other settings."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.floor.base.errors import LogicRouteError
from engine.floor.base.types import Answer, Usage
from hierarchy.datasets import Question
from training.labels.label_scorers import LabelConfig, score_answer
from training.labels.labels import label_questions, make_row, read_labels


def q(i, text, answers):
    return Question(id=f"q{i}", text=text, answers=list(answers), type=None, supporting=[], dataset="toy")


QUESTIONS = [
    q(0, "Where was the director of Inception born?", ["London"]),
    q(1, "What is the capital of France?", ["Paris"]),
]


def test_cascade_skips_costlier_routes_once_a_route_is_perfect_and_keeps_the_oracle():
    ran = []

    def runner(route, question, kb, llm, k, style="short"):
        ran.append(route)
        text = {"chunk": "Paris", "summary": "Paris", "logic": "Lyon"}[route] if question == QUESTIONS[1].text else "x"
        return Answer(text=text, route=route, usage=Usage(llm_calls=1, prompt_tokens=900), trace={})

    full = LabelConfig(scorer="answer", routes=("chunk", "summary", "logic"), llm="fake:scripted")
    cascade = LabelConfig(scorer="answer", routes=("chunk", "summary", "logic"), llm="fake:scripted", stop_score=1.0)

    scores, costs, extra = score_answer(QUESTIONS[1], None, object(), cascade, runner)
    assert ran == ["chunk"] and extra["skipped"] == ["summary", "logic"]
    assert scores == {"chunk": 1.0, "summary": 1.0, "logic": 1.0}  # the upper bound a skipped route could reach
    assert costs["logic"]["skipped"] and "tokens" not in costs["logic"]
    # a skipped route never costs less than the route that stopped the cascade (summary's nominal is 640)
    assert costs["summary"]["tokens_est"] == 900
    cascade_row = make_row(QUESTIONS[1], scores, costs, cascade)
    full_row = make_row(QUESTIONS[1], *score_answer(QUESTIONS[1], None, object(), full, runner)[:2], full)
    assert cascade_row["oracle"] == full_row["oracle"] == "chunk"

    ran.clear()  # an imperfect cheap answer runs every route
    score_answer(QUESTIONS[0], None, object(), cascade, runner)
    assert ran == ["chunk", "summary", "logic"]


def test_completing_a_cascade_row_measures_the_skipped_routes_in_place(tmp_path):
    """The cascade credits a skipped route with the cheap route's perfect score; --complete runs
    it and rewrites the row where it was, the measured cheap route untouched."""
    ran = []

    def runner(route, question, kb, llm, k, style="short"):
        ran.append((route, question))
        text = {"chunk": "Paris", "summary": "Paris", "logic": "Lyon"}[route]
        return Answer(text=text, route=route, usage=Usage(llm_calls=2, prompt_tokens=3000), trace={})

    out = tmp_path / "labels.jsonl"
    cascade = LabelConfig(scorer="answer", routes=("chunk", "summary", "logic"), llm="fake:scripted", stop_score=1.0)
    label_questions(QUESTIONS[:2], None, out, cascade, llm=object(), runner=runner, progress=False)
    before = read_labels(out)
    assert before[1]["skipped"] == ["summary", "logic"] and before[1]["scores"]["logic"] == 1.0
    ran.clear()
    full = replace(cascade, stop_score=None)
    res = label_questions(QUESTIONS[:2], None, out, full, llm=object(), runner=runner, progress=False, complete=True)
    assert res["written"] == 1 and res["skipped"] == 1  # q0's chunk was not perfect: it ran every route
    assert ran == [("summary", QUESTIONS[1].text), ("logic", QUESTIONS[1].text)]
    after = read_labels(out)
    assert [r["id"] for r in after] == ["q0", "q1"] and after[0] == before[0]
    row = after[1]
    assert row["scores"] == {"chunk": 1.0, "summary": 1.0, "logic": 0.0}  # measured: logic said Lyon
    assert row["costs"]["chunk"] == before[1]["costs"]["chunk"] and row["costs"]["logic"]["tokens"] == 3000
    assert "skipped" not in row and "stop_score" not in row and row["completed"] == ["summary", "logic"]
    assert row["answers_pred"] == {"chunk": "Paris", "summary": "Paris", "logic": "Lyon"}
    assert row["oracle"] == "chunk"
    ran.clear()  # a second pass finds nothing left to complete
    again = label_questions(QUESTIONS[:2], None, out, full, llm=object(), runner=runner, progress=False, complete=True)
    assert again["written"] == 0
    assert ran == []


def test_rerunning_the_logic_route_with_the_lean_preset_copies_the_other_routes(tmp_path, monkeypatch):
    """`label --rerun logic --from FILE --logic-preset lean`: FILE's rows with logic answered again
    under the lean settings, chunk and summary copied; the row says which preset it holds."""
    ran = []

    def answer_on(route, question, ctx):
        ran.append((route.name, route.config))
        lean = route.config is not None and route.config.short_prompts
        text = {"chunk": "Paris", "summary": "Lyon", "logic": "Paris" if lean else "Nice"}[route.name]
        return Answer(text=text, route=route.name, usage=Usage(llm_calls=1, prompt_tokens=100 + 50 * lean), trace={})

    monkeypatch.setattr("training.labels.label_scorers.answer_on", answer_on)
    paper_file, lean_file = tmp_path / "paper.jsonl", tmp_path / "lean.jsonl"
    paper = LabelConfig(
        scorer="answer", routes=("chunk", "summary", "logic"), llm="fake:scripted", logic_preset="paper"
    )
    label_questions(QUESTIONS[:2], None, paper_file, paper, llm=object(), progress=False)
    source = read_labels(paper_file)
    assert source[1]["scores"] == {"chunk": 1.0, "summary": 0.0, "logic": 0.0} and "logic_preset" not in source[1]
    ran.clear()
    lean = replace(paper, logic_preset="lean")
    res = label_questions(
        QUESTIONS[:2], None, lean_file, lean, llm=object(), progress=False, rerun=(source[1:], ["logic"])
    )
    assert res["written"] == 1 and [r for r, _ in ran] == ["logic"]  # q0 is not among the rows given
    assert ran[0][1].short_prompts and ran[0][1].memory_words == 150
    row = read_labels(lean_file)[0]
    assert row["id"] == "q1" and row["scores"] == {"chunk": 1.0, "summary": 0.0, "logic": 1.0}
    assert row["costs"]["chunk"] == source[1]["costs"]["chunk"] and row["costs"]["logic"]["tokens"] == 150
    assert row["logic_preset"] == "lean" and row["rerun"] == ["logic"]
    ran.clear()  # resumed: a row already there is not answered again
    assert (
        label_questions(QUESTIONS[:2], None, lean_file, lean, llm=object(), progress=False, rerun=(source, ["logic"]))[
            "written"
        ]
        == 1
    )
    assert len(ran) == 1 and len(read_labels(lean_file)) == 2


def test_a_rerun_refuses_rows_labelled_in_another_answer_style(tmp_path, monkeypatch):
    monkeypatch.setattr(
        "training.labels.label_scorers.answer_on",
        lambda route, *a, **kw: Answer(text="Paris", route=route.name, usage=Usage(llm_calls=1), trace={}),
    )
    reader = LabelConfig(scorer="answer", routes=("chunk", "logic"), llm="fake:scripted", style="reader")
    assert reader.logic_preset == "lean-grounded"  # auto: the reader style's preset
    label_questions(QUESTIONS[1:2], None, tmp_path / "r.jsonl", reader, llm=object(), progress=False)
    short = replace(reader, style="short", logic_preset="lean")
    with pytest.raises(LogicRouteError, match="other settings \\(style, prompts\\)"):
        label_questions(
            QUESTIONS[1:2], None, tmp_path / "s.jsonl", short, llm=object(), progress=False,
            rerun=(read_labels(tmp_path / "r.jsonl"), ["logic"]),
        )  # fmt: skip
    assert not (tmp_path / "s.jsonl").exists() or read_labels(tmp_path / "s.jsonl") == []


# ---------------------------------------------------------------- the label file


def test_the_label_preset_follows_the_answer_style_as_ask_picks_it_and_a_file_keeps_one(tmp_path, monkeypatch):
    """auto labels short answers with the lean-grounded logic route, reader answers with grounded, as
    RoutedRAG answers them; a label file of one preset refuses rows of another."""
    presets = []

    def answer_on(route, question, ctx):
        presets.append(route.config is not None and route.config.short_prompts)
        return Answer(text="Paris", route=route.name, usage=Usage(llm_calls=1), trace={})

    monkeypatch.setattr("training.labels.label_scorers.answer_on", answer_on)
    short = LabelConfig(scorer="answer", routes=("chunk", "logic"), llm="fake:scripted")
    assert short.logic_preset == "lean-grounded"
    out = tmp_path / "short.jsonl"
    label_questions(QUESTIONS[1:], None, out, short, llm=object(), progress=False)
    assert presets == [False, True] and read_labels(out)[0]["logic_preset"] == "lean-grounded"
    with pytest.raises(LogicRouteError, match="holds labels of the lean-grounded logic preset"):
        label_questions(QUESTIONS, None, out, replace(short, logic_preset="paper"), llm=object(), progress=False)
    with pytest.raises(LogicRouteError, match="unknown logic preset"):
        LabelConfig(scorer="answer", logic_preset="fast")
