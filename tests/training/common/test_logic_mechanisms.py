"""The logic route's lab-only mechanisms (training/common/logic_mechanisms.py), as specs: the
decomposition's other prompt forms (example plans as lines, the plan as a list of question
strings, only the example plans nearest in form), each sent by the route when a LogicExperiment
asks for it, and at the product's values the route's own prompt. Runs on ScriptedLLM + the
keyword-overlap fake KB with a bag-of-words embedder."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from engine.core.routes.logic.plan import placeholders
from engine.core.routes.logic.solve import answer_logic
from engine.floor.prompts import logic as serving
from tests.engine.logic_scripts import (
    CHAIN_PLAN,
    CHAIN_Q,
    COMPARE_PLAN,
    COMPARE_Q,
    CORPUS,
    SUFFICIENT,
    corpus_kb,
    lean_kb,
    node,
    plan,
    purposes,
    step,
)
from tests.fakes import ScriptedLLM
from training.common.logic_experiment import LogicExperiment, experiment
from training.common.logic_mechanisms import (
    DECOMPOSE_EXAMPLE_QUESTIONS,
    decompose_messages,
    nearest_examples,
    questions_schema,
)

LEAN = LogicExperiment(evidence_tokens=100, short_prompts=True, reflect_when_unsure=True, fold_final=True)


def test_without_a_prompt_form_the_experiments_prompt_is_the_routes_and_no_hook_is_set():
    for short in (False, True):
        assert decompose_messages(CHAIN_Q, short) == serving.decompose_messages(CHAIN_Q, short)
    for name in ("paper", "lean", "grounded", "lean-grounded"):
        m = experiment(name).mechanisms()
        assert m.plan_prompt is None and m.final_chunks is None
    m = LogicExperiment(plan_examples=1, final_chunks=2).mechanisms()
    assert m.plan_prompt is not None and m.final_chunks is not None


def test_a_bad_plan_in_the_experiments_object_form_is_retried_as_the_route_does():
    bad = plan(("q1", "When was #q2 born?", ["q2"]), ("q2", "Who is the director of film #q1?", ["q1"]))
    replies = [bad, CHAIN_PLAN, step({"q1": "Steven Spielberg"}), step({"q2": "December 18, 1946"}), SUFFICIENT, "1946"]
    route, lab = ScriptedLLM(list(replies)), ScriptedLLM(list(replies))
    answer_logic(CHAIN_Q, lean_kb(), route, LogicExperiment())
    answer_logic(CHAIN_Q, lean_kb(), lab, LogicExperiment(plan_examples=7))
    assert route.calls[1]["messages"] == lab.calls[1]["messages"]  # all seven plans shown: the route's own
    assert "may only depend on earlier ids" in lab.calls[1]["messages"][-1]["content"]


def test_compact_examples_show_every_plan_as_lines_in_one_system_message_and_the_route_sends_them():
    q = "Who is older, A or B?"
    chat, compact = decompose_messages(q, True), decompose_messages(q, True, compact=True)
    assert [m["role"] for m in compact] == ["system", "user"] and compact[-1]["content"] == f"Question: {q}"
    system = compact[0]["content"]
    assert system.startswith(chat[0]["content"])  # the constant text first: one shared prefix
    for m in chat[1:-1]:  # every example question, and every sub-question of its plan
        if m["role"] == "user":
            assert m["content"] in system
        else:
            assert all(sq["question"] in system for sq in json.loads(m["content"])["subquestions"])
    assert "q2 (after q1): What is the date of birth of #q1?" in system
    assert len(system) < 0.75 * sum(len(m["content"]) for m in chat[:-1])  # in tokens: 301 vs 479
    llm = ScriptedLLM([plan(("q1", "Who directed the film Jaws?", [])), "Steven Spielberg"])
    answer_logic("Who directed the film Jaws?", lean_kb(), llm, replace(LEAN, compact_examples=True))
    assert llm.calls[0]["messages"] == decompose_messages("Who directed the film Jaws?", True, compact=True)


def test_a_question_list_plan_loses_nothing_of_the_example_plans_and_is_shorter():
    q = "Who is older, A or B?"
    objects, questions = decompose_messages(q, True), decompose_messages(q, True, questions=True)
    assert [m["content"] for m in questions if m["role"] == "user"] == [
        m["content"] for m in objects if m["role"] == "user"
    ]
    for o, s in zip(objects[1:-1], questions[1:-1]):
        if o["role"] == "assistant":  # the same plan: ids by position, dependencies = placeholders
            nodes = json.loads(o["content"])["subquestions"]
            strings = json.loads(s["content"])["subquestions"]
            assert strings == [n["question"] for n in nodes]
            assert [n["id"] for n in nodes] == [f"q{i}" for i in range(1, len(nodes) + 1)]
            assert all(sorted(n["depends_on"]) == sorted(placeholders(n["question"])) for n in nodes)
    size = lambda msgs: sum(len(m["content"]) for m in msgs)  # noqa: E731
    assert size(questions) < 0.8 * size(objects)
    assert questions_schema()["properties"]["subquestions"]["items"]["type"] == "string"


def test_a_question_list_plan_is_solved_as_its_placeholders_say():
    chain = {"subquestions": ["Who is the director of film Jaws?", "When was #q1 born?"]}
    llm = ScriptedLLM([chain, step({"q1": "Steven Spielberg"}), step({"q2": "December 18, 1946"}), SUFFICIENT])
    cfg = replace(LEAN, plan_questions=True)
    ans = answer_logic(CHAIN_Q, lean_kb(), llm, cfg)
    assert llm.calls[0]["messages"] == decompose_messages(CHAIN_Q, True, questions=True)
    assert llm.calls[0]["schema"] == questions_schema()
    assert ans.trace["dag"]["edges"] == [["q1", "q2"]] and ans.text == "December 18, 1946"
    assert "When was Steven Spielberg born?" in llm.calls[2]["messages"][-1]["content"]


def test_a_question_list_plan_with_a_cycle_is_regenerated_with_its_problem_stated():
    bad = {"subquestions": ["When was #q2 born?", "Who is the director of film #q1?"]}
    good = {"subquestions": ["Who is the director of film Jaws?", "When was #q1 born?"]}
    llm = ScriptedLLM([bad, good, step({"q1": "Steven Spielberg"}), step({"q2": "December 18, 1946"}), SUFFICIENT])
    ans = answer_logic(CHAIN_Q, lean_kb(), llm, replace(LEAN, plan_questions=True))
    assert purposes(ans)[:2] == ["decompose", "decompose-retry"]
    retry = llm.calls[1]["messages"][-1]["content"]
    assert "cycle" in retry and "may only use the answers of earlier ones" in retry
    assert ans.trace["dag"]["edges"] == [["q1", "q2"]]


# ---------------------------------------------------------------- example plans chosen by form


def test_the_decomposition_shows_only_the_chosen_example_plans_in_the_prompts_order():
    pool = DECOMPOSE_EXAMPLE_QUESTIONS
    msgs = decompose_messages("Q?", True, examples=[pool[4], pool[1]])
    shown = [m["content"] for m in msgs[1:-1] if m["role"] == "user"]
    assert shown == [f"Question: {pool[1]}", f"Question: {pool[4]}"]
    assert [m["role"] for m in decompose_messages("Q?", True, examples=[])] == ["system", "user"]
    # the pool is all seven plans, the short prompt's fixed five among them
    assert len(pool) == 7 and len(decompose_messages("Q?", True)) == 2 + 2 * 5


@pytest.mark.embedder
def test_the_nearest_example_plans_are_those_of_the_questions_form(real_embedder):
    older = nearest_examples("Who was born first, Jane Austen or Mark Twain?", real_embedder, 1)
    assert older == ["Who is older, Ann Lee or Tom Ford?"]
    grandfather = nearest_examples("Who is the paternal grandfather of Henry Tudor?", real_embedder, 1)
    assert grandfather == ["Who is the paternal grandfather of Anne Boleyn?"]
    two = nearest_examples("Who is the paternal grandfather of Henry Tudor?", real_embedder, 2)
    assert len(two) == 2 and grandfather[0] in two
    assert two == [q for q in DECOMPOSE_EXAMPLE_QUESTIONS if q in two]  # in the prompt's order
    assert len(nearest_examples("Q?", real_embedder, 99)) == 7


def test_the_route_sends_the_chosen_examples_and_the_trace_names_them():
    llm = ScriptedLLM([plan(("q1", "Who directed the film Jaws?", [])), "Steven Spielberg"])
    kb = lean_kb()
    ans = answer_logic("Who directed the film Jaws?", kb, llm, replace(LEAN, plan_examples=2))
    chosen = ans.trace["plan_examples"]
    assert len(chosen) == 2 and chosen == nearest_examples("Who directed the film Jaws?", kb.embedder, 2)
    assert llm.calls[0]["messages"] == decompose_messages("Who directed the film Jaws?", True, examples=chosen)
    with pytest.raises(ValueError, match="plan_examples"):
        LogicExperiment(plan_examples=-1)


# ---------------------------------------------------------------- the last hop's raw chunks


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
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm, LogicExperiment(k=1, final_chunks=3))
    final = llm.calls[-1]["messages"][-1]["content"]
    q2_chunk = node(ans, "q2")["chunk_ids"][0]
    assert "Spielberg born 1946." in final and CORPUS[q2_chunk].split(": ", 1)[1] in final
    assert "Jaws is a 1975 thriller" not in final  # the first hop is in the memory only


def test_a_comparison_has_no_single_last_hop_so_its_final_context_stays_the_memory():
    llm = ScriptedLLM(
        [COMPARE_PLAN, step({"q1": "1936", "q2": "1961"}, "Ann Lee 1936; Tom Ford 1961."), SUFFICIENT, "Ann Lee"]
    )
    answer_logic(COMPARE_Q, corpus_kb(), llm, LogicExperiment(final_chunks=3))
    final = llm.calls[-1]["messages"][-1]["content"]
    assert "Ann Lee 1936; Tom Ford 1961." in final and "Manchester" not in final
