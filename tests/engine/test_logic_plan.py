"""The logic route's plan (LogicRAG query-time DAG reasoning), as specs: the DAG module
(placeholders, ranks, repair), and what the route does with a bad or trivial decomposition:
regenerate it once with the error stated, repair it, fall back to one node, drop compare-only
nodes, and answer a one-node plan like the chunk route.

Runs on ScriptedLLM + a keyword-overlap fake KB (no model, no embedder).
"""

from __future__ import annotations

from engine.core.routes.logic.plan import (
    SubQuestion,
    build_graph,
    placeholders,
    plan_problems,
    repair,
    substitute,
    topological_ranks,
)
from engine.core.routes.logic.solve import answer_logic
from tests.engine.logic_scripts import (
    CHAIN_PLAN,
    CHAIN_Q,
    COMPARE_Q,
    SUFFICIENT,
    corpus_kb,
    node,
    plan,
    purposes,
    step,
)
from tests.fakes import ScriptedLLM
from training.common.logic_experiment import LogicExperiment

# ---------------------------------------------------------------- the DAG module


def test_placeholders_and_substitution():
    assert placeholders("Compare #q1 with {q2} and #q1") == ["q1", "q2"]
    assert substitute("When was #q1 born?", {"q1": "Steven Spielberg"}) == "When was Steven Spielberg born?"
    assert substitute("When was #q3 born?", {"q1": "x"}) == "When was #q3 born?"


def test_ranks_are_longest_path_from_a_source():
    nodes = [
        SubQuestion("q1", "a"),
        SubQuestion("q2", "b"),
        SubQuestion("q3", "#q1", ["q1"]),
        SubQuestion("q4", "#q3 and #q2", ["q3", "q2"]),
    ]
    assert topological_ranks(build_graph(nodes)) == {"q1": 0, "q2": 0, "q3": 1, "q4": 2}


def test_repair_drops_back_edge_and_dangling_reference():
    nodes = [SubQuestion("q1", "Who wrote #q2?", ["q2"]), SubQuestion("q2", "What is #q1 known for?", ["q1", "q9"])]
    # a dangling reference is named first; the cycle check needs every reference to exist
    assert plan_problems(nodes) == ["q2 refers to q9, which does not exist"]
    assert "form a cycle (q1 -> q2 -> q1)" in plan_problems([nodes[0], SubQuestion("q2", "x", ["q1"])])[0]
    fixed, dropped = repair(nodes)
    assert not plan_problems(fixed)
    assert "dangling reference q2->q9" in dropped and "back edge q2->q1" in dropped
    assert fixed[1].depends_on == ["q1"] and fixed[0].depends_on == []
    assert "#q2" not in fixed[0].question  # the stale placeholder says what it stood for


# ---------------------------------------------------------------- bad and trivial plans


CYCLE_PLAN = plan(("q1", "Who directed #q2?", ["q2"]), ("q2", "When was #q1 born?", ["q1"]))


def test_cycle_is_regenerated_once_with_the_error_stated():
    llm = ScriptedLLM(
        [CYCLE_PLAN, CHAIN_PLAN, step({"q1": "Steven Spielberg"}), step({"q2": "1946"}), SUFFICIENT, "1946"]
    )
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm)
    assert purposes(ans)[:2] == ["decompose", "decompose-retry"]
    assert "cycle" in llm.calls[1]["messages"][-1]["content"]  # the error is in the retry prompt
    assert ans.trace["dag"]["edges"] == [["q1", "q2"]]
    assert any("regenerated" in f for f in ans.flags) and not any("repaired" in f for f in ans.flags)


def test_cycle_twice_drops_the_back_edge_and_flags_it():
    llm = ScriptedLLM(
        [CYCLE_PLAN, CYCLE_PLAN, step({"q1": "Steven Spielberg"}), step({"q2": "1946"}), SUFFICIENT, "1946"]
    )
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm)
    assert ans.trace["dag"]["edges"] == [["q1", "q2"]]
    assert any("back edge q2->q1" in f for f in ans.flags)
    assert ans.text == "1946"


