"""The logic route (LogicRAG query-time DAG reasoning), as specs.

Control flow runs on ScriptedLLM + a keyword-overlap fake KB (no model, no embedder). The one
`local_llm` test at the end runs the real Qwen2.5-Coder-1.5B on a tiny invented two-hop corpus.
"""

from __future__ import annotations

import json
import re

import pytest

from engine.base.errors import BadQuestionError, LLMError
from engine.routes.logic.config import LogicConfig
from engine.routes.logic.plan import (
    SubQuestion,
    build_graph,
    placeholders,
    plan_problems,
    repair,
    substitute,
    topological_ranks,
)
from engine.routes.logic.render import trace_to_mermaid
from engine.routes.logic.solve import answer_logic
from hierarchy.documents import Chunk
from tests.fakes import ScriptedLLM, WordOverlapKB

# ---------------------------------------------------------------- a tiny corpus

CORPUS = {
    "c1": "Jaws (film): Jaws is a 1975 thriller film directed by Steven Spielberg.",
    "c2": "Steven Spielberg: Steven Spielberg was born on December 18, 1946 in Cincinnati.",
    "c3": "Vertigo (film): Vertigo is a 1958 film directed by Alfred Hitchcock.",
    "c4": "Alfred Hitchcock: Alfred Hitchcock was born on 13 August 1899 in London.",
    "c5": "Ann Lee: Ann Lee was born in 1936 in Manchester.",
    "c6": "Tom Ford: Tom Ford was born in 1961 in Austin.",
    "c7": "Metropolis (film): Metropolis is a 1927 film directed by Fritz Lang.",
}


def corpus_kb() -> WordOverlapKB:
    """CORPUS ("Title: text" by chunk id), each chunk its own document."""
    return WordOverlapKB(Chunk(cid, cid, *p.split(": ", 1), 0) for cid, p in CORPUS.items())


def plan(*nodes):
    return {"subquestions": [{"id": i, "question": q, "depends_on": d} for i, q, d in nodes]}


def step(answers, memory="m"):
    return {"memory": memory, "answers": answers}


SUFFICIENT = {"sufficient": True, "missing": []}
CHAIN_PLAN = plan(("q1", "Who is the director of film Jaws?", []), ("q2", "When was #q1 born?", ["q1"]))
CHAIN_Q = "When was the director of film Jaws born?"


def purposes(ans):
    return [c["purpose"] for c in ans.trace["llm_calls"]]


def node(ans, i):
    return next(n for n in ans.trace["dag"]["nodes"] if n["id"] == i)


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


# ---------------------------------------------------------------- the route


def test_chain_dependent_node_is_rewritten_with_parent_answer():
    llm = ScriptedLLM(
        [
            CHAIN_PLAN,
            step({"q1": "Steven Spielberg"}, "Jaws was directed by Steven Spielberg."),
            step({"q2": "December 18, 1946"}),
            SUFFICIENT,
            "December 18, 1946",
        ],
        delay=0.01,
    )
    kb = corpus_kb()
    ans = answer_logic(CHAIN_Q, kb, llm)
    assert ans.route == "logic" and ans.text == "December 18, 1946"
    assert ans.trace["dag"]["edges"] == [["q1", "q2"]]
    assert ans.trace["dag"]["ranks"] == [["q1"], ["q2"]]
    q2 = node(ans, "q2")
    assert q2["question"] == "When was #q1 born?"  # original kept beside the rewrite
    assert q2["rewritten"] == "When was Steven Spielberg born?" and q2["rewrite"] == "placeholder"
    assert "Steven Spielberg" in kb.searches[1]["query"]  # context-aware retrieval
    assert purposes(ans) == ["decompose", "step q1", "step q2", "reflect 1", "answer"]  # placeholder: no rewrite call
    assert ans.usage.llm_calls == 5 and (ans.usage.prompt_tokens, ans.usage.completion_tokens) == llm.reported_tokens
    assert ans.usage.seconds >= 5 * 0.01  # wall time over all five calls
    assert ans.trace["retrieval_rounds"] == 2 and ans.flags == []
    # final answer: answer-only prompt, memory as context, sub-answers as notes
    final = llm.calls[-1]["messages"][-1]["content"]
    assert "Notes:" in final and "When was Steven Spielberg born? December 18, 1946" in final


