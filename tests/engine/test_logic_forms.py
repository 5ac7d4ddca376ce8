"""Plans read off the question's form (LogicConfig.plan_forms), as specs: which forms get a
fixed plan, that anything else (or any doubt) is left to the LLM's decomposition, and that the
route then makes no decomposition call.

Runs on ScriptedLLM + a keyword-overlap fake KB (no model, no embedder).
"""

from __future__ import annotations

import pytest

from engine.core.routes.logic.config import LogicConfig
from engine.core.routes.logic.plan import plan_from_form
from engine.core.routes.logic.solve import answer_logic
from tests.engine.logic_scripts import CHAIN_PLAN, CHAIN_Q, COMPARE_Q, SUFFICIENT, corpus_kb, lean_kb, purposes, step
from tests.fakes import ScriptedLLM
from tests.router.routing_questions import ONE_HOP


def planned(question: str) -> list[tuple[str, list[str]]] | None:
    got = plan_from_form(question)
    return None if got is None else [(n.question, n.depends_on) for n in got[1]]


@pytest.mark.parametrize(
    "question, expected",
    [
        ("Who was born first, Ann Lee or Tom Ford?", [("When was Ann Lee born?", []), ("When was Tom Ford born?", [])]),
        (
            "Which film came out first, Ne Jouez Pas Avec Les Martiens or A Hijacking?",
            [("When was Ne Jouez Pas Avec Les Martiens released?", []), ("When was A Hijacking released?", [])],
        ),
        (
            "Which film has the director who died first, Vertigo or Metropolis?",
            [
                ("Who is the director of film Vertigo?", []),
                ("Who is the director of film Metropolis?", []),
                ("When did #q1 die?", ["q1"]),
                ("When did #q2 die?", ["q2"]),
            ],
        ),
        (
            "Who died first, the painter of The Scream or the author of Hunger?",
            [
                ("Who is the painter of The Scream?", []),
                ("Who is the author of Hunger?", []),
                ("When did #q1 die?", ["q1"]),
                ("When did #q2 die?", ["q2"]),
            ],
        ),
    ],
)
def test_two_options_compared_by_a_date_ask_each_options_date(question, expected):
    assert planned(question) == expected


@pytest.mark.parametrize(
    "question, expected",
    [
        (
            "Were Tomé Varela Da Silva and Wolfgang Smith of the same nationality?",
            [
                ("What is the nationality of Tomé Varela Da Silva?", []),
                ("What is the nationality of Wolfgang Smith?", []),
            ],
        ),
        (
            "Are both villages, Stanari and Krasnoye, Belgorod Oblast, located in the same country?",
            [
                ("Which country is Stanari located in?", []),
                ("Which country is Krasnoye, Belgorod Oblast located in?", []),
            ],
        ),
        (
            "Are the directors of both films The House on the Dune (1952 film) and Miami Rhapsody"
            " from the same country?",
            [
                ("Who is the director of film The House on the Dune (1952 film)?", []),
                ("Who is the director of film Miami Rhapsody?", []),
                ("Which country is #q1 from?", ["q1"]),
                ("Which country is #q2 from?", ["q2"]),
            ],
        ),
        (
            "Are both director of film Sacro Gra and director of film Das Boot from the same country?",
            [
                ("Who is the director of film Sacro Gra?", []),
                ("Who is the director of film Das Boot?", []),
                ("Which country is #q1 from?", ["q1"]),
                ("Which country is #q2 from?", ["q2"]),
            ],
        ),
    ],
)
def test_a_same_country_or_nationality_check_asks_it_of_both_sides(question, expected):
    assert planned(question) == expected


@pytest.mark.parametrize(
    "question, expected",
    [
        (CHAIN_Q, [("Who is the director of film Jaws?", []), ("When was #q1 born?", ["q1"])]),
        (
            "Where was the place of death of Isabel Moctezuma's father?",
            [("Who is the father of Isabel Moctezuma?", []), ("Where was the place of death of #q1?", ["q1"])],
        ),
        (
            "Who is the paternal grandfather of Anne Boleyn?",
            [("Who is the father of Anne Boleyn?", []), ("Who is the father of #q1?", ["q1"])],
        ),
        (
            "When did the mother of the director of Quiet Harbour die?",
            [
                ("Who is the director of Quiet Harbour?", []),
                ("Who is the mother of #q1?", ["q1"]),
                ("When did #q2 die?", ["q2"]),
            ],
        ),
        (
            "Who is the father of Empress Wang's husband?",
            [("Who is the husband of Empress Wang?", []), ("Who is the father of #q1?", ["q1"])],
        ),
        (
            "In what year was the founder of the company that built the Thornlace Lighthouse born?",
            [
                ("Which company built the Thornlace Lighthouse?", []),
                ("Who is the founder of #q1?", ["q1"]),
                ("In what year was #q2 born?", ["q2"]),
            ],
        ),
        (
            "Where was the director of the film that won the Golden Lion born?",
            [
                ("Which film won the Golden Lion?", []),
                ("Who is the director of #q1?", ["q1"]),
                ("Where was #q2 born?", ["q2"]),
            ],
        ),
    ],
)
def test_a_relation_chain_is_solved_innermost_hop_first(question, expected):
    assert planned(question) == expected


