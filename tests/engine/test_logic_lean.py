"""The logic route's cost cuts, as specs: step calls see only the sentences of their chunks that
matter (within a token budget), reflection is skipped while every answer is read from a passage,
and the final call is folded away when the solved DAG already holds the short answer. The short
prompts keep what the model needs. Runs on ScriptedLLM + the keyword-overlap fake KB with a
bag-of-words embedder."""

from __future__ import annotations

import pytest

from engine.core.routes.logic.config import LogicConfig
from engine.core.routes.logic.evidence import compress_chunks, estimate_tokens
from engine.core.routes.logic.solve import answer_logic
from engine.floor.base.types import RetrievedChunk
from engine.floor.prompts.logic import decompose_messages
from engine.floor.prompts.logic_step import step_messages
from tests.engine.logic_scripts import (
    CHAIN_PLAN,
    CHAIN_Q,
    COMPARE_PLAN,
    COMPARE_Q,
    SUFFICIENT,
    lean_kb,
    plan,
    purposes,
    step,
)
from tests.fakes import HashedBowEmbedder, ScriptedLLM
from training.common.logic_experiment import LogicExperiment

LEAN = LogicExperiment(evidence_tokens=100, short_prompts=True, reflect_when_unsure=True, fold_final=True)

LONG = RetrievedChunk(
    "c9",
    "d9",
    "Fritz Lang",
    "Fritz Lang was an Austrian-German filmmaker. He was known for his expressionist films. "
    "He was born on 5 December 1890 in Vienna. His mother was Paula Schlesinger. "
    "He studied painting in Paris. He moved to Hollywood in 1936.",
    0.9,
)
OTHER = RetrievedChunk("c8", "d8", "Metropolis", "Metropolis is a 1927 silent film. It is set in a city.", 0.8)


# ---------------------------------------------------------------- evidence compression


@pytest.mark.embedder
def test_compression_keeps_the_answering_sentence_in_passage_order_within_budget(real_embedder):
    kept, rec = compress_chunks([LONG, OTHER], ["When was Fritz Lang born?"], real_embedder, budget_tokens=20)
    text = " ".join(c.text for c in kept)
    assert "born on 5 December 1890" in text
    assert "studied painting" not in text
    assert rec["compressed"] and rec["tokens_after"] <= 20 < rec["tokens_before"]
    assert kept[0].title == "Fritz Lang" and kept[0].chunk_id == "c9"  # the passage keeps its name and id


@pytest.mark.embedder
def test_compression_keeps_the_best_sentence_even_over_budget_and_leaves_short_context_alone(real_embedder):
    kept, _ = compress_chunks([LONG], ["When was Fritz Lang born?"], real_embedder, budget_tokens=1)
    assert [c.text for c in kept] == ["He was born on 5 December 1890 in Vienna."]
    same, rec = compress_chunks([OTHER], ["x"], HashedBowEmbedder(), budget_tokens=500)
    assert same == [OTHER] and not rec["compressed"]
    assert compress_chunks([LONG], ["x"], HashedBowEmbedder(), budget_tokens=0)[0] == [LONG]
    assert estimate_tokens("one two three") == 5


def test_step_call_shows_only_the_selected_sentences():
    kb = lean_kb()
    llm = ScriptedLLM(
        [CHAIN_PLAN, step({"q1": "Steven Spielberg"}), step({"q2": "December 18, 1946"}), SUFFICIENT, "x"]
    )
    ans = answer_logic(CHAIN_Q, kb, llm, LogicExperiment(evidence_tokens=12))
    first_step = ans.trace["steps"][0]
    evidence = first_step["evidence"]
    assert evidence["compressed"] and evidence["tokens_after"] < evidence["tokens_before"]
    shown = llm.calls[1]["messages"][-1]["content"]
    assert "directed by Steven Spielberg" in shown and "Cincinnati" not in shown
    assert len(ans.sources) >= 3  # sources list the whole chunks retrieved, not the cut ones


# ---------------------------------------------------------------- reflection only when unsure


def test_reflection_is_skipped_when_every_answer_is_read_from_a_passage():
    llm = ScriptedLLM([CHAIN_PLAN, step({"q1": "Steven Spielberg"}), step({"q2": "December 18, 1946"}), "1946"])
    ans = answer_logic(CHAIN_Q, lean_kb(), llm, LogicConfig(reflect_when_unsure=True))
    assert purposes(ans) == ["decompose", "step q1", "step q2", "answer"]
    assert ans.trace["reflection"][0]["skipped"]


def test_reflection_runs_when_an_answer_is_not_in_the_passages():
    llm = ScriptedLLM(
        [CHAIN_PLAN, step({"q1": "Steven Spielberg"}), step({"q2": "1950"}), SUFFICIENT, "1950"]  # 1950: guessed
    )
    ans = answer_logic(CHAIN_Q, lean_kb(), llm, LogicConfig(reflect_when_unsure=True))
    assert purposes(ans) == ["decompose", "step q1", "step q2", "reflect 1", "answer"]


