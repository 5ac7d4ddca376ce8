"""RoutedRAG as a library call: routing, forced routes, batching, concurrency, budgets and
escalation. No model loads: a tiny in-memory KB, a keyword router and scripted LLMs."""

from __future__ import annotations

import threading
import time

import pytest

import engine.routes.logic.solve as logic_mod
from engine.base.errors import BadQuestionError, LogicRouteError
from engine.base.types import Answer, Completion, Usage
from engine.llm.base import call_llm
from engine.pipeline import Budget, RoutedRAG
from engine.routes.common import looks_unanswered
from tests.fakes import FakeGuardedRouter, FakeRouter, ScriptedLLM, WordOverlapKB

# ---------------------------------------------------------------- fakes shared with test_benchmark


PASSAGES = {
    "Curie": "Marie Curie was born in Warsaw in 1867.",
    "Nolan": "Christopher Nolan was born on 30 July 1970.",
    "Inception": "Inception is a 2010 film directed by Christopher Nolan.",
}


def fake_logic(calls_log: list | None = None, reply: str = "30 July 1970"):
    """A stand-in for answer_logic: two LLM calls booked like the real route."""

    def answer_logic(question, kb, llm, config=None):
        if calls_log is not None:
            calls_log.append({"question": question, "config": config})
        usage, trace = Usage(), {"route": "logic", "llm_calls": [], "flags": [], "dag": {"nodes": []}}
        call_llm(
            llm, [{"role": "user", "content": f"Decompose: {question}"}], purpose="decompose", usage=usage, trace=trace
        )
        c = call_llm(
            llm, [{"role": "user", "content": f"Final answer: {question}"}], purpose="answer", usage=usage, trace=trace
        )
        return Answer(text=c.text or reply, route="logic", usage=usage, trace=trace)

    return answer_logic


def make_rag(llm, **kw) -> RoutedRAG:
    return RoutedRAG(kb=WordOverlapKB.titled(PASSAGES), llm=llm, router=kw.pop("router", FakeRouter()), **kw)


# ---------------------------------------------------------------- single answers


class SlowRouter(FakeRouter):
    """FakeRouter that takes 0.03 s per batch."""

    def probs(self, questions):
        time.sleep(0.03)
        return super().probs(questions)


def test_auto_route_uses_router_argmax():
    llm = ScriptedLLM(rules={"Question:": "Warsaw"}, delay=0.02)
    rag = make_rag(llm, router=SlowRouter())
    ans = rag.answer("In which city was Marie Curie born?")
    assert ans.route == "chunk" and ans.text == "Warsaw"
    assert ans.route_probs == pytest.approx({"chunk": 0.7, "summary": 0.2, "logic": 0.1})
    assert ans.trace["decision"] == {"route": "chunk", "policy": "argmax"}
    assert ans.usage.llm_calls == 1
    # the answer's wall time covers routing (0.03 s) and the route's LLM call (0.02 s)
    assert ans.usage.seconds >= 0.05


def test_forced_route_skips_the_router(monkeypatch):
    router = FakeRouter()
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())
    rag = make_rag(ScriptedLLM(rules={"Decompose": "plan", "Final answer": "30 July 1970"}), router=router)
    ans = rag.answer("In which city was Marie Curie born?", route="logic")
    assert ans.route == "logic" and ans.route_probs is None
    assert ans.trace["decision"]["policy"] == "forced"
    assert router.batches == []


def test_bad_route_and_empty_question():
    rag = make_rag(ScriptedLLM())
    with pytest.raises(LogicRouteError, match="unknown route"):
        rag.answer("Who?", route="graph")
    with pytest.raises(BadQuestionError):
        rag.answer("   ")
    with pytest.raises(BadQuestionError):
        rag.answer_many(["fine question", ""])


# ---------------------------------------------------------------- many answers