@pytest.mark.parametrize(
    "question",
    [
        "Who is the director of film Jaws?",  # one lookup: the chain is the whole question
        "Who is the aunt of Diana Forbes-Robertson?",  # a relation the form does not know
        "Is the founder of Arkwell older than the founder of Brightwell Logistics?",  # a second chain left over
        "Did the author of The Salt Orchard and the director of Quiet Harbour study at the same school?",
        "For what did the singer of Moon River in Breakfast at Tiffany's win a Tony?",  # where the name ends is unknown
        "When did the city where the author of Pacem in Terris died become its own country?",  # a second clause
        "Which band released their first album earlier, Blur or Oasis?",
        "This singer of A Rather Blustery Day also voiced what hedgehog?",
        "Who is the paternal grandfather of Prince William's children?",
        "Who is the director of the film that stars Anna Karina?",  # a verb in the present: left to the LLM
        "When was the founder of the company that built the old mill born?",  # the object is no name
        "Which company built the Thornlace Lighthouse?",  # one lookup
    ],
)
def test_any_other_form_or_any_doubt_is_left_to_the_llm(question):
    assert plan_from_form(question) is None


def test_no_hand_written_lookup_gets_a_form_plan():
    assert [q for q in ONE_HOP if plan_from_form(q)] == []


def test_with_plan_forms_on_the_route_makes_no_decomposition_call():
    llm = ScriptedLLM([step({"q1": "Steven Spielberg"}), step({"q2": "December 18, 1946"}), SUFFICIENT, "1946"])
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm, LogicConfig(plan_forms=True))
    assert "decompose" not in purposes(ans) and ans.trace["plan_form"] == "chain"
    assert [(n["id"], n["origin"]) for n in ans.trace["dag"]["nodes"]] == [("q1", "form"), ("q2", "form")]
    assert ans.text == "1946"


def test_with_plan_forms_off_or_no_form_the_llm_decomposes():
    llm = ScriptedLLM(
        [CHAIN_PLAN, step({"q1": "Steven Spielberg"}), step({"q2": "December 18, 1946"}), SUFFICIENT, "1946"]
    )
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm)
    assert purposes(ans)[0] == "decompose" and "plan_form" not in ans.trace
    llm = ScriptedLLM([CHAIN_PLAN, step({"q1": "x"}), step({"q2": "y"}), SUFFICIENT, "y"])
    ans = answer_logic("Who is the aunt of Diana Forbes-Robertson?", corpus_kb(), llm, LogicConfig(plan_forms=True))
    assert purposes(ans)[0] == "decompose"


def test_a_date_comparison_from_its_form_is_concluded_in_code():
    llm = ScriptedLLM([step({"q1": "1936", "q2": "1961"}), SUFFICIENT, "Ann Lee"])
    ans = answer_logic(COMPARE_Q, corpus_kb(), llm, LogicConfig(plan_forms=True))
    assert ans.trace["plan_form"] == "date comparison" and "decompose" not in purposes(ans)
    assert ans.text == "Ann Lee"


def test_form_evidence_tokens_compress_only_the_steps_of_a_form_plan():
    cfg = LogicConfig(plan_forms=True, form_evidence_tokens=12)
    llm = ScriptedLLM([step({"q1": "Steven Spielberg"}), step({"q2": "December 18, 1946"}), SUFFICIENT, "1946"])
    ans = answer_logic(CHAIN_Q, lean_kb(), llm, cfg)
    assert all("evidence" in s for s in ans.trace["steps"])
    llm = ScriptedLLM(
        [CHAIN_PLAN, step({"q1": "Steven Spielberg"}), step({"q2": "December 18, 1946"}), SUFFICIENT, "1946"]
    )
    ans = answer_logic(CHAIN_Q, lean_kb(), llm, LogicConfig(form_evidence_tokens=12))  # an LLM plan: whole chunks
    assert not any("evidence" in s for s in ans.trace["steps"])