def test_reflection_only_for_unknowns_skips_a_guessed_answer_and_runs_for_a_missing_one():
    only = LogicConfig(reflect_when_unsure=True, reflect_unknown_only=True)
    llm = ScriptedLLM([CHAIN_PLAN, step({"q1": "Steven Spielberg"}), step({"q2": "1950"}), "1950"])
    ans = answer_logic(CHAIN_Q, lean_kb(), llm, only)
    assert purposes(ans) == ["decompose", "step q1", "step q2", "answer"]
    assert ans.trace["reflection"] == [{"round": 1, "skipped": "every sub-question answered"}]
    llm = ScriptedLLM([CHAIN_PLAN, step({"q1": "Steven Spielberg"}), step({"q2": "unknown"}), SUFFICIENT, "1946"])
    ans = answer_logic(CHAIN_Q, lean_kb(), llm, only)
    assert purposes(ans) == ["decompose", "step q1", "step q2", "reflect 1", "answer"]


def test_reflection_without_notes_sees_the_sub_answers_but_not_the_memory():
    replies = [CHAIN_PLAN, step({"q1": "Steven Spielberg"}, "Jaws: Spielberg"), step({"q2": "1950"}, "MEMO")]
    for notes in (True, False):
        llm = ScriptedLLM([*replies, SUFFICIENT, "1950"])
        ans = answer_logic(CHAIN_Q, lean_kb(), llm, LogicExperiment(reflect_notes=notes))
        assert purposes(ans)[3] == "reflect 1"
        shown = llm.calls[3]["messages"][-1]["content"]
        assert "q1: Who is the director of film Jaws? -> Steven Spielberg" in shown
        assert ("MEMO" in shown) is notes


# ---------------------------------------------------------------- the folded final answer


def test_chain_answer_is_the_last_sub_answer_without_a_final_call():
    llm = ScriptedLLM([CHAIN_PLAN, step({"q1": "Steven Spielberg"}), step({"q2": "December 18, 1946"})])
    ans = answer_logic(CHAIN_Q, lean_kb(), llm, LEAN)
    assert ans.text == "December 18, 1946" and purposes(ans) == ["decompose", "step q1", "step q2"]
    assert "q2" in ans.trace["final"]["folded"]
    assert ans.sources[0].n == 1  # the chunks that state the answer are its numbered sources


def test_date_comparison_answer_is_computed_without_a_final_call():
    llm = ScriptedLLM([COMPARE_PLAN, step({"q1": "1936", "q2": "1961"})])
    ans = answer_logic(COMPARE_Q, lean_kb(), llm, LEAN)
    assert ans.text == "Ann Lee" and purposes(ans) == ["decompose", "step q1,q2"]
    assert "computed" in ans.trace["final"]["folded"] and "Ann Lee" in ans.trace["comparison"]


def test_final_call_is_kept_when_folding_cannot_be_trusted():
    yes_no = "Was the director of film Jaws born in 1946?"
    cases = [
        (yes_no, LEAN, "short"),  # the last sub-answer is a date, the answer a yes/no
        (CHAIN_Q, LEAN, "reader"),  # sentences with citations are the final call's job
    ]
    for question, cfg, style in cases:
        llm = ScriptedLLM([CHAIN_PLAN, step({"q1": "Steven Spielberg"}), step({"q2": "December 18, 1946"}), "yes"])
        ans = answer_logic(question, lean_kb(), llm, cfg, style=style)
        assert purposes(ans)[-1] == "answer", (question, style)
    # an answer no passage states is not trusted either: reflection, then the final call
    llm = ScriptedLLM([CHAIN_PLAN, step({"q1": "Steven Spielberg"}), step({"q2": "1950"}), SUFFICIENT, "1946"])
    ans = answer_logic(CHAIN_Q, lean_kb(), llm, LEAN)
    assert purposes(ans)[-2:] == ["reflect 1", "answer"] and ans.text == "1946"


def test_one_lookup_plan_still_answers_over_the_raw_chunks():
    one = plan(("q1", "Who directed the film Jaws?", []))
    llm = ScriptedLLM([one, "Steven Spielberg"])
    ans = answer_logic("Who directed the film Jaws?", lean_kb(), llm, LEAN)
    assert purposes(ans) == ["decompose", "answer"] and ans.text == "Steven Spielberg"


# ---------------------------------------------------------------- the short prompts


def test_short_prompts_are_shorter_and_keep_the_question_and_the_plan_shapes():
    long_d, short_d = decompose_messages("Who is older, A or B?"), decompose_messages("Who is older, A or B?", True)
    size = lambda msgs: sum(len(m["content"]) for m in msgs)  # noqa: E731
    assert size(short_d) < 0.75 * size(long_d) and short_d[-1]["content"] == "Question: Who is older, A or B?"
    shown = " ".join(m["content"] for m in short_d)
    for shape in ("#q1", "Vertigo", "Carmen", "Ann Lee"):  # chain, bridge comparison, 3 hops, comparison
        assert shape in shown
    args = ("Main?", "", "[1] T: text", [("q1", "Sub?")], 80, True)
    assert size(step_messages(*args, short=True)) < size(step_messages(*args))
    assert "Sub?" in step_messages(*args, short=True)[-1]["content"]


def test_a_computed_same_country_check_is_not_folded_the_final_call_decides():
    question = "Are Ann Lee and Tom Ford of the same nationality?"
    p = plan(("q1", "What is the nationality of Ann Lee?", []), ("q2", "What is the nationality of Tom Ford?", []))
    llm = ScriptedLLM([p, step({"q1": "English", "q2": "American"}), SUFFICIENT, "no"])
    ans = answer_logic(question, lean_kb(), llm, LEAN)
    assert purposes(ans)[-1] == "answer" and ans.text == "no"
    assert "so the answer is no" in llm.calls[-1]["messages"][-1]["content"]  # the check is still shown to it
