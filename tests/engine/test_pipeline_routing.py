"""RoutedRAG as a library call: routing by the router's argmax, forced routes, bad input, and
answer_many's one router batch, concurrency and order.
No model loads: a tiny in-memory KB, a keyword router and scripted LLMs."""

from __future__ import annotations

import threading
import time

import pytest

import engine.core.routes.logic.solve as logic_mod
from engine.core.pipeline import RoutedRAG
from engine.floor.base.errors import BadQuestionError, KBEmptyError, LogicRouteError
from engine.floor.base.types import Completion
from tests.fakes import FakeRouter, ScriptedLLM, WordOverlapKB, fake_logic, make_rag

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


def test_a_question_to_an_empty_kb_is_refused_before_any_llm_call():
    llm = ScriptedLLM(["anything"])
    rag = RoutedRAG(kb=WordOverlapKB([]), llm=llm, router=FakeRouter())
    with pytest.raises(KBEmptyError, match="empty"):
        rag.answer("Who built the Ardmere Lighthouse?")
    with pytest.raises(KBEmptyError, match="empty"):
        rag.answer_many(["Who built the Ardmere Lighthouse?"])
    assert llm.calls == []
