"""The Decider (engine.core.decide): a router's probabilities become a route through its stages in
order (threshold, list gate, form, out of distribution), and the Decision says which stage set
the route and why. One specification per stage, then the stages together."""

from __future__ import annotations

import pytest

from engine.core.budget import Budget
from engine.core.decide import (
    Decider,
    Decision,
    FormStage,
    Learned,
    ListGateStage,
    OodStage,
    ThresholdStage,
    decided_by,
    forced,
    overrode,
)
from engine.floor.base.errors import LogicRouteError

CHUNK_LIKELY = {"chunk": 0.7, "summary": 0.1, "logic": 0.2}
LOGIC_LIKELY = {"chunk": 0.1, "summary": 0.1, "logic": 0.8}
CHAIN = "When was the director of film Jaws born?"
LOOKUP = "Who directed the film Jaws?"
LIST = "Which commands can change the lockfile?"
NEAR = {"similarity": 0.6, "threshold": 0.3, "far": False}
FAR = {"similarity": 0.1, "threshold": 0.3, "far": True}


# ---------------------------------------------------------------- the threshold stage


def test_the_threshold_stage_takes_the_argmax_without_a_threshold_ties_going_to_the_earlier_route():
    assert ThresholdStage().kind == "argmax"
    assert ThresholdStage().route_of(CHUNK_LIKELY) == "chunk"
    assert ThresholdStage().route_of({"chunk": 0.4, "logic": 0.4, "summary": 0.2}) == "chunk"


def test_the_threshold_stage_sends_p_logic_at_or_over_its_threshold_to_logic_and_the_rest_to_the_likelier_other():
    probs = {"chunk": 0.5, "summary": 0.2, "logic": 0.3}
    assert ThresholdStage(threshold=0.3).route_of(probs) == "logic"
    assert ThresholdStage(threshold=0.35).route_of(probs) == "chunk"
    assert ThresholdStage(threshold=0.1, route="summary").route_of(probs) == "summary"
    with pytest.raises(LogicRouteError, match="only"):
        ThresholdStage(threshold=0.3).route_of({"chunk": 0.6, "summary": 0.4})


def test_a_share_is_calibrated_on_the_batch_before_it_decides():
    stage = ThresholdStage(logic_share=0.5)
    assert stage.kind == "threshold"
    with pytest.raises(LogicRouteError, match="calibrating"):
        stage.route_of(CHUNK_LIKELY)
    assert stage.calibrated([0.1, 0.2, 0.3, 0.4]).threshold == 0.3  # the top half goes to logic
    assert ThresholdStage(threshold=0.9, logic_share=0.5).calibrated([0.1, 0.2]).threshold == 0.9


def test_a_budget_makes_the_threshold_stage():
    assert ThresholdStage.of(None) == ThresholdStage() == ThresholdStage.of(Budget(max_llm_calls=3))
    assert ThresholdStage.of(Budget(threshold=0.4, logic_share=0.2)) == ThresholdStage(threshold=0.4, logic_share=0.2)


# ---------------------------------------------------------------- the list gate stage


def test_the_list_gate_moves_a_question_where_it_fires_to_summary():
    gate = ListGateStage()
    assert gate.fires(0.93, CHUNK_LIKELY, "chunk")
    assert not gate.fires(None, CHUNK_LIKELY, "chunk")  # the gate did not fire
    assert not gate.fires(0.93, CHUNK_LIKELY, "summary")  # summary already


def test_the_list_gate_can_be_turned_off_and_needs_a_summary_route():
    assert not ListGateStage(on=False).fires(0.93, CHUNK_LIKELY, "chunk")  # RagConfig.list_gate
    assert not ListGateStage().fires(0.93, {"chunk": 0.6, "logic": 0.4}, "chunk")


# ---------------------------------------------------------------- the form stage


def test_a_question_whose_form_names_its_sub_questions_goes_to_logic_and_says_which_form():
    form = FormStage()
    assert form.route_of(CHAIN, CHUNK_LIKELY, "chunk", gated=False) == ("logic", "chain")
    assert form.route_of("Who was born first, Ann Lee or Tom Ford?", CHUNK_LIKELY, "chunk", False) == (
        "logic",
        "date comparison",
    )


def test_a_lookup_has_no_form_and_the_form_stage_no_say():
    assert FormStage().route_of(LOOKUP, CHUNK_LIKELY, "chunk", gated=False) is None


def test_the_form_stage_keeps_logic_against_the_gate_without_claiming_the_route():
    assert FormStage().route_of(CHAIN, LOGIC_LIKELY, "logic", gated=True) == ("logic", None)
    assert FormStage().route_of(CHAIN, LOGIC_LIKELY, "logic", gated=False) is None  # logic already


def test_the_form_stage_can_be_turned_off_and_needs_the_question_and_a_logic_route():
    assert FormStage(on=False).route_of(CHAIN, CHUNK_LIKELY, "chunk", False) is None
    assert FormStage().route_of(None, CHUNK_LIKELY, "chunk", False) is None
    assert FormStage().route_of(CHAIN, {"chunk": 0.6, "summary": 0.4}, "chunk", False) is None


# ---------------------------------------------------------------- the out-of-distribution stage


