"""bench global-lists-answer: every system answers the chosen half's list questions, question by
question; each answer is scored by the recall and precision of the set it lists; the report pairs
each system's recall with chunk's and logic's (95% bootstrap); a rerun answers only what is
missing; and the real systems run the routes they name (the summary route's descent and its
global mode side by side) on a scripted LLM."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from engine.floor.base.errors import LLMError, LogicRouteError
from engine.floor.base.types import Answer, Usage
from tests.fakes import ScriptedLLM
from training.global_qa import list_answer
from training.global_qa.list_answer_report import paired, tally

VOCAB = {
    "corpus": "t",
    "folder": "/t",
    "kinds": {
        "command": [
            {"name": n, "aliases": [n, f"tool {n}"]} for n in ("build", "clean", "fetch", "publish", "serve", "test")
        ]
    },
}


def gold(*names):
    return [{"name": n, "aliases": [n, f"tool {n}"], "sources": [f"{n}.md"]} for n in names]


QUESTIONS = [
    {"id": "q1", "question": "Which commands take --force?", "kind": "command", "family": "f",
     "gold": gold("build", "clean", "publish"), "half": "tune"},
    {"id": "q2", "question": "Which commands take --jobs?", "kind": "command", "family": "f",
     "gold": gold("build", "test"), "half": "tune"},
    {"id": "q3", "question": "Which commands take --port?", "kind": "command", "family": "f",
     "gold": gold("serve", "fetch"), "half": "judge"},
]  # fmt: skip


def write_set(tmp_path, name="t"):
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    (tmp_path / f"{name}.vocab.json").write_text(json.dumps(VOCAB))
    return path


def answered(text: str, calls: int = 1, tokens: int = 100) -> Answer:
    return Answer(text=text, route="x", usage=Usage(llm_calls=calls, prompt_tokens=tokens, seconds=0.5))


# What each scripted system answers, by question id: global finds the sets, chunk a part of them.
TEXTS = {
    "chunk": {"q1": "tool build [1].", "q2": "build [2]", "q3": "serve [1]"},
    "logic": {"q1": "build and clean [1].", "q2": "Not in the indexed documents.", "q3": "serve"},
    "summary": {"q1": "clean", "q2": "test", "q3": "fetch"},
    "global": {"q1": "- build [1]\n- clean [2]\n- publish [3]\n- serve [4]", "q2": "- build [1]\n- test [2]",
               "q3": "- serve [1]\n- fetch [2]"},
}  # fmt: skip


def scripted(asked: list):
    by_question = {q["question"]: q["id"] for q in QUESTIONS}

    def answer_for(lists):
        def answer(system, question):
            asked.append((lists.name, system, by_question[question]))
            return answered(TEXTS[system][by_question[question]], calls=3 if system == "global" else 1)

        return answer

    return answer_for


def invoke(tmp_path, answer_for, systems="chunk,logic,summary,global", extra=()):
    from training.global_qa.cmd_bench_global_lists_answer import bench_global_lists_answer as cmd

    kb = tmp_path / "kb"
    kb.mkdir(exist_ok=True)
    args = ["--set-file", str(write_set(tmp_path)), "--kb", str(kb), "--systems", systems]
    args += ["--out", str(tmp_path / "out"), *extra]
    obj = {"llm": ScriptedLLM([]), "answer_for": answer_for}
    return CliRunner().invoke(cmd, args, obj=obj, catch_exceptions=False)


def test_every_system_answers_the_tune_half_question_by_question_and_is_scored_by_set_recall(tmp_path):
    asked: list = []
    res = invoke(tmp_path, scripted(asked))
    assert res.exit_code == 0, res.output
    # question-major: a run cut short still pairs every system on the questions it reached
    assert [(s, q) for _, s, q in asked[:4]] == [("chunk", "q1"), ("logic", "q1"), ("summary", "q1"), ("global", "q1")]
    assert {q for _, _, q in asked} == {"q1", "q2"}  # the judge half's q3 is never asked
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    per = report["sets"]["t"]
    assert per["global"]["recall"] == 100.0 and per["global"]["precision"] == pytest.approx(87.5)  # serve is wrong
    assert per["chunk"]["recall"] == pytest.approx(100 * (1 / 3 + 1 / 2) / 2, abs=0.1)
    assert per["logic"]["precision"] == pytest.approx(50.0)  # q2 lists nothing: precision 0
    assert per["global"]["llm_calls_per_q"] == 3.0 and per["chunk"]["tokens_per_q"] == 100.0
    vs = per["global"]["vs"]
    assert vs["chunk"]["recall_diff"] == pytest.approx(100 - per["chunk"]["recall"], abs=0.1)
    assert vs["chunk"]["wins"] == 2 and vs["chunk"]["losses"] == 0 and len(vs["chunk"]["ci95"]) == 2
    assert set(per["chunk"]["vs"]) == {"logic"}  # a system is not paired with itself
    md = (tmp_path / "out" / "report.md").read_text()
    assert "Half: **tune**" in md and "logicroute bench global-lists-answer --set-file" in md
    assert "| global | 2 | 100.0 | 87.5 |" in md


def test_a_rerun_answers_only_what_is_missing(tmp_path):
    asked: list = []
    invoke(tmp_path, scripted(asked), systems="chunk")
    n = len(asked)
    invoke(tmp_path, scripted(asked), systems="chunk,global", extra=["--half", "all"])
    assert sorted(asked[n:]) == [
        ("t", "chunk", "q3"),
        ("t", "global", "q1"),
        ("t", "global", "q2"),
        ("t", "global", "q3"),
    ]


def test_report_only_answers_nothing_and_says_what_is_missing(tmp_path):
    asked: list = []
    invoke(tmp_path, scripted(asked), systems="chunk")
    n = len(asked)
    res = invoke(tmp_path, scripted(asked), systems="chunk,global", extra=["--report-only"])
    assert res.exit_code == 0 and len(asked) == n
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["sets"]["t"]["chunk"]["questions"] == 2 and "global" not in report["sets"]["t"]
    assert any("2 (system, question) pair(s) not answered yet" in note for note in report["run"]["notes"])


def test_a_failed_answer_is_a_row_that_scores_nothing_and_is_tried_again_next_run(tmp_path):
    def failing(lists):
        def answer(system, question):
            raise LLMError("endpoint gone")

        return answer

    res = invoke(tmp_path, failing, systems="chunk")
    assert res.exit_code == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["sets"]["t"]["chunk"]["errors"] == 2 and report["sets"]["t"]["chunk"]["recall"] == 0.0
    asked: list = []
    invoke(tmp_path, scripted(asked), systems="chunk")
    assert len(asked) == 2


def test_paired_recall_difference_and_its_interval():
    rows = [{"set": "s", "id": str(i), "recall": 1.0, "tokens": 200} for i in range(10)]
    ref = [{"set": "s", "id": str(i), "recall": 0.5 if i < 5 else 1.0, "tokens": 100} for i in range(10)]
    p = paired(rows, ref)
    assert p["recall_diff"] == 25.0 and (p["wins"], p["losses"]) == (5, 0) and p["tokens_ratio"] == 2.0
    assert p["ci95"][0] > 0 and p["ci95"][1] <= 50.0
    assert paired(rows, [{"set": "other", "id": "0", "recall": 0}]) is None
    assert tally([{**r, "precision": 0.5} for r in rows])["recall"] == 100.0


def test_questions_are_taken_family_by_family_and_set_by_set_in_turn():
    a = list_answer.ListSet("a", None, None, [{"id": i, "family": f} for i, f in (("1", "x"), ("2", "x"), ("3", "y"))])
    b = list_answer.ListSet("b", None, None, [{"id": "4", "family": "x"}])
    order = [(s.name, q["id"]) for s, q in list_answer.interleaved([a, b])]
    assert order == [("a", "1"), ("a", "3"), ("b", "4"), ("a", "2")]


def test_unknown_systems_are_refused():
    with pytest.raises(LogicRouteError, match="unknown system"):
        list_answer.check_systems(["chunk", "everything"])


def test_the_real_systems_run_the_routes_they_name(tmp_path):
    """summary is the descent (one answer call), global the map over many passages."""
    from hierarchy.indexing import index_sources
    from tests.fakes import HashedBowEmbedder

    docs = tmp_path / "docs"
    docs.mkdir()
    for n in ("build", "clean", "serve"):
        (docs / f"tool-{n}.md").write_text(f"# tool-{n}\n\n### Configuration\n\n#### `force`\n\nThe force of {n}.\n")
    kb = index_sources(tmp_path / "kb", [docs], embedder=HashedBowEmbedder(dim=64), show_progress=False).kb
    llm = ScriptedLLM(rules={"Items:": {"items": [{"name": "tool-build", "passage": 1}]}, "Answer:": "tool-build [1]"})
    answer = list_answer.answerer(kb, llm, 3)
    descent = answer("summary", "Which tool commands take --force?")
    assert descent.route == "summary" and descent.usage.llm_calls == 1 and "global" not in descent.trace.details
    mapped = answer("global", "Which tool commands take --force?")
    assert mapped.route == "summary" and "tool-build" in mapped.text and mapped.trace["global"]["llm_calls"] >= 1
    assert answer("chunk", "Which tool commands take --force?").route == "chunk"


@pytest.mark.embedder
def test_the_default_path_answers_as_ask_does_and_the_list_gate_sends_a_list_to_the_global_mode(
    tmp_path, real_embedder
):
    """On a KB of pages of several passages the shipped router's list gate fires and the summary
    route's global mode answers; the stored rows of the default path depend on the router."""
    from hierarchy.indexing import index_sources

    docs = tmp_path / "docs"
    docs.mkdir()
    for n in ("build", "clean", "serve"):
        sections = [f"## Part {i}\n\n" + f"The {n} command does step {i} of its work. " * 40 for i in range(4)]
        body = f"# tool-{n}\n\n### Configuration\n\n#### `force`\n\nThe force of {n}.\n\n" + "\n\n".join(sections)
        (docs / f"tool-{n}.md").write_text(body)
    kb = index_sources(tmp_path / "kb", [docs], embedder=real_embedder, show_progress=False).kb
    assert kb.manifest["counts"]["chunks"] >= 2 * kb.manifest["counts"]["documents"]
    llm = ScriptedLLM(rules={"Items:": {"items": [{"name": "tool-build", "passage": 1}]}, "Answer:": "tool-build [1]"})
    routed = list_answer.answerer(kb, llm, 3)("default", "Which tool commands take the --force option?")
    assert routed.route == "summary" and routed.trace.decision["form"] == "list" and "global" in routed.trace.details
    q, setup = {"question": "Which tool commands take --force?"}, {"llm": "x", "k": 3}
    for system, depends in (("default", True), ("global", False), ("chunk", False)):
        before, after = (list_answer.signature(system, q, {**setup, "router": r}) for r in ("a", "b"))
        assert (before != after) == depends
