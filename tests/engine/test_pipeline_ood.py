"""RoutedRAG's out-of-distribution guard: what each ood policy does with a question far from the
router's training questions, the flag it leaves, and `ask --ood-policy`.
No model loads: a tiny in-memory KB, a keyword router and scripted LLMs."""

from __future__ import annotations

import pytest

import engine.core.routes.logic.solve as logic_mod
from engine.core.pipeline import RoutedRAG
from engine.floor.base.errors import LogicRouteError
from tests.fakes import FakeGuardedRouter, FakeRouter, ScriptedLLM, fake_logic, make_rag

FAR_LOGIC_QUESTION = "When was the director of Inception born? [far]"  # the router says logic


def test_a_far_question_goes_to_chunk_with_escalation_by_default(monkeypatch):
    log: list = []
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic(log))
    llm = ScriptedLLM(rules={"Proposed answer": {"answered": True}, "Question:": "30 July 1970"})
    rag = make_rag(llm, router=FakeGuardedRouter())  # escalate off: the policy turns it on
    ans = rag.answer(FAR_LOGIC_QUESTION)
    assert ans.route == "chunk" and not log
    assert ans.trace["self_check"] == {"answered": True}  # escalation was on
    assert ans.trace["decision"]["route"] == "chunk"
    assert ans.trace["ood"] == {
        "similarity": 0.1,
        "threshold": 0.5,
        "far": True,
        "policy": "chunk-escalate",
        "router_route": "logic",
        "fallback": "chunk",
    }
    assert [f for f in ans.flags if "out of distribution" in f] == [
        "out of distribution: similarity 0.10 to the router's training questions, below its threshold 0.50; "
        "chunk with escalation instead of the router's logic (ood policy chunk-escalate)"
    ]


def test_a_far_question_escalates_when_the_chunk_answer_fails(monkeypatch):
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())
    llm = ScriptedLLM(replies=["unknown", "plan", "30 July 1970"])
    ans = make_rag(llm, router=FakeGuardedRouter(), keep_absence=False).answer(FAR_LOGIC_QUESTION)
    assert ans.route == "logic" and ans.trace["escalated_from"]["route"] == "chunk"
    assert any(f.startswith("out of distribution") for f in ans.flags)  # not prefixed as the first attempt's
    assert any("escalated from chunk" in f for f in ans.flags)


@pytest.mark.parametrize(
    ("policy", "route", "calls"),
    [("chunk", "chunk", 1), ("logic", "logic", 2), ("route", "logic", 2)],
)
def test_each_ood_policy_routes_a_far_question(monkeypatch, policy, route, calls):
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())
    llm = ScriptedLLM(rules={"Decompose": "plan", "Final answer": "30 July 1970", "Question:": "30 July 1970"})
    ans = make_rag(llm, router=FakeGuardedRouter(), ood_policy=policy).answer(FAR_LOGIC_QUESTION)
    assert ans.route == route and len(llm.calls) == calls  # "chunk" escalates only when asked to: no self-check
    assert ans.trace["ood"]["policy"] == policy and ans.trace["ood"]["far"]
    assert ans.trace["ood"]["fallback"] == (None if policy == "route" else route)
    ood_flags = [f for f in ans.flags if f.startswith("out of distribution")]
    assert len(ood_flags) == 1 and ood_flags[0].endswith(f"(ood policy {policy})")


def test_a_near_question_keeps_the_routers_route_unflagged(monkeypatch):
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())
    llm = ScriptedLLM(rules={"Decompose": "plan", "Final answer": "30 July 1970"})
    router = FakeGuardedRouter()
    ans = make_rag(llm, router=router).answer("When was the director of Inception born?")
    assert ans.route == "logic" and ans.flags == []
    assert ans.trace["ood"]["far"] is False and ans.trace["ood"]["fallback"] is None
    assert router.ood_batches == [["When was the director of Inception born?"]]


def test_forced_routes_and_routers_without_a_guard_are_not_measured():
    router = FakeGuardedRouter()
    llm = ScriptedLLM(rules={"Question:": "Warsaw"})
    ans = make_rag(llm, router=router).answer("Where was Marie Curie born? [far]", route="chunk")
    assert ans.trace["ood"] is None and ans.flags == [] and router.ood_batches == []
    ans = make_rag(llm, router=FakeRouter()).answer("Where was Marie Curie born? [far]")  # no .ood: no guard
    assert ans.route == "chunk" and ans.trace["ood"] is None and ans.flags == []


def test_answer_many_guards_each_question_in_one_batch(monkeypatch):
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())
    llm = ScriptedLLM(rules={"Decompose": "plan", "Final answer": "L", "Question:": "C"})
    router = FakeGuardedRouter()
    qs = ["When was the director of Inception born?", FAR_LOGIC_QUESTION, "Where was Curie born? [far]"]
    answers = make_rag(llm, router=router, ood_policy="chunk").answer_many(qs, concurrency=1)
    assert [a.route for a in answers] == ["logic", "chunk", "chunk"]
    assert [bool(a.flags) for a in answers] == [False, True, True]
    assert [a.trace["ood"]["fallback"] for a in answers] == [None, "chunk", "chunk"]
    assert router.ood_batches == [qs]


def test_unknown_ood_policy_is_refused():
    with pytest.raises(LogicRouteError, match="ood_policy"):
        make_rag(ScriptedLLM(), ood_policy="ignore")


def test_ask_takes_the_ood_policy_and_prints_the_flag(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from engine.face.cli import main

    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())
    llm = ScriptedLLM(rules={"Decompose": "plan", "Final answer": "30 July 1970"})

    def open_fake(cls, kb, *, ood_policy, **_):
        return make_rag(llm, router=FakeGuardedRouter(), ood_policy=ood_policy)

    monkeypatch.setattr(RoutedRAG, "open", classmethod(open_fake))
    args = ["ask", FAR_LOGIC_QUESTION, "--kb", str(tmp_path), "--set", "ood_policy=logic"]
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "route: logic" in res.output
    assert "flag: out of distribution" in res.output and "(ood policy logic)" in res.output
    res = CliRunner().invoke(main, [*args[:-1], "ood_policy=sometimes"])
    assert res.exit_code == 2 and "sometimes" in res.output