def test_parent_without_placeholder_gets_llm_rewrite():
    p = plan(("q1", "Who is the director of film Jaws?", []), ("q2", "When was the director born?", ["q1"]))
    llm = ScriptedLLM(
        [
            p,
            step({"q1": "Steven Spielberg"}),
            "When was Steven Spielberg born?",
            step({"q2": "1946"}),
            SUFFICIENT,
            "1946",
        ]
    )
    kb = corpus_kb()
    ans = answer_logic(CHAIN_Q, kb, llm)
    q2 = node(ans, "q2")
    assert q2["rewrite"] == "llm" and q2["rewritten"] == "When was Steven Spielberg born?"
    assert "rewrite q2" in purposes(ans) and kb.searches[1]["query"] == "When was Steven Spielberg born?"


COMPARE_PLAN = plan(("q1", "When was Ann Lee born?", []), ("q2", "When was Tom Ford born?", []))
COMPARE_Q = "Who was born first, Ann Lee or Tom Ford?"


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
    ans = answer_logic(COMPARE_Q, kb, llm, LogicConfig(merge_same_rank=False))
    assert [s["k"] for s in kb.searches] == [3, 3]
    assert purposes(ans) == ["decompose", "step q1", "step q2", "reflect 1", "answer"]
    assert ans.trace["retrieval_rounds"] == 2


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


def test_reflection_adds_a_node_that_gets_retrieved_and_solved():
    single = plan(("q1", "Who is the director of film Jaws?", []))
    missing = {"sufficient": False, "missing": [{"question": "When was #q1 born?", "depends_on": ["q1"]}]}
    llm = ScriptedLLM(
        [
            single,
            step({"q1": "Steven Spielberg"}),
            missing,
            step({"q2": "December 18, 1946"}),
            SUFFICIENT,
            "December 18, 1946",
        ]
    )
    kb = corpus_kb()
    ans = answer_logic(CHAIN_Q, kb, llm)
    q2 = node(ans, "q2")
    assert q2["origin"] == "reflection" and q2["answer"] == "December 18, 1946" and q2["chunk_ids"]
    assert q2["rewritten"] == "When was Steven Spielberg born?"
    assert ans.trace["reflection"][0]["added"] == ["q2"] and ans.trace["dag"]["edges"] == [["q1", "q2"]]
    assert purposes(ans) == ["decompose", "step q1", "reflect 1", "step q2", "reflect 2", "answer"]


def test_unknown_answer_is_asked_again_and_gets_new_chunks():
    unknown = {"sufficient": False, "missing": [{"question": "When was #q1 born?", "depends_on": ["q1"]}]}
    llm = ScriptedLLM(
        [
            CHAIN_PLAN,
            step({"q1": "Steven Spielberg"}),
            step({"q2": "unknown"}),
            unknown,
            step({"q3": "December 18, 1946"}),
            SUFFICIENT,
            "December 18, 1946",
        ]
    )
    kb = corpus_kb()
    ans = answer_logic(CHAIN_Q, kb, llm)
    assert ans.trace["reflection"][0]["added"] == ["q3"]
    assert not set(node(ans, "q3")["chunk_ids"]) & set(node(ans, "q2")["chunk_ids"])  # moves forward
    final = llm.calls[-1]["messages"][-1]["content"]
    assert "unknown" not in final.split("Notes:")[1]  # unknown sub-answers are not notes


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


def test_reflection_is_bounded_by_max_rounds():
    single = plan(("q1", "Who is the director of film Jaws?", []))

    def more(messages):  # always asks for something new
        n = messages[-1]["content"].count("\nq")
        return {"sufficient": False, "missing": [{"question": f"Extra fact number {n}?", "depends_on": []}]}

    llm = ScriptedLLM(
        [single],
        rules={
            "Main question: When was the director of film Jaws born?\n\nFacts": more,
            "Sub-questions:": lambda m: step({i: "x" for i in re.findall(r"^(q\d+):", m[-1]["content"], re.M)}),
            "Question: When was the director": "x",
        },
    )
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm, LogicConfig(max_rounds=2, max_llm_calls=50))
    assert len(ans.trace["reflection"]) == 2 and len(ans.trace["dag"]["nodes"]) == 3
    assert any("after 2 rounds" in f for f in ans.flags)