def test_dangling_reference_is_regenerated_then_dropped():
    bad = plan(("q1", "Who is the director of film Jaws?", ["q7"]), ("q2", "When was #q1 born?", ["q1"]))
    llm = ScriptedLLM([bad, bad, step({"q1": "Steven Spielberg"}), step({"q2": "1946"}), SUFFICIENT, "1946"])
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm)
    assert "q7, which does not exist" in llm.calls[1]["messages"][-1]["content"]
    assert any("dangling reference q1->q7" in f for f in ans.flags)
    assert ans.trace["dag"]["edges"] == [["q1", "q2"]]


def test_malformed_decomposition_falls_back_to_one_node():
    llm = ScriptedLLM(["not json", "{still not json", "December 18, 1946"])
    kb = corpus_kb()
    ans = answer_logic(CHAIN_Q, kb, llm)
    assert any("one-node DAG" in f for f in ans.flags)
    assert [n["id"] for n in ans.trace["dag"]["nodes"]] == ["q1"] and len(kb.searches) == 1
    assert kb.searches[0]["query"] == CHAIN_Q and ans.text == "December 18, 1946"
    assert purposes(ans) == ["decompose", "decompose", "answer"]  # both attempts booked


def test_compare_only_node_is_dropped_and_whole_question_copy_moves_last():
    with_compare = plan(
        ("q1", "When was Ann Lee born?", []),
        ("q2", "When was Tom Ford born?", []),
        ("q3", "Who is older?", ["q1", "q2"]),
    )
    llm = ScriptedLLM([with_compare, step({"q1": "1936", "q2": "1961"}), SUFFICIENT, "Ann Lee"])
    ans = answer_logic(COMPARE_Q, corpus_kb(), llm)
    assert [n["id"] for n in ans.trace["dag"]["nodes"]] == ["q1", "q2"]
    assert any("compare-only" in f for f in ans.flags)

    # q1 repeats the question and the real first hop comes after it: the copy is moved last
    copy = plan(("q1", CHAIN_Q, []), ("q2", "Who is the director of film Jaws?", ["q1"]))
    llm = ScriptedLLM(
        [
            copy,
            step({"q2": "Steven Spielberg"}),
            "When was Steven Spielberg born?",
            step({"q1": "1946"}),
            SUFFICIENT,
            "1946",
        ]
    )
    kb = corpus_kb()
    ans = answer_logic(CHAIN_Q, kb, llm)
    assert ans.trace["dag"]["edges"] == [["q2", "q1"]] and ans.trace["dag"]["ranks"] == [["q2"], ["q1"]]
    assert node(ans, "q1")["rewritten"] == "When was Steven Spielberg born?" and "rewrite q1" in purposes(ans)
    assert any("moved last" in f for f in ans.flags) and ans.text == "1946"


def test_a_plan_restating_the_question_is_answered_like_the_chunk_route():
    from engine.core.routes.chunk import answer_chunk

    q = "Who directed the film Vertigo?"
    llm = ScriptedLLM([plan(("q1", "Who directed the film Vertigo?", [])), "Alfred Hitchcock"])
    ans = answer_logic(q, corpus_kb(), llm)
    assert purposes(ans) == ["decompose", "answer"] and ans.text == "Alfred Hitchcock"
    assert ans.trace["single_hop"] is True and node(ans, "q1")["answer"] == "Alfred Hitchcock"
    chunk_llm = ScriptedLLM(["Alfred Hitchcock"])
    answer_chunk(q, corpus_kb(), chunk_llm)
    assert llm.calls[-1]["messages"] == chunk_llm.calls[0]["messages"]  # same prompt: one cache entry


def test_with_direct_single_hop_off_a_one_node_plan_goes_through_the_dag():
    q = "Who directed the film Vertigo?"
    llm = ScriptedLLM([plan(("q1", q, [])), step({"q1": "Alfred Hitchcock"}), SUFFICIENT, "Alfred Hitchcock"])
    ans = answer_logic(q, corpus_kb(), llm, LogicExperiment(direct_single_hop=False))
    assert purposes(ans) == ["decompose", "step q1", "reflect 1", "answer"] and "single_hop" not in ans.trace
