"""The logic route solving its DAG, as specs: dependent nodes rewritten with their parents'
answers, reflection rounds, budget and error stops, the rolling memory and the final context,
sampling chunks without replacement, input checks, the settings (LogicConfig) and the Mermaid
rendering of the trace.

Runs on ScriptedLLM + a keyword-overlap fake KB (no model, no embedder).
"""

from __future__ import annotations

import re
from dataclasses import fields

import pytest

from engine.core.budget import Budget
from engine.core.routes import LogicRoute, RouteContext, answer_on
from engine.core.routes.logic.config import LogicConfig, Mechanisms, caps
from engine.core.routes.logic.render import trace_to_mermaid
from engine.core.routes.logic.solve import answer_logic
from engine.floor.base.errors import BadQuestionError, LLMError
from tests.engine.logic_scripts import (
    CHAIN_PLAN,
    CHAIN_Q,
    SUFFICIENT,
    corpus_kb,
    node,
    plan,
    purposes,
    step,
)
from tests.fakes import Cut, ScriptedLLM
from training.common.logic_experiment import LogicExperiment

# ---------------------------------------------------------------- dependent nodes


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


# ---------------------------------------------------------------- reflection


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
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm, LogicConfig(max_rounds=2), budget=Budget(max_llm_calls=50))
    assert len(ans.trace["reflection"]) == 2 and len(ans.trace["dag"]["nodes"]) == 3
    assert any("after 2 rounds" in f for f in ans.flags)


def test_reflection_off_makes_no_reflection_call():
    llm = ScriptedLLM([CHAIN_PLAN, step({"q1": "Steven Spielberg"}), step({"q2": "1946"}), "1946"])
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm, LogicExperiment(reflection=False))
    assert not any(p.startswith("reflect") for p in purposes(ans)) and ans.trace["reflection"] == []


def test_malformed_reflection_is_flagged_not_silently_sufficient():
    llm = ScriptedLLM([CHAIN_PLAN, step({"q1": "Steven Spielberg"}), step({"q2": "1946"}), "nope", "nope", "1946"])
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm)
    assert any("reflection output malformed" in f for f in ans.flags) and ans.text == "1946"


# ---------------------------------------------------------------- budget and errors


def test_budget_stop_answers_from_memory_so_far():
    llm = ScriptedLLM(
        [CHAIN_PLAN, step({"q1": "Steven Spielberg"}, "Jaws was directed by Steven Spielberg."), "Steven Spielberg"]
    )
    # 4 calls: decompose and step q1 each keep room for a retry and the final answer; step q2 cannot
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm, LogicConfig(), budget=Budget(max_llm_calls=4))
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


@pytest.mark.parametrize("q", ["", "   \n\t"])
def test_empty_question_is_rejected(q):
    with pytest.raises(BadQuestionError):
        answer_on(LogicRoute(), q, RouteContext(corpus_kb(), ScriptedLLM([])))


# ---------------------------------------------------------------- memory and context


def test_rolling_memory_off_puts_raw_chunks_in_the_final_context():
    llm = ScriptedLLM(
        [CHAIN_PLAN, {"answers": {"q1": "Steven Spielberg"}}, {"answers": {"q2": "1946"}}, SUFFICIENT, "1946"]
    )
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm, LogicExperiment(rolling_memory=False))
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
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm, LogicExperiment(memory_words=20, final_chunks=0))
    assert len(ans.trace["memory"][0].split()) == 20
    final = llm.calls[-1]["messages"][-1]["content"]
    assert "Spielberg born 1946." in final and "Cincinnati" not in final  # summary, not raw chunks


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
    ans = answer_logic(CHAIN_Q, kb, llm, LogicExperiment(without_replacement=False))
    assert kb.searches[1]["exclude"] == []
    assert set(node(ans, "q1")["chunk_ids"]) & set(node(ans, "q2")["chunk_ids"])  # c1/c2 come back


# ---------------------------------------------------------------- settings and rendering


def test_config_documents_every_field_a_user_chooses_and_experiments_every_fixed_mechanism():
    h = LogicConfig.help()
    assert set(h) == {
        "k",
        "max_rounds",
        "memory_words",
        "short_prompts",
        "plan_forms",
        "form_evidence_tokens",
        "reflect_when_unsure",
        "reflect_unknown_only",
        "fold_final",
        "reshow_best",
        "keep_facts",
        "ground_retry",
        "cite_passages",
    }
    limits = {"max_llm_calls", "max_prompt_tokens", "max_seconds"}  # an experiment's own caps
    switches = {f.name for f in fields(Mechanisms)} - {"caps", "plan_prompt", "final_chunks"}
    lab_only = {"final_chunks", "compact_examples", "plan_questions", "plan_examples"}  # the route's hooks
    assert set(LogicExperiment.help()) == set(h) | switches | lab_only | limits
    assert all(LogicExperiment.help().values())
    assert all(h.values())
    c = LogicConfig()
    assert (c.k, c.max_rounds, c.memory_words) == (3, 3, 150)
    assert caps(c, None) == Budget(max_llm_calls=12, max_prompt_tokens=12000, max_seconds=300)  # LOGIC_CAPS
    assert caps(c, Budget(max_llm_calls=4)) == Budget(max_llm_calls=4, max_prompt_tokens=12000, max_seconds=300)


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


# ---------------------------------------------------------------- a step cut off at the token limit

RUNAWAY = Cut('{"memory":"Jaws was directed by Steven Spielberg. Jaws was directed by Steven Spielberg. Jaws was dir')


def test_a_step_cut_off_inside_its_memory_keeps_the_memory_and_asks_for_the_answers_alone():
    llm = ScriptedLLM(
        [
            CHAIN_PLAN,
            RUNAWAY,
            {"answers": {"q1": "Steven Spielberg"}},
            step({"q2": "December 18, 1946"}),
            SUFFICIENT,
            "December 18, 1946",
        ]
    )
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm)
    # the cut reply is not retried: the same prompt asks for the answers alone
    assert purposes(ans) == ["decompose", "step q1", "step-answers q1", "step q2", "reflect 1", "answer"]
    assert llm.calls[2]["messages"] == llm.calls[1]["messages"]
    assert list(llm.calls[2]["schema"]["properties"]) == ["answers"]
    assert node(ans, "q1")["answer"] == "Steven Spielberg"
    assert ans.trace["memory"][0] == "Jaws was directed by Steven Spielberg."
    assert any("memory cut off at the token limit" in f for f in ans.flags)
    assert ans.usage.llm_calls == 6 and ans.text == "December 18, 1946"


def test_a_step_cut_off_in_its_answers_falls_back_to_unknown_answers_without_a_retry():
    cut_late = Cut('{"memory":"Jaws was directed by Steven Spielberg.","answers":{"q1":"Steven Spiel')
    llm = ScriptedLLM([CHAIN_PLAN, cut_late, step({"q2": "1946"}), SUFFICIENT, "1946"])
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm)
    assert purposes(ans)[:3] == ["decompose", "step q1", "step q2"]
    assert any("step q1 output malformed" in f and "cut off at the token limit" in f for f in ans.flags)
    assert node(ans, "q1")["answer"] == ""