def test_budget_stop_answers_from_memory_so_far():
    llm = ScriptedLLM(
        [CHAIN_PLAN, step({"q1": "Steven Spielberg"}, "Jaws was directed by Steven Spielberg."), "Steven Spielberg"]
    )
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm, LogicConfig(max_llm_calls=3))
    assert any("budget exhausted" in f for f in ans.flags)
    assert purposes(ans) == ["decompose", "step q1", "answer"] and ans.usage.llm_calls == 3
    assert "Jaws was directed by Steven Spielberg." in llm.calls[-1]["messages"][-1]["content"]
    assert node(ans, "q2")["answer"] is None


def test_llm_error_mid_dag_answers_from_memory_so_far():
    llm = ScriptedLLM(
        [
            CHAIN_PLAN,
            step({"q1": "Steven Spielberg"}, "Spielberg directed Jaws."),
            LLMError("server went away"),
            "Steven Spielberg",
        ]
    )
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm)
    assert any("LLM error mid-DAG" in f for f in ans.flags) and ans.text == "Steven Spielberg"


def test_rolling_memory_off_puts_raw_chunks_in_the_final_context():
    llm = ScriptedLLM(
        [CHAIN_PLAN, {"answers": {"q1": "Steven Spielberg"}}, {"answers": {"q2": "1946"}}, SUFFICIENT, "1946"]
    )
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm, LogicConfig(rolling_memory=False))
    final = llm.calls[-1]["messages"][-1]["content"]
    assert "directed by Steven Spielberg" in final and "born on December 18, 1946" in final
    assert "memory" not in llm.calls[1]["schema"]["properties"] and ans.trace["memory"] == []


def test_rolling_memory_is_the_final_context_and_is_capped():
    long = " ".join(["word"] * 400)
    llm = ScriptedLLM(
        [
            CHAIN_PLAN,
            step({"q1": "Steven Spielberg"}, long),
            step({"q2": "1946"}, "Spielberg born 1946."),
            SUFFICIENT,
            "1946",
        ]
    )
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm, LogicConfig(memory_words=20, final_chunks=0))
    assert len(ans.trace["memory"][0].split()) == 20
    final = llm.calls[-1]["messages"][-1]["content"]
    assert "Spielberg born 1946." in final and "Cincinnati" not in final  # summary, not raw chunks


def test_final_answer_sees_the_last_hops_raw_chunks_beside_the_memory():
    llm = ScriptedLLM(
        [
            CHAIN_PLAN,
            step({"q1": "Steven Spielberg"}, "Spielberg directed Jaws."),
            step({"q2": "1946"}, "Spielberg born 1946."),
            SUFFICIENT,
            "1946",
        ]
    )
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm, LogicConfig(k=1, final_chunks=3))
    final = llm.calls[-1]["messages"][-1]["content"]
    q2_chunk = node(ans, "q2")["chunk_ids"][0]
    assert "Spielberg born 1946." in final and CORPUS[q2_chunk].split(": ", 1)[1] in final
    assert "Jaws is a 1975 thriller" not in final  # the first hop is in the memory only


def test_a_plan_restating_the_question_is_answered_like_the_chunk_route():
    from engine.routes.chunk import answer_chunk

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
    ans = answer_logic(q, corpus_kb(), llm, LogicConfig(direct_single_hop=False))
    assert purposes(ans) == ["decompose", "step q1", "reflect 1", "answer"] and "single_hop" not in ans.trace


def test_a_comparison_has_no_single_last_hop_so_its_final_context_is_the_memory():
    llm = ScriptedLLM(
        [COMPARE_PLAN, step({"q1": "1936", "q2": "1961"}, "Ann Lee 1936; Tom Ford 1961."), SUFFICIENT, "Ann Lee"]
    )
    answer_logic(COMPARE_Q, corpus_kb(), llm)
    final = llm.calls[-1]["messages"][-1]["content"]
    assert "Ann Lee 1936; Tom Ford 1961." in final and "Manchester" not in final


