"""RoutedRAG escalation: an unanswered cheap answer (by its text or by a self-check) goes on to
the logic route, within the budget, booking both attempts; one that says it has no answer first
climbs the retry ladder (summary, then logic) when the router chose the route (engine.core.absence
decides whether the evidence lets it: off here, tests/engine/test_absence.py specifies it).
No model loads: a tiny in-memory KB, a keyword router and scripted LLMs."""

from __future__ import annotations

import pytest

import engine.core.routes.logic.solve as logic_mod
from engine.core.pipeline import Budget
from engine.core.routes.common import looks_unanswered
from engine.floor.base.errors import LogicRouteError
from engine.floor.base.trace import Trace
from engine.floor.base.types import Answer, Usage
from engine.floor.llm.base import call_llm
from engine.floor.question.parse import text_of
from tests.fakes import FakeRouter, ScriptedLLM, fake_logic, make_rag


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
    rag = make_rag(llm, keep_absence=False, abstain_ungrounded=False)  # the fake logic route asks no sub-question
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
    rag = make_rag(llm, keep_absence=False)
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


def test_by_default_an_unanswered_cheap_answer_is_retried_on_logic(monkeypatch):
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())
    llm = ScriptedLLM(replies=["Not in the indexed documents.", "plan", "Warsaw"])
    ans = make_rag(llm, keep_absence=False).answer("Where was Marie Curie born?")
    assert ans.route == "logic" and ans.text == "Warsaw"
    assert "not in the documents" in ans.trace["escalated_from"]["reason"]
    assert ans.usage.llm_calls == 3 == len(llm.calls)  # the retry needs no self-check call


def test_by_default_an_answer_that_gives_one_gets_no_check_call():
    llm = ScriptedLLM(replies=["Warsaw"])
    ans = make_rag(llm, keep_absence=False).answer("Where was Marie Curie born?")
    assert ans.route == "chunk" and ans.text == "Warsaw" and len(llm.calls) == 1
    assert "self_check" not in ans.trace and "escalated_from" not in ans.trace


def test_retry_unanswered_off_keeps_the_unanswered_answer():
    llm = ScriptedLLM(replies=["unknown"])
    ans = make_rag(llm, retry_unanswered=False).answer("Where was Marie Curie born?")
    assert ans.route == "chunk" and ans.text == "unknown" and len(llm.calls) == 1


def test_escalation_respects_the_budget(monkeypatch):
    log: list = []
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic(log))
    llm = ScriptedLLM(replies=["unknown", "unknown", "plan", "x"])
    rag = make_rag(llm, keep_absence=False)
    ans = rag.answer("Where?", escalate=True, budget=Budget(max_llm_calls=2))
    assert ans.route == "chunk" and any("too little budget" in f for f in ans.flags) and not log
    ans = rag.answer("Where?", escalate=True, budget=Budget(max_llm_calls=5))
    assert ans.route == "logic" and log[0]["budget"].max_llm_calls == 4  # 5 minus the chunk call


def test_failed_self_check_keeps_the_answer_visibly():
    llm = ScriptedLLM(
        rules={"Proposed answer": "maybe", "Reply again with one JSON object": "still not json", "Question:": "Warsaw"}
    )
    ans = make_rag(llm, keep_absence=False).answer("Where was Marie Curie born?", escalate=True)
    assert ans.route == "chunk" and ans.text == "Warsaw"
    assert any("self-check failed" in f for f in ans.flags)
    assert ans.usage.llm_calls == 3  # the answer + both failed attempts are booked


class SureLLM(ScriptedLLM):
    """A scripted LLM that reports its tokens' log-probabilities, as the local backend does."""

    def __init__(self, logprobs: list[float], **kw):
        super().__init__(**kw)
        self.logprobs = logprobs

    def chat(self, messages, **kw):
        c = super().chat(messages, **kw)
        c.token_logprobs = list(self.logprobs)
        return c


def test_a_low_confidence_answer_goes_to_logic_without_a_self_check_call(monkeypatch):
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())
    llm = SureLLM([-1.5], rules={"Decompose": "plan", "Final answer": "30 July 1970", "Question:": "2010"})
    rag = make_rag(llm, escalate_below=0.5)
    ans = rag.answer("When was the director of Inception born?", route="chunk", escalate=True)
    assert ans.route == "logic" and ans.text == "30 July 1970"
    assert ans.trace["escalated_from"]["reason"] == "low confidence (0.22 < 0.5)"  # exp(-1.5) = 0.22
    assert [c["purpose"] for c in ans.trace["llm_calls"]] == ["answer", "decompose", "answer"]


