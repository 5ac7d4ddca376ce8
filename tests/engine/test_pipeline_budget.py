"""RoutedRAG budgets: limits passed on to the logic route, validation, a logic share calibrated
on the batch or into a threshold, thresholds files, and a prompt-token budget too small for the
route that will answer refused up front (never a blank answer).
No model loads: small KBs, a keyword router and scripted LLMs."""

from __future__ import annotations

import json

import pytest

import engine.core.routes.logic.solve as logic_mod
from engine.core.config import thresholds_budget
from engine.core.pipeline import Budget, RoutedRAG
from engine.core.routes import RouteContext
from engine.floor.base.errors import LogicRouteError
from tests.fakes import FakeRouter, HashedBowEmbedder, ScriptedLLM, fake_logic, layered_kb, make_rag


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


def test_a_prompt_token_budget_no_call_fits_in_is_refused_up_front_naming_the_route_and_the_smallest_that_works():
    from engine.floor.llm.base import estimate_prompt_tokens

    llm = ScriptedLLM(rules={"": "Ann Lee founded it."})
    rag = make_rag(llm)
    question = "Who founded the company?"
    with pytest.raises(LogicRouteError) as forced:
        rag.answer(question, route="logic", budget=Budget(max_prompt_tokens=25))
    with pytest.raises(LogicRouteError) as auto:
        rag.answer_many([question], budget=Budget(max_prompt_tokens=25))
    assert llm.calls == []  # not 0 calls and a blank answer, exit 0
    need = int(str(forced.value).rsplit(" ", 1)[1])
    assert str(forced.value) == (
        f"max_prompt_tokens=25 allows no LLM call: the answer prompt for this question takes about {need} tokens "
        f"on the logic route; give at least {need}"
    )
    assert str(auto.value).endswith(
        f"on the chunk route (the largest of the routes the router may pick); give at least {need}"
    )
    # the smallest budget named is enough: the logic route, made to stop at once, makes its final answer
    ans = rag.answer(question, route="logic", budget=Budget(max_prompt_tokens=need))
    assert ans.text == "Ann Lee founded it." and len(llm.calls) == 1
    assert estimate_prompt_tokens(llm.calls[0]["messages"]) == need


@pytest.fixture(scope="module")
def layered(tmp_path_factory):
    """A KB with summary layers (larger prompts than the chunk route's) and a hashed embedder."""
    return layered_kb(tmp_path_factory.mktemp("kb") / "kb", HashedBowEmbedder(dim=128))


def smallest(rag, question: str, route: str) -> int:
    """The budget the refusal of a 25-token one names."""
    with pytest.raises(LogicRouteError) as err:
        rag.answer(question, route=route, budget=Budget(max_prompt_tokens=25))
    return int(str(err.value).rsplit(" ", 1)[1])


def test_the_smallest_budget_is_the_answering_routes_and_with_auto_routing_the_largest_routes(layered):
    from engine.floor.llm.base import estimate_prompt_tokens

    llm = ScriptedLLM(rules={"": "1946"})  # a reply no passage of `layered` holds: kept as given, not withheld
    rag = RoutedRAG(kb=layered, llm=llm, router=FakeRouter(), cache=False, abstain_ungrounded=False)
    q = "When was the director of film Jaws born?"
    need = {route: smallest(rag, q, route) for route in ("chunk", "summary", "logic", "auto")}
    assert need["summary"] > need["chunk"] == need["logic"] and need["auto"] == need["summary"]
    with pytest.raises(LogicRouteError, match="on the summary route;"):
        rag.answer(q, route="summary", budget=Budget(max_prompt_tokens=need["chunk"]))
    assert rag.answer(q, route="summary", budget=Budget(max_prompt_tokens=need["summary"])).text == "1946"
    assert [estimate_prompt_tokens(c["messages"]) for c in llm.calls] == [need["summary"]]


class UnknownSteps:
    """An LLM whose every sub-answer is "unknown" (nothing to fall back on when the final answer is
    not made) and whose final answer is FINAL; prompt tokens as estimated."""

    name = "fake:unknown-steps"

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0):
        from engine.floor.base.types import Completion
        from engine.floor.llm.base import estimate_prompt_tokens
        from engine.floor.llm.structured import chat_structured

        def send(msgs):
            wanted = set((schema or {}).get("required") or ())
            if "answers" in wanted:
                ids = schema["properties"]["answers"]["required"]
                text = json.dumps({"memory": "Nothing found yet.", "answers": dict.fromkeys(ids, "unknown")})
            else:
                text = json.dumps({"sufficient": True, "missing": []}) if "sufficient" in wanted else FINAL
            return Completion(text=text, prompt_tokens=estimate_prompt_tokens(msgs), completion_tokens=5, seconds=0.0)

        return send(messages) if schema is None else chat_structured(send, messages, schema)


FINAL = "December 18, 1946"


@pytest.mark.parametrize(
    "question", ["When was the director of film Jaws born?", "Who was born first, Ann Lee or Tom Ford?"]
)
def test_from_the_smallest_budget_named_up_a_logic_answer_is_never_blank(layered, question):
    # the plans are read off the questions' forms: their first step retrieves before its call is weighed
    rag = RoutedRAG(kb=layered, llm=UnknownSteps(), router=FakeRouter(), cache=False)
    need = smallest(rag, question, "logic")
    ctx = RouteContext(rag.kb, rag.get_llm(), rag.k, rag.style)
    for tokens in range(need, 6 * need, 41):
        ans = rag.route("logic", Budget(max_prompt_tokens=tokens)).answer(question, ctx)
        assert ans.text == FINAL and ans.usage.prompt_tokens <= tokens, (tokens, ans.flags)


def test_ask_refuses_a_budget_too_small_for_the_routes_it_may_take_then_answers_with_the_one_named(
    layered, monkeypatch, tmp_path
):
    from click.testing import CliRunner

    from engine.face.cli import main

    llm = UnknownSteps()
    monkeypatch.setattr(
        RoutedRAG, "open", classmethod(lambda cls, kb, **options: RoutedRAG(kb=layered, router=FakeRouter(), **options))
    )

    def ask(tokens: int):
        args = ["ask", "When was the director of film Jaws born?", "--kb", str(tmp_path)]
        with monkeypatch.context() as m:
            m.setattr(RoutedRAG, "get_llm", lambda self: llm)
            return CliRunner().invoke(main, [*args, "--set", f"budget.max_prompt_tokens={tokens}"])

    refused = ask(25)
    assert refused.exit_code == 2 and refused.output.count("\n") == 1
    need = int(refused.output.rsplit(" ", 1)[1])
    answered = ask(need)
    assert answered.exit_code == 0, answered.output
    assert "route: logic" in answered.output and "answer: \n" not in answered.output, answered.output
    assert "cost: 0 LLM calls" not in answered.output  # its final answer was made