def test_sampling_without_replacement_excludes_earlier_chunks():
    llm = ScriptedLLM([CHAIN_PLAN, step({"q1": "Steven Spielberg"}), step({"q2": "1946"}), SUFFICIENT, "1946"])
    kb = corpus_kb()
    ans = answer_logic(CHAIN_Q, kb, llm)
    first = node(ans, "q1")["chunk_ids"]
    assert kb.searches[1]["exclude"] == first
    assert not set(first) & set(node(ans, "q2")["chunk_ids"])


def test_with_replacement_allows_repeats():
    llm = ScriptedLLM([CHAIN_PLAN, step({"q1": "Steven Spielberg"}), step({"q2": "1946"}), SUFFICIENT, "1946"])
    kb = corpus_kb()
    ans = answer_logic(CHAIN_Q, kb, llm, LogicConfig(without_replacement=False))
    assert kb.searches[1]["exclude"] == []
    assert set(node(ans, "q1")["chunk_ids"]) & set(node(ans, "q2")["chunk_ids"])  # c1/c2 come back


def test_reflection_off_makes_no_reflection_call():
    llm = ScriptedLLM([CHAIN_PLAN, step({"q1": "Steven Spielberg"}), step({"q2": "1946"}), "1946"])
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm, LogicConfig(reflection=False))
    assert not any(p.startswith("reflect") for p in purposes(ans)) and ans.trace["reflection"] == []


def test_malformed_reflection_is_flagged_not_silently_sufficient():
    llm = ScriptedLLM([CHAIN_PLAN, step({"q1": "Steven Spielberg"}), step({"q2": "1946"}), "nope", "nope", "1946"])
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm)
    assert any("reflection output malformed" in f for f in ans.flags) and ans.text == "1946"


@pytest.mark.parametrize("q", ["", "   \n\t"])
def test_empty_question_is_rejected(q):
    with pytest.raises(BadQuestionError):
        answer_logic(q, corpus_kb(), ScriptedLLM([]))


def test_config_documents_every_field():
    h = LogicConfig.help()
    assert set(h) == {
        "k",
        "max_rounds",
        "merge_same_rank",
        "rolling_memory",
        "without_replacement",
        "reflection",
        "memory_words",
        "final_chunks",
        "direct_single_hop",
        "max_llm_calls",
        "max_prompt_tokens",
        "max_seconds",
    }
    assert all(h.values())
    c = LogicConfig()
    assert (c.k, c.max_rounds, c.memory_words, c.max_llm_calls, c.max_prompt_tokens, c.max_seconds) == (
        3,
        3,
        150,
        12,
        12000,
        300,
    )


def test_mermaid_shows_nodes_edges_and_answer():
    llm = ScriptedLLM(
        [
            CHAIN_PLAN,
            step({"q1": "Steven Spielberg"}),
            step({"q2": "December 18, 1946"}),
            SUFFICIENT,
            "December 18, 1946",
        ]
    )
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm)
    mm = trace_to_mermaid(ans.trace)
    assert mm.startswith("flowchart TD")
    assert "q1 --> q2" in mm and "When was Steven Spielberg born?" in mm and "→ December 18, 1946" in mm
    assert 'A(["answer: December 18, 1946"])' in mm and "q2 --> A" in mm
    assert '"' not in mm.split('A(["answer: ')[1].split('"])')[0]


# ---------------------------------------------------------------- the real local model

TWO_HOP = [
    (
        "The Silver Lantern",
        "The Silver Lantern is a 1987 drama film directed by Maren Holt. It follows a "
        "lighthouse keeper during a long winter.",
    ),
    (
        "Maren Holt",
        "Maren Holt (born 4 March 1941) is a film director. She was born in the harbour town of "
        "Vellmark and studied painting before turning to cinema.",
    ),
    ("The Copper Road", "The Copper Road is a 1992 western film directed by Tobias Renn, shot in the desert."),
    ("Tobias Renn", "Tobias Renn (born 1950) is a director and screenwriter born in the mountain village of Oskeby."),
    ("Northern Tide", "Northern Tide is a 1979 documentary about fishing fleets, directed by Alma Vries."),
    ("Alma Vries", "Alma Vries is a documentary maker who was born in the river city of Dunwick in 1938."),
    ("Vellmark", "Vellmark is a small harbour town known for its annual herring festival."),
]