def test_a_confident_answer_is_kept_without_a_self_check_call():
    llm = SureLLM([-0.05], rules={"Question:": "Warsaw"})
    ans = make_rag(llm, escalate_below=0.5).answer("Where was Marie Curie born?", escalate=True)
    assert ans.route == "chunk" and ans.text == "Warsaw" and ans.trace["confidence"] == pytest.approx(0.9512, abs=1e-4)
    assert ans.usage.llm_calls == 1 and "self_check" not in ans.trace


def test_without_token_probabilities_the_self_check_decides():
    llm = ScriptedLLM(rules={"Proposed answer": {"answered": True}, "Question:": "Warsaw"})
    ans = make_rag(llm, escalate_below=0.5).answer("Where was Marie Curie born?", escalate=True)
    assert ans.route == "chunk" and ans.trace["self_check"] == {"answered": True} and ans.usage.llm_calls == 2


@pytest.mark.parametrize("bad", [0.0, -0.1, 1.5])
def test_a_confidence_threshold_outside_0_1_is_refused(bad):
    from engine.floor.base.errors import LogicRouteError

    with pytest.raises(LogicRouteError, match="escalate_below"):
        make_rag(ScriptedLLM(), escalate_below=bad)


def fake_summary():
    """The summary route as one booked answer call over the KB's first two chunks."""

    def answer_summary(question, kb, llm, k=3, style="short", config=None):
        retrieved = [{"chunk_id": cid, "score": 1.0} for cid in list(kb.chunks)[:2]]
        usage, trace = Usage(), Trace(route="summary", retrieved=retrieved)
        c = call_llm(
            llm,
            [{"role": "user", "content": f"Summary: {text_of(question)}"}],
            purpose="answer",
            usage=usage,
            trace=trace,
        )
        return Answer(text=c.text, route="summary", usage=usage, trace=trace)

    return answer_summary


@pytest.fixture
def summary_route(monkeypatch):
    monkeypatch.setattr("engine.core.routes.summary.answer_summary", fake_summary())
    monkeypatch.setattr("hierarchy.layers.persist.has_summary_layers", lambda kb: True)
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())


def test_an_answer_that_says_it_has_none_is_retried_on_summary_first_and_stops_there_when_it_answers(summary_route):
    llm = ScriptedLLM(replies=["Not in the indexed documents.", "Warsaw"])
    ans = make_rag(llm, keep_absence=False).answer("Where was Marie Curie born?")
    assert ans.route == "summary" and ans.text == "Warsaw" and len(llm.calls) == 2  # logic never ran
    assert ans.trace["escalated_from"]["route"] == "chunk" and ans.usage.llm_calls == 2
    assert [c["route"] for c in ans.trace["llm_calls"]] == ["chunk", "summary"]


def test_logic_answers_when_summary_has_none_either_and_the_answer_pays_for_all_three(summary_route):
    llm = ScriptedLLM(replies=["Not in the indexed documents.", "unknown", "plan", "Warsaw"])
    ans = make_rag(llm, keep_absence=False).answer("Where was Marie Curie born?")
    assert ans.route == "logic" and ans.text == "Warsaw"
    assert [c["route"] for c in ans.trace["llm_calls"]] == ["chunk", "summary", "logic", "logic"]
    assert ans.usage.llm_calls == 4 == len(llm.calls)
    before = ans.trace["escalated_from"]
    assert before["route"] == "summary" and before["text"] == "unknown"
    assert before["trace"]["escalated_from"]["route"] == "chunk"  # every attempt is kept, newest first


def test_a_ladder_of_logic_alone_and_a_summary_answer_skip_the_summary_step(summary_route):
    llm = ScriptedLLM(replies=["unknown", "plan", "Warsaw"])
    ans = make_rag(llm, retry_routes=("logic",), keep_absence=False).answer("Where was Marie Curie born?")
    assert ans.route == "logic" and len(llm.calls) == 3
    llm = ScriptedLLM(replies=["unknown", "plan", "Warsaw"])
    ans = make_rag(llm, keep_absence=False).answer(
        "Where was Marie Curie born?", route="summary", escalate=True
    )  # summary said none
    assert ans.route == "logic" and [c["route"] for c in ans.trace["llm_calls"]] == ["summary", "logic", "logic"]