def test_answer_many_keeps_order_and_routes_in_one_batch(monkeypatch):
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())
    llm = ScriptedLLM(
        rules={
            "Final answer": "logic-answer",
            "Decompose": "plan",
            "Question: Where was Curie": "Warsaw",
            "Question: When was Nolan": "1970",
            "Question: When did Inception": "2010",
        }
    )
    router = FakeRouter()
    rag = make_rag(llm, router=router)
    qs = [
        "Where was Curie born?",
        "When was the director of Inception born?",
        "When was Nolan born?",
        "When did Inception come out?",
    ]
    answers = rag.answer_many(qs, concurrency=1)
    assert [a.text for a in answers] == ["Warsaw", "logic-answer", "1970", "2010"]
    assert [a.route for a in answers] == ["chunk", "logic", "chunk", "chunk"]
    assert router.batches == [qs]  # one router call (one embedding batch) for all questions


class SlowThreadSafeLLM:
    """Answers with the question's number after a delay that shrinks with it, so answers finish
    out of order; records how many calls overlapped."""

    name = "fake:slow"

    def __init__(self):
        self.lock = threading.Lock()
        self.active = 0
        self.max_active = 0

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0):
        last = messages[-1]["content"]
        num = int(last.split("number ")[1].split("?")[0])
        with self.lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            time.sleep(0.02 * (8 - num))
        finally:
            with self.lock:
                self.active -= 1
        return Completion(text=f"answer {num}", prompt_tokens=10, completion_tokens=2, seconds=0.01)


def test_answer_many_runs_concurrently_and_preserves_order():
    llm = SlowThreadSafeLLM()
    rag = make_rag(llm)
    qs = [f"What is number {i}?" for i in range(8)]
    answers = rag.answer_many(qs, concurrency=4, route="chunk")
    assert [a.text for a in answers] == [f"answer {i}" for i in range(8)]
    assert 2 <= llm.max_active <= 4
    assert all(a.usage.llm_calls == 1 for a in answers)


def test_answer_many_empty():
    assert make_rag(ScriptedLLM()).answer_many([]) == []


# ---------------------------------------------------------------- budgets


def test_budget_limits_reach_the_logic_config(monkeypatch):
    log: list = []
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic(log))
    rag = make_rag(ScriptedLLM(rules={"Decompose": "plan", "Final answer": "x"}), k=5)
    rag.answer("Who?", route="logic", budget=Budget(max_llm_calls=4, max_prompt_tokens=900, max_seconds=20))
    cfg = log[0]["config"]
    assert (cfg.k, cfg.max_llm_calls, cfg.max_prompt_tokens, cfg.max_seconds) == (5, 4, 900, 20)
    # the instance default applies when the call gives none
    rag.budget = Budget(max_llm_calls=3)
    rag.answer("Who?", route="logic")
    assert log[1]["config"].max_llm_calls == 3


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


# ---------------------------------------------------------------- escalation


@pytest.mark.parametrize(
    "text", ["", "Unknown", "I don't know.", "The passages do not say", "not mentioned in the passages", "N/A"]
)
def test_looks_unanswered_yes(text):
    assert looks_unanswered(text)


@pytest.mark.parametrize("text", ["Warsaw", "no", "None of the Above (band)", "30 July 1970", "Unknown Pleasures"])
def test_looks_unanswered_no(text):
    assert looks_unanswered(text) is None


def test_escalation_from_an_unknown_answer(monkeypatch):
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())
    llm = ScriptedLLM(replies=["unknown", "plan", "30 July 1970"])
    rag = make_rag(llm)
    ans = rag.answer("When was the film maker of Inception born?", route="chunk", escalate=True)
    assert ans.route == "logic" and ans.text == "30 July 1970"
    first = ans.trace["escalated_from"]
    assert first["route"] == "chunk" and first["text"] == "unknown" and "does not know" in first["reason"]
    assert first["usage"]["llm_calls"] == 1
    # usage counts both attempts; every call of both is in the trace
    assert ans.usage.llm_calls == 3 == len(ans.trace["llm_calls"])
    assert [c["route"] for c in ans.trace["llm_calls"]] == ["chunk", "logic", "logic"]
    assert ans.usage.prompt_tokens == sum(c.get("prompt_tokens", 0) for c in ans.trace["llm_calls"])
    assert any("escalated from chunk" in f for f in ans.flags)
    assert len(llm.calls) == 3  # an "unknown" answer needs no self-check call