@pytest.mark.local_llm
def test_logic_route_local_llm_two_hop(tmp_path):
    from engine.llm.factory import make_llm
    from hierarchy.documents import Document
    from hierarchy.kb import KnowledgeBase

    kb = KnowledgeBase.create(tmp_path / "kb")
    kb.add([Document(id=f"d{i}", title=t, text=x) for i, (t, x) in enumerate(TWO_HOP)], show_progress=False)
    llm = make_llm(cache=tmp_path / "llm_cache.sqlite")
    ans = answer_logic("In which town was the director of the film The Silver Lantern born?", kb, llm)
    dag = ans.trace["dag"]
    assert len(dag["nodes"]) >= 2 and dag["edges"], dag
    by_id = {n["id"]: n for n in dag["nodes"]}
    parent, child = dag["edges"][0]
    assert by_id[parent]["answer"] and by_id[parent]["answer"].lower() in by_id[child]["query"].lower(), dag
    assert "maren holt" in by_id[child]["query"].lower(), dag
    assert "vellmark" in ans.text.lower(), (ans.text, ans.trace)


# ---------------------------------------------------------------- the benchmark script


class _AutoLLM:
    """Answers any logic-route schema with a fixed valid object (pipeline test, no model)."""

    name = "fake:auto"

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0):
        import json

        from engine.base.types import Completion

        props = (schema or {}).get("properties", {})
        if "subquestions" in props:
            data = plan(("q1", "Who is it?", []), ("q2", "Where is #q1?", ["q1"]))
        elif "answers" in props:
            data = {"answers": {i: "ans" for i in props["answers"]["required"]}}
            if "memory" in props:
                data["memory"] = "mem"
        elif "sufficient" in props:
            data = SUFFICIENT
        else:
            data = None
        text = json.dumps(data) if data is not None else "x"
        return Completion(text, 10, 2, 0.0, data=data, model=self.name)


@pytest.mark.embedder
@pytest.mark.shared_data
def test_bench_logic_runs_resumes_and_reports(tmp_path, shared_data):
    from training.bench_logic import main

    kw = dict(
        systems=["chunk", "logic", "logic-no-merge"],
        datasets=["2wiki"],
        data_dir=shared_data,
        llm=_AutoLLM(),
        show_progress=False,
        kb_n=1,
    )
    report = main(1, tmp_path, **kw)
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert len(lines) == 3
    main(1, tmp_path, **kw)  # resumed: nothing is run twice
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 3
    o = report["datasets"]["2wiki"]["overall"]
    assert o["chunk"]["llm_calls"] == 1 and o["logic"]["retrieval_rounds"] == 2
    # rows made under other route settings are not reused: a changed default is answered again
    rows = [json.loads(x) for x in lines]
    for r in rows:
        r["cfg"] = "older" if r["system"] == "logic" else r["cfg"]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    main(1, tmp_path, **kw)
    redone = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()[3:]]
    assert [r["system"] for r in redone] == ["logic"]
    assert (tmp_path / "report.md").read_text().startswith("# Logic route benchmark")


@pytest.mark.shared_data
def test_bench_logic_deep_hops_sample_takes_3_and_4_hop_questions_with_their_passages(shared_data):
    from training.bench_logic import DATASETS, _deep_hops

    kb, asked = _deep_hops(shared_data / DATASETS["musique-34hop"], 6)
    assert sorted(q.type for q in asked.questions) == ["3hop"] * 3 + ["4hop"] * 3
    assert {q.type for q in kb.questions} == {"3hop", "4hop"} and len(kb.questions) == 55
    have = {p.id for p in kb.passages}
    assert all(set(q.supporting) <= have for q in asked.questions)
