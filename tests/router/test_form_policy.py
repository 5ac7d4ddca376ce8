"""The form policy (router.policy.decide_with_form): a question whose form names its
sub-questions (hierarchy/question_forms.py) goes to the logic route whatever the probabilities; every
other question gets the policy's own decision."""

from __future__ import annotations

from router.policy import Policy, decide, decide_with_form

CHUNK_LIKELY = {"chunk": 0.7, "summary": 0.1, "logic": 0.2}
CHAIN = "When was the director of film Jaws born?"
LOOKUP = "Who directed the film Jaws?"


def test_a_question_with_a_form_goes_to_logic_and_says_which_form():
    assert decide_with_form(CHUNK_LIKELY, None, CHAIN) == ("logic", "chain")
    assert decide_with_form(CHUNK_LIKELY, None, "Who was born first, Ann Lee or Tom Ford?") == (
        "logic",
        "date comparison",
    )


def test_a_lookup_gets_the_argmax():
    assert decide_with_form(CHUNK_LIKELY, None, LOOKUP) == ("chunk", None)


def test_the_form_policy_also_overrides_a_threshold_and_can_be_turned_off():
    gated = Policy(kind="threshold", route="logic", threshold=0.9)
    assert decide(CHUNK_LIKELY, gated, CHAIN) == "logic"
    assert decide(CHUNK_LIKELY, Policy(forms=False), CHAIN) == "chunk"
    assert decide(CHUNK_LIKELY, Policy(kind="threshold", route="logic", threshold=0.9, forms=False), CHAIN) == "chunk"


def test_without_the_question_or_a_logic_route_nothing_changes():
    assert decide(CHUNK_LIKELY) == "chunk"
    assert decide_with_form({"chunk": 0.6, "summary": 0.4}, None, CHAIN) == ("chunk", None)


def test_a_saved_policy_keeps_its_form_switch(tmp_path):
    Policy(forms=False).save(tmp_path / "p.json")
    assert Policy.load(tmp_path / "p.json").forms is False
