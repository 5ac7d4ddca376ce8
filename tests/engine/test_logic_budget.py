"""Budgets are hard limits on the real logic route (answer_logic with a scripted LLM): no LLM
call is made that could pass max_llm_calls, max_prompt_tokens or max_seconds, even when every
structured reply comes back malformed and is retried, and an escalated answer stays inside the
budget of the whole answer."""

from __future__ import annotations

import time

import pytest

from engine.core.budget import Budget
from engine.core.routes.logic.config import LogicConfig
from engine.core.routes.logic.solve import answer_logic
from tests.engine.logic_scripts import CHAIN_PLAN, CHAIN_Q, SUFFICIENT, corpus_kb, step
from tests.fakes import ScriptedLLM, make_rag

MALFORMED = "{not json"


def malformed_first(n_rounds: int = 4) -> list:
    """Every structured reply malformed once before the good one; a final answer at the end."""
    good = [CHAIN_PLAN, step({"q1": "Steven Spielberg"}), step({"q2": "December 18, 1946"}), SUFFICIENT]
    replies: list = []
    for g in good[:n_rounds]:
        replies += [MALFORMED, g]
    return replies + ["December 18, 1946"] * 4


class TimedLLM(ScriptedLLM):
    """Records when each call starts."""

    def __init__(self, replies, delay: float):
        super().__init__(replies, delay=delay)
        self.starts: list[float] = []

    def chat(self, messages, **kw):
        self.starts.append(time.perf_counter())
        return super().chat(messages, **kw)


@pytest.mark.parametrize("max_calls", [1, 2, 3, 4, 5, 6, 8])
def test_llm_calls_never_pass_the_limit_even_when_every_structured_reply_is_retried(max_calls):
    llm = ScriptedLLM(malformed_first())
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm, LogicConfig(), budget=Budget(max_llm_calls=max_calls))
    assert len(llm.calls) == ans.usage.llm_calls <= max_calls
    assert ans.usage.llm_calls == sum(c.get("attempts", 1) for c in ans.trace["llm_calls"])
    if max_calls < 8:
        assert any("budget exhausted" in f for f in ans.flags)


@pytest.mark.parametrize("max_tokens", [60, 400, 900, 1600])
def test_prompt_tokens_never_pass_the_limit(max_tokens):
    llm = ScriptedLLM(malformed_first())
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm, LogicConfig(), budget=Budget(max_prompt_tokens=max_tokens))
    assert sum(c.prompt_tokens for c in llm.completions) == ans.usage.prompt_tokens <= max_tokens


def test_no_call_starts_after_the_deadline():
    llm = TimedLLM(malformed_first(), delay=0.05)
    t0 = time.perf_counter()
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm, LogicConfig(), budget=Budget(max_seconds=0.12))
    assert llm.starts and all(s - t0 < 0.12 for s in llm.starts)
    assert any("budget exhausted" in f for f in ans.flags)


@pytest.mark.parametrize("max_calls", [2, 3, 4, 6])
def test_an_escalated_answer_stays_inside_the_budget_of_the_whole_answer(max_calls):
    llm = ScriptedLLM(["unknown", *malformed_first()])
    rag = make_rag(llm, escalate=True, keep_absence=False)  # the ladder's budget, whatever the evidence
    ans = rag.answer(CHAIN_Q, route="chunk", budget=Budget(max_llm_calls=max_calls))
    assert len(llm.calls) == ans.usage.llm_calls <= max_calls
    if max_calls >= 3:  # the real logic route ran on what the chunk answer left
        assert ans.route == "logic" and ans.trace["escalated_from"]["route"] == "chunk"


def test_the_self_check_is_not_made_when_the_budget_has_no_call_left():
    llm = ScriptedLLM(["30 July 1970", {"answered": False}])
    rag = make_rag(llm, escalate=True, self_check=True)
    ans = rag.answer("When was the director of Inception born?", route="chunk", budget=Budget(max_llm_calls=1))
    assert len(llm.calls) == ans.usage.llm_calls == 1
    assert any("no self-check" in f for f in ans.flags)
