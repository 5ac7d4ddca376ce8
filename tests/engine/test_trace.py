"""The typed trace: a route's record becomes a Trace whose JSON has the record's keys, no more."""

from __future__ import annotations

import json

from engine.floor.base.trace import Trace
from engine.floor.base.types import Answer, Usage
from tests.fakes import ScriptedLLM, make_rag

LOGIC_RECORD = {
    "route": "logic",
    "question": "Who?",
    "config": {"k": 3},
    "llm_calls": [{"purpose": "decompose"}],
    "flags": [],
    "dag": {"nodes": [], "edges": [], "ranks": []},
    "steps": [],
    "answer": "Kesh",
}


def test_a_routes_record_keeps_its_keys_and_values_through_the_trace():
    trace = Trace.of(LOGIC_RECORD)
    assert trace.dag == LOGIC_RECORD["dag"] and trace.details == {"config": {"k": 3}, "steps": [], "answer": "Kesh"}
    assert trace.to_dict() == LOGIC_RECORD and trace == LOGIC_RECORD  # a Trace equals its JSON
    assert trace["steps"] == [] and trace.get("memory") is None and "confidence" not in trace


def test_an_answer_made_from_a_dict_holds_a_trace_and_writes_it_as_json():
    ans = Answer("Kesh", "logic", Usage(), dict(LOGIC_RECORD))
    assert isinstance(ans.trace, Trace) and json.loads(json.dumps(ans.to_dict()))["trace"] == LOGIC_RECORD


def test_a_routed_answer_has_its_decision_and_ood_and_only_the_keys_set():
    rag = make_rag(ScriptedLLM(["Warsaw"]), style="short", retry_unanswered=False)
    ans = rag.answer("Where was Marie Curie born?")
    keys = set(ans.trace.to_dict())
    assert {"route", "llm_calls", "flags", "retrieved", "decision", "ood"} <= keys
    assert not keys & {"escalated_from", "self_check", "citations_dropped", "dag"}
    assert ans.trace.decision["route"] == "chunk" and ans.trace.ood is None


def test_a_flag_is_recorded_on_the_trace():
    trace = Trace(route="chunk")
    trace.flag("answered without passages")
    assert trace.to_dict()["flags"] == ["answered without passages"] and trace.flags == trace["flags"]