def test_escalation_by_self_check(monkeypatch):
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())
    llm = ScriptedLLM(
        rules={
            "Proposed answer": {"answered": False},
            "Decompose": "plan",
            "Final answer": "30 July 1970",
            "Question:": "2010",
        }
    )
    rag = make_rag(llm)
    ans = rag.answer("When was the director of Inception born?", route="chunk", escalate=True)
    assert ans.route == "logic" and ans.text == "30 July 1970"
    assert ans.trace["escalated_from"]["reason"].startswith("self-check")
    assert ans.trace["escalated_from"]["trace"]["self_check"] == {"answered": False}
    assert [c["purpose"] for c in ans.trace["llm_calls"]] == ["answer", "self_check", "decompose", "answer"]
    assert ans.usage.llm_calls == 4
    # the self-check saw the passages the chunk route used
    check = next(c for c in llm.calls if c["schema"])
    assert "Christopher Nolan" in check["messages"][-1]["content"]


def test_self_check_true_keeps_the_cheap_answer():
    llm = ScriptedLLM(rules={"Proposed answer": {"answered": True}, "Question:": "Warsaw"})
    rag = make_rag(llm, escalate=True)  # instance default
    ans = rag.answer("Where was Marie Curie born?")
    assert ans.route == "chunk" and ans.text == "Warsaw"
    assert "escalated_from" not in ans.trace
    assert ans.usage.llm_calls == 2 and ans.trace["self_check"] == {"answered": True}


def test_escalation_is_off_by_default():
    llm = ScriptedLLM(replies=["unknown"])
    ans = make_rag(llm).answer("Where was Marie Curie born?")
    assert ans.route == "chunk" and ans.text == "unknown" and len(llm.calls) == 1


def test_escalation_respects_the_budget(monkeypatch):
    log: list = []
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic(log))
    llm = ScriptedLLM(replies=["unknown", "unknown", "plan", "x"])
    rag = make_rag(llm)
    ans = rag.answer("Where?", route="chunk", escalate=True, budget=Budget(max_llm_calls=2))
    assert ans.route == "chunk" and any("too little budget" in f for f in ans.flags) and not log
    ans = rag.answer("Where?", route="chunk", escalate=True, budget=Budget(max_llm_calls=5))
    assert ans.route == "logic" and log[0]["config"].max_llm_calls == 4  # 5 minus the chunk call


def test_failed_self_check_keeps_the_answer_visibly():
    llm = ScriptedLLM(
        rules={"Proposed answer": "maybe", "Reply again with one JSON object": "still not json", "Question:": "Warsaw"}
    )
    ans = make_rag(llm).answer("Where was Marie Curie born?", escalate=True)
    assert ans.route == "chunk" and ans.text == "Warsaw"
    assert any("self-check failed" in f for f in ans.flags)
    assert ans.usage.llm_calls == 3  # the answer + both failed attempts are booked


def test_budget_from_a_thresholds_file(tmp_path):
    from router.policy import Policy

    Policy(kind="threshold", route="logic", threshold=0.42, target_share=0.3).save(tmp_path / "t.json")
    b = Budget.from_policy(tmp_path / "t.json", max_llm_calls=6)
    assert (b.threshold, b.logic_share, b.max_llm_calls) == (0.42, 0.3, 6)
    with pytest.raises(LogicRouteError):
        Budget.from_policy(Policy())  # argmax is no threshold


# ---------------------------------------------------------------- out-of-distribution guard

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
    ans = make_rag(llm, router=FakeGuardedRouter()).answer(FAR_LOGIC_QUESTION)
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

    from engine.cli import main

    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())
    llm = ScriptedLLM(rules={"Decompose": "plan", "Final answer": "30 July 1970"})

    def open_fake(cls, kb, *, ood_policy, **_):
        return make_rag(llm, router=FakeGuardedRouter(), ood_policy=ood_policy)

    monkeypatch.setattr(RoutedRAG, "open", classmethod(open_fake))
    args = ["ask", FAR_LOGIC_QUESTION, "--kb", str(tmp_path), "--ood-policy", "logic"]
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "route: logic" in res.output
    assert "flag: out of distribution" in res.output and "(ood policy logic)" in res.output
    res = CliRunner().invoke(main, [*args[:-1], "sometimes"])
    assert res.exit_code == 2 and "sometimes" in res.output
