"""The retry ladder replayed with engine.core.absence's gate: an unanswered cheap answer the gate keeps
stays on its route at its own score and cost; one it lets climb goes up the ladder as before."""

from __future__ import annotations

import pytest

from tests.fakes import WordOverlapKB
from training.fitting.absence_replay import GATED, gate_report, gate_verdicts, reason_kind, retry_with_gate
from training.fitting.lodo_cascade import ROUTER_RETRY

NONE = "Not in the indexed documents."
CHEAP, MID, TOP = {"tokens": 700, "llm_calls": 1}, {"tokens": 900, "llm_calls": 1}, {"tokens": 3000, "llm_calls": 5}


def _row(i: int, chunk_text: str, summary_text: str = "Warsaw") -> dict:
    return {
        "id": f"r{i}",
        "question": "Where was Marie Curie born?",
        "dataset": "set",
        "pref": {"chunk": 0.4, "summary": 0.3, "logic": 0.3},
        "oracle": "logic",
        "scores": {"chunk": 0.1, "summary": 0.5, "logic": 1.0},
        "costs": {"chunk": CHEAP, "summary": MID, "logic": TOP},
        "answers_pred": {"chunk": chunk_text, "summary": summary_text, "logic": "Warsaw"},
    }


def _verdict(climb: bool, reason: str) -> dict:
    return {"chunk": {"climb": climb, "reason": reason}}


def test_a_kept_absence_stays_on_its_route_and_a_climbing_one_goes_up_the_ladder_as_before():
    rows = [_row(0, NONE), _row(1, NONE, NONE), _row(2, "Warsaw"), _row(3, NONE)]
    verdicts = {"r0": _verdict(False, "no chunk of the KB holds 'sails'"), "r1": _verdict(True, "split")}
    decisions, paid, outcomes = retry_with_gate(rows, ["chunk", "chunk", "chunk", "logic"], verdicts)
    assert decisions == ["chunk", "logic", "chunk", "logic"]  # r1: summary has none either, on to logic
    assert paid == [{}, {"tokens": 1600, "llm_calls": 2.0}, {}, {}]
    assert outcomes[0] == {"route": "chunk", "climb": False, "reason": "no chunk of the KB holds 'sails'"}
    assert outcomes[1]["climb"] is True and outcomes[2] is None and outcomes[3] is None


def test_an_unanswered_first_route_without_a_verdict_is_an_error_not_a_silent_climb():
    with pytest.raises(KeyError, match="r0"):
        retry_with_gate([_row(0, NONE)], ["chunk"], {})


def test_the_report_sets_the_committed_figure_beside_the_gated_one_per_set_and_pooled():
    rows = [_row(0, NONE), _row(1, NONE), _row(2, "Warsaw")]
    verdicts = {
        "r0": _verdict(False, "no chunk of the KB holds 'sails', 'mast'"),
        "r1": _verdict(True, "x (at most 2 of 3)"),
    }
    out = gate_report(rows, {"a": ([0, 1], ["chunk", "chunk"]), "b": ([2], ["chunk"])}, verdicts)
    a = out["held_out"]["a"]
    assert a[ROUTER_RETRY]["score"] == 50.0 and a[GATED]["score"] == 30.0  # r0 keeps chunk's 0.1, not summary's 0.5
    assert a[ROUTER_RETRY]["tokens"] == 1600.0 and a[GATED]["tokens"] == 1150.0
    assert (a["kept"], a["climbed"], a["changed"]) == (1, 1, 1)
    assert out["pooled"]["reasons"] == {"kept": {"no chunk of the KB holds ...": 1}, "climbed": {"x": 1}}
    assert out["pooled"][GATED]["n"] == 3


def test_reasons_are_counted_without_the_terms_they_name():
    assert reason_kind("no chunk of the KB holds 'rewrite', 'formal' and 2 more") == "no chunk of the KB holds ..."
    got = reason_kind("every key term is in the KB, but no passage read holds them all (at most 4 of 8)")
    assert got == "every key term is in the KB, but no passage read holds them all"


def test_verdicts_come_from_the_chunk_routes_retrieval_on_the_kb():
    kb = WordOverlapKB.titled({"Curie": "Marie Curie was born in Warsaw.", "Ferry": "The ferry crosses the river."})
    rows = [_row(0, NONE), _row(1, "Warsaw")]
    rows[0]["question"] = "What colour are the ferry's sails?"
    got = gate_verdicts(kb, rows)
    assert list(got) == ["r0"]
    assert got["r0"]["chunk"]["climb"] is False and "sail" in got["r0"]["chunk"]["reason"]
