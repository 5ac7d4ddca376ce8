"""The logic route on comparison questions, as specs: same-rank nodes share one retrieval and
one LLM call, the comparison (dates, same-or-different) is computed and stated in the final
notes, and the final context of a comparison is the rolling memory.

Runs on ScriptedLLM + a keyword-overlap fake KB (no model, no embedder).
"""

from __future__ import annotations

from engine.core.routes.logic.solve import answer_logic
from tests.engine.logic_scripts import (
    COMPARE_PLAN,
    COMPARE_Q,
    SUFFICIENT,
    corpus_kb,
    plan,
    purposes,
    step,
)
from tests.fakes import ScriptedLLM
from training.common.logic_experiment import LogicExperiment


def test_comparison_same_rank_is_one_merged_retrieval_and_one_call():
    llm = ScriptedLLM([COMPARE_PLAN, step({"q1": "1936", "q2": "1961"}), SUFFICIENT, "Ann Lee"])
    kb = corpus_kb()
    ans = answer_logic(COMPARE_Q, kb, llm)
    assert ans.text == "Ann Lee"
    assert len(kb.searches) == 1 and kb.searches[0]["k"] == 6  # k per node, one retrieval
    assert "Ann Lee" in kb.searches[0]["query"] and "Tom Ford" in kb.searches[0]["query"]
    assert purposes(ans) == ["decompose", "step q1,q2", "reflect 1", "answer"]
    assert ans.trace["dag"]["ranks"] == [["q1", "q2"]] and ans.trace["retrieval_rounds"] == 1
    # the small model mis-compares dates: the comparison is computed and stated in the notes
    final = llm.calls[-1]["messages"][-1]["content"]
    assert "so the answer is Ann Lee." in final and ans.trace["comparison"].startswith("Date comparison")


def test_bridge_date_comparison_follows_the_dag_to_the_option():
    p = plan(
        ("q1", "Who is the director of film Jaws?", []),
        ("q2", "Who is the director of film Vertigo?", []),
        ("q3", "When was #q1 born?", ["q1"]),
        ("q4", "When was #q2 born?", ["q2"]),
    )
    llm = ScriptedLLM(
        [
            p,
            step({"q1": "Steven Spielberg", "q2": "Alfred Hitchcock"}),
            step({"q3": "December 18, 1946", "q4": "13 August 1899"}),
            SUFFICIENT,
            "Jaws",
        ]
    )
    ans = answer_logic("Which film has the director born later, Jaws or Vertigo?", corpus_kb(), llm)
    assert ans.trace["comparison"] == (
        "Date comparison: Jaws has the later date (December 18, 1946), so the answer is Jaws."
    )


def test_same_question_gets_a_computed_yes_or_no():
    p = plan(("q1", "In which country was Ann Lee born?", []), ("q2", "In which country was Tom Ford born?", []))
    llm = ScriptedLLM([p, step({"q1": "England", "q2": "United States"}), SUFFICIENT, "no"])
    answer_logic("Were Ann Lee and Tom Ford born in the same country?", corpus_kb(), llm)
    assert (
        "The answers England and United States are different, so the answer is no."
        in llm.calls[-1]["messages"][-1]["content"]
    )
    # no note when the sub-questions did not ask for the compared attribute
    p = plan(("q1", "Who is Ann Lee?", []), ("q2", "Who is Tom Ford?", []))
    llm = ScriptedLLM([p, step({"q1": "a singer", "q2": "a designer"}), SUFFICIENT, "no"])
    ans = answer_logic("Were Ann Lee and Tom Ford born in the same country?", corpus_kb(), llm)
    assert "comparison" not in ans.trace


def test_comparison_without_merging_is_one_retrieval_and_call_per_node():
    llm = ScriptedLLM([COMPARE_PLAN, step({"q1": "1936"}), step({"q2": "1961"}), SUFFICIENT, "Ann Lee"])
    kb = corpus_kb()
    ans = answer_logic(COMPARE_Q, kb, llm, LogicExperiment(merge_same_rank=False))
    assert [s["k"] for s in kb.searches] == [3, 3]
    assert purposes(ans) == ["decompose", "step q1", "step q2", "reflect 1", "answer"]
    assert ans.trace["retrieval_rounds"] == 2


def test_a_comparison_has_no_single_last_hop_so_its_final_context_is_the_memory():
    llm = ScriptedLLM(
        [COMPARE_PLAN, step({"q1": "1936", "q2": "1961"}, "Ann Lee 1936; Tom Ford 1961."), SUFFICIENT, "Ann Lee"]
    )
    answer_logic(COMPARE_Q, corpus_kb(), llm)
    final = llm.calls[-1]["messages"][-1]["content"]
    assert "Ann Lee 1936; Tom Ford 1961." in final and "Manchester" not in final
