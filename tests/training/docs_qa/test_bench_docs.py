"""bench docs: question sets with negatives, read strictly and split in seeded halves; answers
scored as right, abstained or wrong (positives) and abstained or answered (negatives); a run that
keeps every answer and answers only what is missing on a rerun."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from engine.floor.base.errors import DataFormatError, LogicRouteError
from engine.floor.base.types import Answer, Usage
from engine.floor.prompts.answer import NOT_IN_DOCUMENTS
from tests.fakes import ScriptedLLM, make_rag
from training.docs_qa import bench_docs
from training.docs_qa.bench_docs_score import (
    abstention_reason,
    missing_phrases,
    paired_against,
    phrase_in,
    score,
    tally,
)
from training.docs_qa.bench_docs_sets import DocsQuestion, parse_question, read_set, select, split_halves

SETS = Path(__file__).resolve().parents[3] / "training" / "data" / "docs_questions"


def positive(must, qid="p1") -> DocsQuestion:
    return DocsQuestion(id=qid, question="q?", kind="positive", half="tune", must=tuple(must))


NEGATIVE = DocsQuestion(id="n1", question="q?", kind="negative", half="tune", negative_kind="near_miss")


# ------------------------------------------------------------------ abstentions

ABSTAINS = [
    NOT_IN_DOCUMENTS,
    "Not in the indexed documents. The passages describe npm audit's options but not its history.",
    "The documents do not state the default memory limit of Massif.",
    "The provided passages do not mention Kubernetes pods [1].",
    "The passages don't say how often npm checks for updates.",
    "The passages provided do not contain information about tarball size limits.",
    "There is no information about organization plans in the passages.",
    "None of the passages say which company acquired npm.",
    "The maximum tarball size is not specified in the documents [1].",
    "The default colour scheme of KCachegrind is not mentioned.",
    "It cannot be determined from the given passages how long the build takes.",
    "I don't know.",
    "Unknown",
]

ANSWERS = [
    "Valgrind cannot attach to a program that is already running [1].",
    "If the port is not specified, Valgrind sends its log to port 1500 [2].",
    "Memcheck does not report this error by default; use --track-origins=yes [1].",
    "The --stacks option is not enabled by default: pass --stacks=yes [1].",
    "Use --no-save [1]. The documents do not say whether it also skips the lockfile.",
    "npm keeps 10 log files by default (logs-max) [1].",
]


@pytest.mark.parametrize("text", ABSTAINS)
def test_an_answer_that_says_the_documents_lack_it_is_an_abstention(text):
    assert abstention_reason(text) is not None


@pytest.mark.parametrize("text", ANSWERS)
def test_an_answer_with_a_negation_or_a_later_regret_is_not_an_abstention(text):
    assert abstention_reason(text) is None


# ------------------------------------------------------------------ phrases


def test_numbers_and_short_phrases_match_only_as_whole_words():
    assert phrase_in("12", "shows 12 callers") and not phrase_in("12", "shows 120 callers")
    assert not phrase_in("10", "stops after 10,000,000 errors")
    assert phrase_in("-g", "compile with -g.") and not phrase_in("-g", "use --gen-suppressions=yes")
    assert phrase_in("^", "a caret (^) prefix") and phrase_in("ISC", "the isc license")


def test_an_option_matches_only_as_a_whole_option_name():
    assert phrase_in("--trace-children", "use --trace-children=yes [1]")
    assert not phrase_in("--trace-children", "use the --trace-children-skip-by-arg option")


def test_longer_phrases_match_anywhere_so_a_stem_matches_its_forms():
    assert phrase_in("remov", "node_modules is removed first")
    assert phrase_in("--track-origins", "run with --track-origins=yes")


def test_every_phrase_is_needed_and_one_spelling_of_a_group_is_enough():
    must = (("--save-dev", "-D"), "devDependencies")
    assert missing_phrases(must, "npm install -D saves it to devDependencies") == []
    assert missing_phrases(must, "npm install --save-dev lodash") == ["devDependencies"]


def test_a_citation_number_is_not_an_answer():
    assert missing_phrases(("2",), "npm retries twice [2].") == ["2"]


# ------------------------------------------------------------------ verdicts


def test_a_positive_is_right_abstained_or_wrong():
    q = positive(["--no-save"])
    assert score(q, "Pass --no-save [1].")["outcome"] == "right"
    assert score(q, NOT_IN_DOCUMENTS)["outcome"] == "abstained"
    wrong = score(q, "Pass --force [1].")
    assert wrong["outcome"] == "wrong" and wrong["missing"] == ["--no-save"] and not wrong["right"]


def test_an_abstention_that_quotes_a_must_phrase_is_still_an_abstention():
    assert score(positive(["no"]), "The documents do not say; no passage covers it.")["outcome"] == "abstained"


def test_a_negative_is_right_only_when_it_abstains():
    assert score(NEGATIVE, NOT_IN_DOCUMENTS) | {"abstain_reason": None} == {
        "abstained": True,
        "abstain_reason": None,
        "outcome": "abstained",
        "right": True,
    }
    answered = score(NEGATIVE, "The limit is 512 MB [1].")
    assert answered["outcome"] == "answered" and not answered["right"]


def _row(system, qid, group, outcome, calls=1, tokens=100):
    right = outcome == "right" or (group != "positive" and outcome == "abstained")
    return {"set": "s", "system": system, "id": qid, "group": group, "outcome": outcome, "right": right,
            "llm_calls": calls, "tokens": tokens, "seconds": 1.0}  # fmt: skip


def test_the_tally_splits_negatives_by_kind_and_averages_the_cost():
    rows = [
        _row("x", "p1", "positive", "right"),
        _row("x", "p2", "positive", "wrong", calls=3),
        _row("x", "n1", "off_topic", "abstained"),
        _row("x", "n2", "near_miss", "answered", calls=2),
    ]
    t = tally(rows)
    assert (t["positives_right"], t["positives_wrong"], t["positives_abstained"]) == (1, 1, 0)
    assert (t["off_topic_abstained"], t["near_miss_abstained"], t["negatives_answered"]) == (1, 0, 1)
    assert t["right_pct"] == 50.0 and t["llm_calls_per_q"] == 1.75
    assert t["positives_flagged_far"] == 0


def test_the_tally_counts_the_positives_the_out_of_distribution_guard_took_from_the_router():
    far = {"flags": ["out of distribution: similarity 0.22 to the router's training questions, below 0.31"]}
    rows = [{**_row("x", "p1", "positive", "right"), **far}, _row("x", "p2", "positive", "right")]
    assert tally(rows)["positives_flagged_far"] == 1


def test_the_paired_difference_counts_questions_won_and_lost():
    before = [_row("b", "p1", "positive", "right"), _row("b", "n1", "near_miss", "answered", calls=4)]
    after = [_row("a", "p1", "positive", "right"), _row("a", "n1", "near_miss", "abstained")]
    p = paired_against(after, before)
    assert p["right_diff"] == 50.0 and (p["wins"], p["losses"]) == (1, 0) and p["calls_diff"] == -1.5


# ------------------------------------------------------------------ set files


def _write(tmp_path, rows) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


GOOD = [
    {"id": "a", "question": "Which flag?", "kind": "positive", "must": [["-D", "--save-dev"], "x"], "half": "tune"},
    {"id": "b", "question": "Which year?", "kind": "negative", "negative_kind": "near_miss", "half": "judge"},
]


def test_a_set_file_reads_into_questions_with_groups_and_spelling_groups(tmp_path):
    qs = read_set(_write(tmp_path, GOOD))
    assert [q.group for q in qs] == ["positive", "near_miss"]
    assert qs[0].must == (("-D", "--save-dev"), "x")
    assert [q.id for q in select(qs, "judge")] == ["b"] and len(select(qs, "all")) == 2


@pytest.mark.parametrize(
    "bad, says",
    [
        ({**GOOD[0], "must": []}, "needs `must`"),
        ({**GOOD[1], "must": ["x"]}, "has no `must`"),
        ({**GOOD[1], "negative_kind": "silly"}, "negative_kind"),
        ({**GOOD[0], "kind": "maybe"}, "kind"),
        ({**GOOD[0], "half": "dev"}, "half"),
    ],
)
def test_a_malformed_question_is_an_error_naming_its_line(tmp_path, bad, says):
    with pytest.raises(DataFormatError, match=rf"s\.jsonl:2: .*{says}"):
        read_set(_write(tmp_path, [GOOD[1], bad]))


def test_a_repeated_id_or_a_torn_line_is_an_error(tmp_path):
    with pytest.raises(DataFormatError, match="occurs twice"):
        read_set(_write(tmp_path, [GOOD[0], GOOD[0]]))
    path = _write(tmp_path, GOOD)
    path.write_text(path.read_text() + '{"id": "c", "quest\n')
    with pytest.raises(DataFormatError, match=r"s\.jsonl:3: malformed JSON"):
        read_set(path)


def test_the_halves_are_seeded_and_balanced_within_each_group():
    rows = [{"id": f"p{i}", "kind": "positive"} for i in range(7)]
    rows += [{"id": f"n{i}", "kind": "negative", "negative_kind": "off_topic"} for i in range(4)]
    halves = split_halves(rows)
    assert halves == split_halves(list(reversed(rows)))  # the file's order does not matter
    assert sum(halves[f"p{i}"] == "tune" for i in range(7)) == 4
    assert sum(halves[f"n{i}"] == "judge" for i in range(4)) == 2
    assert halves != split_halves(rows, seed=1)


@pytest.mark.parametrize("name", ["npm", "valgrind", "node"])
def test_the_shipped_sets_hold_the_seeded_split_and_the_issues_sizes(name):
    path = SETS / f"{name}.jsonl"
    qs = read_set(path)
    rows = [parse_question(json.loads(line), "") for line in path.read_text().splitlines()]
    raw = [{"id": q.id, "kind": q.kind, "negative_kind": q.negative_kind} for q in rows]
    assert {q.id: q.half for q in qs} == split_halves(raw)
    groups = [q.group for q in qs]
    assert groups.count("positive") >= 32 and groups.count("off_topic") + groups.count("near_miss") >= 16
    assert groups.count("near_miss") == groups.count("off_topic")
    assert all(q.source for q in qs if q.group != "off_topic")


# ------------------------------------------------------------------ the command


class StubRAG:
    """A RoutedRAG stand-in that answers from a table and books one call."""

    def __init__(self, replies: dict[str, str]):
        self.replies, self.asked = replies, []

    def answer(self, question, route="auto"):
        self.asked.append((question, route))
        return Answer(text=self.replies[question], route="chunk", usage=Usage(llm_calls=1, prompt_tokens=90))


SET_ROWS = [
    {"id": "p1", "question": "Where was Marie Curie born?", "kind": "positive", "must": ["Warsaw"], "half": "tune"},
    {"id": "p2", "question": "When was Nolan born?", "kind": "positive", "must": ["1970"], "half": "judge"},
    {"id": "n1", "question": "What colour are the ferry's sails?", "kind": "negative",
     "negative_kind": "near_miss", "half": "tune"},
]  # fmt: skip


def _invoke(tmp_path, rag_for, systems="chunk,default", extra=()):
    from training.docs_qa.cmd_bench_docs import bench_docs as cmd

    set_file = _write(tmp_path, SET_ROWS)
    kb = tmp_path / "kb"
    kb.mkdir(exist_ok=True)
    args = ["--set-file", str(set_file), "--kb", str(kb), "--systems", systems, "--out", str(tmp_path / "out")]
    obj = {"llm": ScriptedLLM([]), "rag_for": rag_for}
    return CliRunner().invoke(cmd, [*args, *extra], obj=obj, catch_exceptions=False)


def test_the_command_answers_the_half_with_each_system_and_reports_per_set(tmp_path):
    llm = ScriptedLLM(
        rules={"Question: Where was": "She was born in Warsaw [1].", "Question: What colour": NOT_IN_DOCUMENTS}
    )
    stub = StubRAG({"Where was Marie Curie born?": "Paris [1].", "What colour are the ferry's sails?": "White [1]."})
    made = []

    def rag_for(docs, system):
        made.append((docs.name, system))
        return make_rag(llm) if system == "chunk" else stub

    res = _invoke(tmp_path, rag_for)
    assert res.exit_code == 0, res.output
    assert made == [("s", "chunk"), ("s", "default")] and len(llm.calls) == 2  # the tune half: p1 and n1
    assert {r for _, r in stub.asked} == {"auto"}  # `default` is the router's choice
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    chunk, default = report["sets"]["s"]["chunk"], report["sets"]["s"]["default"]
    assert (chunk["positives_right"], chunk["near_miss_abstained"]) == (1, 1)
    assert (default["positives_wrong"], default["negatives_answered"]) == (1, 1)
    md = (tmp_path / "out" / "report.md").read_text()
    assert "Half: **tune**" in md and "logicroute bench docs --set-file" in md
    rows = [json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert {(r["system"], r["id"]) for r in rows} == {
        ("chunk", "p1"),
        ("chunk", "n1"),
        ("default", "p1"),
        ("default", "n1"),
    }
    assert all("text" in r and "llm_calls" in r and "route" in r for r in rows)


def test_a_rerun_answers_only_what_is_missing(tmp_path):
    stub = StubRAG({q["question"]: "Warsaw, 1970 [1]." for q in SET_ROWS})
    _invoke(tmp_path, lambda docs, system: stub, systems="chunk")
    asked = len(stub.asked)
    res = _invoke(tmp_path, lambda docs, system: stub, systems="chunk", extra=["--half", "all"])
    assert res.exit_code == 0 and len(stub.asked) == asked + 1  # only p2, the judge half's question


def test_a_system_that_needs_a_setting_this_version_lacks_fails_before_any_answer(monkeypatch):
    monkeypatch.setitem(bench_docs.SYSTEMS, "future", {"route": "auto", "options": {"no_such_setting": True}})
    with pytest.raises(LogicRouteError, match="no_such_setting"):
        bench_docs.check_systems(["chunk", "future"])
    with pytest.raises(LogicRouteError, match="unknown system"):
        bench_docs.check_systems(["chunk", "nonsense"])


def test_a_routed_systems_stored_answers_depend_on_the_router_and_the_chunk_routes_do_not():
    q = bench_docs.DocsQuestion(id="p1", question="What is the default port?", kind="positive", half="tune")
    setup = {"llm": "x", "k": 3, "style": "reader"}
    for system, depends in (("default", True), ("before", True), ("chunk", False)):
        before, after = (bench_docs.signature(system, q, {**setup, "router": r}) for r in ("a", "b"))
        assert (before != after) == depends