def test_the_ood_stage_gives_a_far_question_its_policys_fallback():
    out = OodStage("chunk-escalate").apply("logic", FAR)
    assert out.route == "chunk" and out.escalate and out.flag and out.trace["router_route"] == "logic"
    assert OodStage("route").apply("logic", FAR).route == "logic"
    assert OodStage().apply("logic", NEAR).route == "logic"
    assert OodStage().apply("logic", None).trace is None  # no guard: nothing measured
    with pytest.raises(LogicRouteError, match="ood_policy"):
        OodStage("nowhere")


# ---------------------------------------------------------------- the stages in order


def test_the_stages_decide_in_order_and_the_decision_names_the_one_that_set_the_route():
    serving = Decider.serving(None, "chunk-escalate")
    assert serving.decide(Learned(CHUNK_LIKELY, NEAR), LOOKUP).stage == "argmax"
    listed = serving.decide(Learned(CHUNK_LIKELY, NEAR, 0.93), LIST)
    assert (listed.route, listed.stage, listed.decided_by, listed.list_gate) == (
        "summary",
        "list_gate",
        "argmax+list",
        0.93,
    )
    chain = serving.decide(Learned(CHUNK_LIKELY, NEAR, 0.93), CHAIN)  # the form outranks the gate
    assert (chain.route, chain.stage, chain.decided_by, chain.list_gate) == ("logic", "form", "argmax+form", None)
    far = serving.decide(Learned(LOGIC_LIKELY, FAR), LOOKUP)
    assert (far.route, far.router_route, far.stage, far.escalate) == ("chunk", "logic", "ood", True)
    unlisted = Decider.serving(None, "route", list_gate=False).decide(Learned(CHUNK_LIKELY, NEAR, 0.93), LIST)
    assert (unlisted.route, unlisted.list_gate, unlisted.decided_by) == ("chunk", None, "argmax")


def test_without_an_ood_stage_the_decision_keeps_the_routers_choice_and_the_bare_measure():
    d = Decider().decide(Learned(LOGIC_LIKELY, FAR), LOOKUP)
    assert d.route == "logic" and d.ood == FAR and not d.escalate and d.flag is None


def test_a_sweep_is_the_decider_with_another_threshold_stage():
    decider = Decider(list_gate=ListGateStage(on=False))
    assert decider.with_threshold(0.15).route(CHUNK_LIKELY) == "logic"
    assert decider.with_threshold(0.9).route(CHUNK_LIKELY, CHAIN) == "logic"  # the form stage still applies
    assert decider.with_threshold(0.9).decide(Learned(CHUNK_LIKELY), CHAIN).decided_by == "threshold+form"
    assert decider.with_threshold(None) == decider


class _Router:
    """A router's learned stage, without a model: fixed probabilities, measures and gate."""

    label, escalate_below, calibrated_style = "checkpoint x.ckpt", 0.4, "phrase"

    def __init__(self, rows):
        self.rows, self.calls = rows, []

    def probs_ood_and_lists(self, questions):
        self.calls.append(list(questions))
        rows = [self.rows[q] for q in questions]
        return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


def test_a_batch_is_learned_once_and_a_share_calibrated_on_it():
    router = _Router({"a": ({"chunk": 0.9, "logic": 0.1}, None, None), "b": ({"chunk": 0.6, "logic": 0.4}, None, None)})
    a, b = Decider.serving(Budget(logic_share=0.5), "route").decide_many(router, ["a", "b"], style="phrase")
    assert router.calls == [["a", "b"]]
    assert (a.route, b.route, b.threshold, b.logic_share) == ("chunk", "logic", 0.4, 0.5)
    assert b.router == "checkpoint x.ckpt" and b.escalate_below == 0.4
    (other_style,) = Decider().decide_many(router, ["a"], style="sentence")
    assert other_style.escalate_below is None  # calibrated for phrases only
    assert Decider().decide_many(router, []) == []


# ---------------------------------------------------------------- the decision's shapes


def test_the_decision_keeps_its_public_shapes():
    d = Decision(
        route="summary", policy="threshold", router_route="summary", probs=CHUNK_LIKELY, form="list",
        list_gate=0.912345, threshold=0.4, logic_share=0.2, router="r",
    )  # fmt: skip
    assert d.trace() == {
        "route": "summary", "policy": "threshold", "threshold": 0.4, "logic_share": 0.2, "form": "list",
        "list_gate": 0.9123, "router": "r",
    }  # fmt: skip
    assert d.to_dict() == {
        "route": "summary", "router_route": "summary", "probs": CHUNK_LIKELY, "policy": "threshold+list",
        "list_gate": 0.912345, "threshold": 0.4, "ood": None, "escalate": False, "router": "r",
    }  # fmt: skip
    assert forced("logic").trace() == {"route": "logic", "policy": "forced"} and forced("logic").stage == "forced"


def test_what_decided_is_worded_in_one_place():
    assert [decided_by("argmax", f) for f in (None, "chain", "list")] == ["argmax", "argmax+form", "argmax+list"]
    assert overrode({"list_gate": 0.934}) == "list gate P 0.93; "
    assert overrode({"form": "chain"}) == "form: chain; "
    assert overrode({}) == ""