def test_a_kb_without_summary_layers_retries_on_logic_directly(monkeypatch):
    summarized = []
    monkeypatch.setattr("engine.core.routes.summary.answer_summary", lambda *a, **kw: summarized.append(a))
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())
    ans = make_rag(ScriptedLLM(replies=["unknown", "plan", "Warsaw"]), keep_absence=False).answer("Where?")
    assert ans.route == "logic" and not summarized  # summary would only have answered as chunk did


def test_the_retry_ladder_must_climb(summary_route):
    for bad in [("logic", "summary"), ("chunk", "chunk"), ("graph",), ()]:
        with pytest.raises(LogicRouteError):
            make_rag(ScriptedLLM(), retry_routes=bad)
    assert make_rag(ScriptedLLM(), retry_routes=["summary", "logic"]).retry_routes == ("summary", "logic")


def test_the_retry_stops_climbing_when_the_budget_runs_out(summary_route):
    llm = ScriptedLLM(replies=["unknown", "unknown", "plan", "Warsaw"])
    ans = make_rag(llm, keep_absence=False).answer("Where?", budget=Budget(max_llm_calls=3))
    assert ans.route == "summary" and any("not retried on logic" in f for f in ans.flags)


def test_with_escalation_on_a_summary_answer_the_ladder_found_is_checked_like_any_cheap_answer(summary_route):
    llm = ScriptedLLM(
        rules={"Summary:": "Paris", "Proposed answer": {"answered": False}, "Final answer": "Warsaw"},
        replies=["unknown", "plan"],
    )
    ans = make_rag(llm, keep_absence=False).answer("Where was Marie Curie born?", route="chunk", escalate=True)
    assert ans.route == "logic" and ans.text == "Warsaw"
    assert [c["route"] for c in ans.trace["llm_calls"]][:3] == ["chunk", "summary", "summary"]  # + its check
    assert ans.trace["escalated_from"]["reason"].startswith("self-check")


class AdaptedRouter(FakeRouter):
    """FakeRouter carrying the threshold `logicroute adapt` calibrates on its KB (Router.escalate_below)."""

    def __init__(self, below: float, style: str = "reader"):
        super().__init__()
        self.escalate_below, self.calibrated_style = below, style
        self.label = "adapted (kb) router/adapted.ckpt"


def test_with_escalation_on_the_adapted_routers_threshold_replaces_the_self_check_call(monkeypatch):
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())
    llm = SureLLM([-1.5], rules={"Decompose": "plan", "Final answer": "30 July 1970", "Question:": "2010"})
    ans = make_rag(llm, router=AdaptedRouter(0.5)).answer("When was Inception released?", escalate=True)
    assert ans.route == "logic" and ans.text == "30 July 1970"
    assert ans.trace["decision"]["route"] == "chunk" and ans.trace["decision"]["escalate_below"] == 0.5
    assert ans.trace["escalated_from"]["reason"] == "low confidence (0.22 < 0.5)"
    assert [c["purpose"] for c in ans.trace["llm_calls"]] == ["answer", "decompose", "answer"]
    sure = make_rag(SureLLM([-0.05], rules={"Question:": "Warsaw"}), router=AdaptedRouter(0.5))
    kept = sure.answer("Where was Marie Curie born?", escalate=True)
    assert kept.route == "chunk" and kept.usage.llm_calls == 1  # sure enough, and no self-check call


def test_without_escalation_the_adapted_routers_decision_stands(monkeypatch):
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())
    unsure = make_rag(SureLLM([-1.5], rules={"Question:": "2010"}), router=AdaptedRouter(0.5))
    ans = unsure.answer("When was Inception released?")
    assert ans.route == "chunk" and ans.usage.llm_calls == 1


def test_a_set_escalate_below_wins_over_the_adapted_routers_threshold(monkeypatch):
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())
    llm = SureLLM([-1.5], rules={"Question:": "2010"})  # confidence 0.22
    rag = make_rag(llm, router=AdaptedRouter(0.5), escalate_below=0.1)
    ans = rag.answer("When was Inception released?", escalate=True)
    assert ans.route == "chunk" and ans.usage.llm_calls == 1


def test_a_threshold_calibrated_on_short_answers_is_not_applied_to_reader_answers():
    llm = SureLLM([-1.5], rules={"Proposed answer": {"answered": True}, "Question:": "2010"})  # confidence 0.22
    ans = make_rag(llm, router=AdaptedRouter(0.5, style="short")).answer("When was Inception released?", escalate=True)
    assert ans.route == "chunk" and "escalate_below" not in ans.trace["decision"]
    assert ans.trace["self_check"] == {"answered": True}  # the self-check decided instead
