"""RoutedRAG budgets: limits passed on to the logic route, validation, a logic share calibrated
on the batch or into a threshold, and thresholds files.
No model loads: a tiny in-memory KB, a keyword router and scripted LLMs."""

from __future__ import annotations

import pytest

import engine.routes.logic.solve as logic_mod
from engine.base.errors import LogicRouteError
from engine.config import thresholds_budget
from engine.pipeline import Budget
from tests.fakes import ScriptedLLM, fake_logic, make_rag


def test_budget_limits_reach_the_logic_route_beside_its_config(monkeypatch):
    log: list = []
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic(log))
    rag = make_rag(ScriptedLLM(rules={"Decompose": "plan", "Final answer": "x"}), k=5)
    rag.answer("Who?", route="logic", budget=Budget(max_llm_calls=4, max_prompt_tokens=900, max_seconds=20))
    cfg, got = log[0]["config"], log[0]["budget"]
    assert cfg.k == 5 and got == Budget(max_llm_calls=4, max_prompt_tokens=900, max_seconds=20)
    # the instance default applies when the call gives none
    rag.budget = Budget(max_llm_calls=3)
    rag.answer("Who?", route="logic")
    assert log[1]["budget"].max_llm_calls == 3


def test_budget_validation():
    with pytest.raises(LogicRouteError):
        Budget(max_llm_calls=0)
    with pytest.raises(LogicRouteError):
        Budget(logic_share=1.5)


def test_logic_share_is_calibrated_on_the_batch(monkeypatch):
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())
    llm = ScriptedLLM(rules={"Decompose": "plan", "Final answer": "L", "Question:": "C"})
    rag = make_rag(llm)
    qs = [f"q{i} [p={p}]" for i, p in enumerate((0.9, 0.4, 0.3, 0.1))]
    routes = [a.route for a in rag.answer_many(qs, concurrency=1, budget=Budget(logic_share=0.5))]
    # argmax would send only the first to logic; a 50% share sends the top two by P(logic)
    assert routes == ["logic", "logic", "chunk", "chunk"]
    assert [a.route for a in rag.answer_many(qs, concurrency=1)] == ["logic", "chunk", "chunk", "chunk"]


def test_calibrate_gives_a_threshold_budget_for_single_answers(monkeypatch):
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())
    rag = make_rag(ScriptedLLM(rules={"Decompose": "plan", "Final answer": "L", "Question:": "C"}))
    sample = [f"s{i} [p={p}]" for i, p in enumerate((0.8, 0.6, 0.4, 0.2))]
    budget = rag.calibrate(sample, logic_share=0.25)
    assert budget.threshold == pytest.approx(0.8)
    assert rag.answer("x [p=0.85]", budget=budget).route == "logic"
    ans = rag.answer("y [p=0.7]", budget=budget)
    assert ans.route == "chunk" and ans.trace["decision"]["policy"] == "threshold"
    with pytest.raises(LogicRouteError, match="calibrate"):
        rag.answer("z [p=0.7]", budget=Budget(logic_share=0.3))


def test_budget_from_a_thresholds_file(tmp_path):
    from router.policy import Policy

    Policy(kind="threshold", route="logic", threshold=0.42, target_share=0.3).save(tmp_path / "t.json")
    b = thresholds_budget(tmp_path / "t.json", max_llm_calls=6)
    assert (b.threshold, b.logic_share, b.max_llm_calls) == (0.42, 0.3, 6)
    with pytest.raises(LogicRouteError):
        Budget.from_policy(Policy())  # argmax is no threshold


# ---------------------------------------------------------------- a budget no call fits in


def test_a_prompt_token_budget_no_call_fits_in_is_refused_up_front_naming_the_smallest_that_works():
    from engine.llm.base import estimate_prompt_tokens

    llm = ScriptedLLM(rules={"": "Ann Lee founded it."})
    rag = make_rag(llm)
    question = "Who founded the company?"
    for answer in (
        lambda b: rag.answer(question, route="logic", budget=b),
        lambda b: rag.answer_many([question], budget=b),
    ):
        with pytest.raises(LogicRouteError) as err:
            answer(Budget(max_prompt_tokens=25))
        assert llm.calls == []  # not 0 calls and a blank answer, exit 0
    message = str(err.value)
    need = int(message.rsplit(" ", 1)[1])
    assert message == (
        "max_prompt_tokens=25 allows no LLM call: the answer prompt for this question and its 3 passages "
        f"takes about {need} tokens; give at least {need}"
    )
    # the smallest budget named is enough: the logic route, made to stop at once, makes its final answer
    ans = rag.answer(question, route="logic", budget=Budget(max_prompt_tokens=need))
    assert ans.text == "Ann Lee founded it." and len(llm.calls) == 1
    assert estimate_prompt_tokens(llm.calls[0]["messages"]) == need
