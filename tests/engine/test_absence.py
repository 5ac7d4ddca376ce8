""" "Not in the documents" is an answer (engine.core.absence): a cheap route's absence is final unless
the retrieval evidence says a costlier route could find it; a forced route answers on that route
alone; a logic answer that outruns its passages becomes "not in the documents".
No model loads: word-overlap KBs with the real lexical index, a keyword router, scripted LLMs."""

from __future__ import annotations

import pytest

import engine.core.routes.logic.solve as logic_mod
from engine.core.absence import weigh_absence, word_family
from engine.core.routes.common import looks_unanswered
from engine.core.routes.specifics import unread_words
from engine.floor.base.trace import Trace
from engine.floor.base.types import Answer, Usage
from engine.floor.llm.base import call_llm
from engine.floor.prompts.answer import NOT_IN_DOCUMENTS
from engine.floor.question.parse import text_of
from tests.fakes import FakeRouter, ScriptedLLM, WordOverlapKB, fake_logic, make_rag

FERRY = {
    "Lowen Ferry": "The Lowen Ferry crosses the river Tamar twice a day, at 7:00 and at 9:30. A ticket costs 3 pounds.",
    "Harbour office": "The harbour office sells tickets and opens at 6:30 every morning.",
    "Tamar": "The river Tamar is tidal up to the weir at Gunnislake.",
}
SAILS = "What colour are the Lowen Ferry's sails?"


def ferry_rag(llm, **kw):
    from engine.core.pipeline import RoutedRAG

    return RoutedRAG(kb=WordOverlapKB.titled(FERRY), llm=llm, router=kw.pop("router", FakeRouter()), **kw)


def test_a_near_miss_absence_is_final_on_the_default_path_with_one_call(monkeypatch):
    calls: list = []
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic(calls, reply="white [1]"))
    llm = ScriptedLLM(replies=[NOT_IN_DOCUMENTS])
    ans = ferry_rag(llm).answer(SAILS)
    assert ans.text == NOT_IN_DOCUMENTS and ans.route == "chunk"
    assert ans.usage.llm_calls == 1 and not calls
    assert ans.trace["absence"]["climb"] is False
    assert "colour" in ans.trace["absence"]["reason"] and "sail" in ans.trace["absence"]["reason"]


def test_a_forced_route_answers_on_that_route_alone_with_exactly_one_call(monkeypatch):
    calls: list = []
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic(calls))
    llm = ScriptedLLM(replies=["unknown"])
    ans = make_rag(llm, keep_absence=False).answer("When was the director of Inception born?", route="chunk")
    assert ans.route == "chunk" and ans.text == "unknown" and ans.usage.llm_calls == 1 and not calls
    assert ans.trace["decision"] == {"route": "chunk", "policy": "forced"} and ans.trace["route"] == "chunk"


def test_a_forced_route_climbs_the_ladder_only_when_escalation_is_asked_for(monkeypatch):
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())
    llm = ScriptedLLM(replies=["unknown", "plan", "30 July 1970"])
    ans = make_rag(llm).answer("When was the director of Inception born?", route="chunk", escalate=True)
    assert ans.route == "logic" and ans.text == "30 July 1970"
    assert ans.trace["decision"]["route"] == "chunk" and ans.trace["route"] == "logic"


def test_a_multi_hop_form_whose_first_hop_is_in_the_kb_may_be_found_by_a_costlier_route():
    kb = WordOverlapKB.titled({"Inception": "Inception is a 2010 film directed by Christopher Nolan."})
    verdict = weigh_absence(kb, "When was the director of Inception born?", ["c0"])
    assert verdict["climb"] and verdict["form"] == "chain" and "first hop is in the KB" in verdict["reason"]
    verdict = weigh_absence(kb, "When was the director of Oppenheimer born?", ["c0"])
    assert not verdict["climb"] and "oppenheimer" in verdict["reason"]


def test_a_lookup_whose_terms_the_kb_holds_apart_reads_the_next_passages_once(monkeypatch):
    calls: list = []
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic(calls))
    llm = ScriptedLLM(replies=[NOT_IN_DOCUMENTS, "The harbour office sells them [1]."])
    rag = ferry_rag(llm, k=1)
    ans = rag.answer("Which office sells tickets for the Lowen Ferry?")
    assert ans.route == "chunk" and ans.text.startswith("The harbour office") and not calls
    assert ans.usage.llm_calls == 2
    first, second = rag.kb.searches[-2:]
    assert second["exclude"] == [r["chunk_id"] for r in ans.trace["escalated_from"]["trace"]["retrieved"]]
    absence = ans.trace["escalated_from"]["trace"]["absence"]
    assert absence["look_further"] and not absence["climb"] and "next passages" in absence["reason"]
    assert any(f.startswith("looked further: chunk again on the next passages (every key term") for f in ans.flags)


def test_an_absence_the_next_passages_confirm_is_final_after_two_calls(monkeypatch):
    calls: list = []
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic(calls))
    llm = ScriptedLLM(replies=[NOT_IN_DOCUMENTS, NOT_IN_DOCUMENTS, "never asked"])
    ans = ferry_rag(llm, k=1).answer("Which office sells tickets for the Lowen Ferry?")
    assert ans.text == NOT_IN_DOCUMENTS and ans.usage.llm_calls == 2 and not calls


def test_a_request_whose_terms_the_kb_holds_apart_goes_up_the_ladder(monkeypatch):
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic())
    llm = ScriptedLLM(replies=[NOT_IN_DOCUMENTS, "plan", "The harbour office."])
    ans = ferry_rag(llm).answer("Name the office that sells tickets for the Lowen Ferry.")
    assert ans.route == "logic" and ans.text == "The harbour office."
    absence = ans.trace["escalated_from"]["trace"]["absence"]
    assert absence["climb"] and "no passage read holds them all" in absence["reason"]


def test_an_answer_about_a_name_no_chunk_holds_is_withheld():
    llm = ScriptedLLM(replies=["Run `cargo add serde` in the project folder [1]."])
    ans = ferry_rag(llm).answer("How do I add a dependency to a Rust project with Cargo?", route="chunk")
    assert ans.text.startswith("not in") or looks_unanswered(ans.text) is not None, ans.text
    assert any("the question names 'Rust', 'Cargo', which no chunk of the KB holds" in f for f in ans.flags)
    assert ans.trace["ungrounded"]["answer"].startswith("Run `cargo add")


def test_a_name_the_kb_holds_keeps_the_answer():
    llm = ScriptedLLM(replies=["At 7:00 and at 9:30 [1]."])
    ans = ferry_rag(llm).answer("When does the Lowen Ferry cross the Tamar?", route="chunk")
    assert ans.text.startswith("At 7:00") and not ans.flags


def test_an_off_topic_question_keeps_its_absence_naming_the_terms_no_chunk_holds():
    kb = WordOverlapKB.titled(FERRY)
    verdict = weigh_absence(kb, "How do I set a memory limit on a Kubernetes pod?", ["c0"])
    assert verdict["climb"] is False
    assert "kubernete" in verdict["reason"] and "pod" in verdict["reason"]


def test_an_absence_is_final_when_a_passage_read_holds_every_key_term():
    kb = WordOverlapKB.titled(FERRY)
    verdict = weigh_absence(kb, "Who captains the Lowen Ferry on the river Tamar?", ["c0"])
    assert verdict["missing"] == ["captain"] and verdict["climb"] is False
    verdict = weigh_absence(kb, "Does the Lowen Ferry cross the river Tamar?", ["c0"])
    assert verdict["climb"] is False and verdict["best_passage_terms"] == len(verdict["terms"])


def test_terms_spread_over_chunks_no_passage_read_joins_send_a_lookup_further_and_a_request_up():
    kb = WordOverlapKB.titled(FERRY)
    verdict = weigh_absence(kb, "Which office sells tickets for the Lowen Ferry?", ["c0"])
    assert verdict["climb"] is False and verdict["look_further"] is True
    verdict = weigh_absence(kb, "Name the office that sells tickets for the Lowen Ferry.", ["c0"])
    assert verdict["climb"] is True and "no passage read holds them all" in verdict["reason"]


def test_a_term_counts_as_present_when_a_word_of_its_family_is():
    assert "directed" in word_family("director") and "release" in word_family("released")
    kb = WordOverlapKB.titled({"Inception": "Inception is a 2010 film directed by Christopher Nolan."})
    assert weigh_absence(kb, "Who is the director of Inception?", [])["missing"] == []


def test_keep_absence_false_climbs_every_absence_as_before(monkeypatch):
    calls: list = []
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic(calls))
    llm = ScriptedLLM(replies=[NOT_IN_DOCUMENTS, "plan", "white"])
    ans = ferry_rag(llm, keep_absence=False, abstain_ungrounded=False).answer(SAILS)
    assert ans.route == "logic" and len(calls) == 1 and ans.text == "white"


def scripted_logic(text: str, nodes: list[dict], read: list[str]):
    """A stand-in for answer_logic returning `text` with the DAG `nodes` after reading chunks `read`."""

    def answer_logic(question, kb, llm, config=None, style="short", budget=None):
        question = text_of(question)  # the pipeline hands the route a Question (engine.floor.question.parse)
        usage, trace = Usage(), Trace(route="logic", dag={"nodes": nodes})
        trace.details["steps"] = [{"nodes": ["q1"], "query": question, "chunk_ids": read}]
        call_llm(llm, [{"role": "user", "content": question}], purpose="answer", usage=usage, trace=trace)
        return Answer(text=text, route="logic", usage=usage, trace=trace)

    return answer_logic


@pytest.mark.parametrize("style", ["reader", "short"])
def test_a_logic_answer_built_on_an_unsupported_sub_answer_is_not_in_the_documents(monkeypatch, style):
    node = {"id": "q1", "question": "What colour are the sails?", "answer": "white", "supported": False}
    monkeypatch.setattr(logic_mod, "answer_logic", scripted_logic("The sails are white.", [node], ["c0"]))
    ans = ferry_rag(ScriptedLLM(replies=["x"]), style=style).answer(SAILS, route="logic")
    assert looks_unanswered(ans.text) is not None, ans.text
    assert ans.trace["ungrounded"]["answer"] == "The sails are white."
    assert any(f.startswith("answer withheld: sub-answer stated by none of its passages") for f in ans.flags)


def test_a_logic_answer_naming_a_command_no_passage_holds_is_withheld(monkeypatch):
    text = "Use kubectl run --memory=100Mi to set the limit [1]."
    monkeypatch.setattr(logic_mod, "answer_logic", scripted_logic(text, [], ["c0", "c1"]))
    ans = ferry_rag(ScriptedLLM(replies=["x"])).answer("How do I set a memory limit on a pod?", route="logic")
    assert ans.text.startswith(NOT_IN_DOCUMENTS) and "--memory=100Mi" in ans.text


def test_a_logic_answer_its_passages_state_is_kept(monkeypatch):
    node = {"id": "q1", "question": "When does the ferry leave?", "answer": "7:00", "supported": True}
    text = "The Lowen Ferry leaves at 7:00 and 9:30."
    monkeypatch.setattr(logic_mod, "answer_logic", scripted_logic(text, [node], ["c0"]))
    ans = ferry_rag(ScriptedLLM(replies=["x"])).answer("When does the Lowen Ferry leave?", route="logic")
    assert ans.text == text and "ungrounded" not in ans.trace


def test_abstain_ungrounded_false_returns_the_logic_answer_as_it_was(monkeypatch):
    node = {"id": "q1", "question": "What colour are the sails?", "answer": "white", "supported": False}
    monkeypatch.setattr(logic_mod, "answer_logic", scripted_logic("white", [node], ["c0"]))
    ans = ferry_rag(ScriptedLLM(replies=["x"]), abstain_ungrounded=False).answer(SAILS, route="logic")
    assert ans.text == "white"


def test_unread_words_are_the_specific_words_no_evidence_holds():
    evidence = "npm install --save-dev adds the package to devDependencies in package.json, version 7"
    assert unread_words("Run npm install --save-dev [1]; it edits package.json.", evidence) == []
    assert unread_words("Set NODE_OPTIONS=--max-old-space-size=4096 [2].", evidence) == [
        "NODE_OPTIONS=--max-old-space-size=4096"
    ]
    assert unread_words("It came out in 2014.", evidence) == ["2014"]
    assert unread_words("The sails are white.", evidence) == []  # plain words are the sub-answer check's job
    assert unread_words("Set it in .npmrc or package.json [3].", "audit-level") == []  # names are not claims
    assert unread_words("Up to 20 million bytes [1].", "20,000,000 bytes") == []  # a small number is phrasing
    assert unread_words("It holds 1,500 files.", "it holds 150 files and 15000 links") == ["1,500"]


def test_a_chunk_answer_naming_a_number_no_passage_read_holds_is_withheld():
    llm = ScriptedLLM(replies=["The largest ticket costs 6,650 pounds [1]."])
    ans = ferry_rag(llm).answer("What is the largest ticket price of the Lowen Ferry?", route="chunk")
    assert ans.text.startswith(NOT_IN_DOCUMENTS) and "6,650" in ans.text and ans.usage.llm_calls == 1
    assert ans.trace["ungrounded"]["answer"] == "The largest ticket costs 6,650 pounds [1]."


def test_a_chunk_answer_its_passages_state_is_kept_whatever_the_number_formatting():
    kb_text = {"Limits": "A package tarball may hold at most 10,000 files and 214 characters of name."}
    from engine.core.pipeline import RoutedRAG

    rag = RoutedRAG(kb=WordOverlapKB.titled(kb_text), llm=ScriptedLLM(replies=["At most 10000 files [1]."]))
    ans = rag.answer("How many files may a package tarball hold?", route="chunk")
    assert ans.text == "At most 10000 files [1]." and "ungrounded" not in ans.trace


def test_a_long_request_or_an_instruction_is_not_kept_absent_for_a_framing_word_no_chunk_holds():
    kb = WordOverlapKB.titled(FERRY)
    instruction = "Rewrite the Lowen Ferry timetable as a formal notice for the harbour office."
    verdict = weigh_absence(kb, instruction, ["c0"])
    assert "formal" in verdict["missing"] and verdict["climb"] is True
    long_question = (
        "Which formal notice of the harbour office lists the Lowen Ferry crossings of the river Tamar, "
        "the ticket price, the opening time and the weir at Gunnislake?"
    )
    assert weigh_absence(kb, long_question, ["c0"])["climb"] is True


VALGRIND = {
    "Core options": "--num-callers=<number> [default: 12] Specifies the maximum number of entries shown in stack "
    "traces. The maximum value is 500.",
    "Suppressions": "A suppressions file holds suppression entries, each naming the error kind and the stack it hides.",
}


# every term in the KB, no passage holding them all: the absence looks further (or climbs, when
# every absence climbs)
SUPPRESSIONS_Q = "What number of suppression entries can a suppressions file hold?"


def test_an_answer_found_after_an_absence_must_come_from_a_passage_about_the_question(monkeypatch):
    from engine.core.pipeline import RoutedRAG

    reply = "A suppressions file holds at most 500 entries [1]."
    monkeypatch.setattr(logic_mod, "answer_logic", scripted_logic(reply, [], ["c0", "c1"]))
    rag = RoutedRAG(
        kb=WordOverlapKB.titled(VALGRIND),
        llm=ScriptedLLM(replies=[NOT_IN_DOCUMENTS, "x"]),
        router=FakeRouter(),
        keep_absence=False,
    )
    ans = rag.answer(SUPPRESSIONS_Q)
    assert ans.route == "logic" and ans.text.startswith(NOT_IN_DOCUMENTS), ans.text
    assert "'500' comes from passages about something else" in ans.trace["ungrounded"]["reason"]


def test_an_answer_found_in_the_next_passages_must_come_from_a_passage_about_the_question():
    from engine.core.pipeline import RoutedRAG

    replies = [NOT_IN_DOCUMENTS, "A suppressions file holds at most 500 entries [1]."]
    rag = RoutedRAG(kb=WordOverlapKB.titled(VALGRIND), llm=ScriptedLLM(replies=replies), router=FakeRouter(), k=1)
    ans = rag.answer(SUPPRESSIONS_Q)
    assert ans.route == "chunk" and ans.usage.llm_calls == 2 and ans.text.startswith(NOT_IN_DOCUMENTS), ans.text
    assert "none of the passages read is about the question" in ans.trace["ungrounded"]["reason"]


def test_an_answer_found_after_an_absence_from_a_passage_about_a_sub_question_is_kept(monkeypatch):
    from engine.core.pipeline import RoutedRAG

    hops = [
        {"id": "q1", "question": "Which option sets the stack depth of errors?", "answer": "--num-callers"},
        {"id": "q2", "question": "What is the largest value of --num-callers?", "answer": "500", "supported": True},
    ]
    reply = "Up to 500."
    monkeypatch.setattr(logic_mod, "answer_logic", scripted_logic(reply, hops, ["c0", "c1"]))
    rag = RoutedRAG(
        kb=WordOverlapKB.titled(VALGRIND),
        llm=ScriptedLLM(replies=[NOT_IN_DOCUMENTS, "x"]),
        router=FakeRouter(),
        keep_absence=False,
    )
    ans = rag.answer(SUPPRESSIONS_Q)  # the same question: the passage is about its second hop
    assert ans.route == "logic" and ans.text == reply, ans.trace.get("ungrounded")


KCACHEGRIND = {
    "Viewers": "KCachegrind is a viewer for profiles.",
    "Graphs": "In the call graph, leaf nodes are drawn green and the others blue; the colour marks the kind.",
    "Options": "Options take their default values from the command line.",
    "Schemes": "A scheme file lists the suppressions to apply.",
}


def test_an_answer_found_in_the_next_passages_when_none_of_them_is_about_the_question_is_withheld():
    from engine.core.pipeline import RoutedRAG

    replies = [NOT_IN_DOCUMENTS, "The default scheme is green for leaf nodes and blue for the others [1]."]
    kb = WordOverlapKB.titled(KCACHEGRIND)
    rag = RoutedRAG(kb=kb, llm=ScriptedLLM(replies=replies), router=FakeRouter(), k=1)
    ans = rag.answer("What is the default colour scheme of KCachegrind?")
    assert ans.usage.llm_calls == 2 and ans.text.startswith(NOT_IN_DOCUMENTS), ans.text
    assert ans.trace["ungrounded"]["reason"].startswith("none of the passages read is about the question")


def test_a_list_or_an_explanation_whose_terms_the_kb_holds_apart_goes_up_the_ladder_not_further():
    kb = WordOverlapKB.titled(FERRY)
    listed = weigh_absence(kb, "Which offices sell tickets for the Lowen Ferry?", ["c0"])
    assert listed["shape"] == "list" and listed["climb"] is True and "it asks for a list" in listed["reason"]
    why = weigh_absence(kb, "Why does the harbour office sell tickets for the Lowen Ferry?", ["c0"])
    assert why["shape"] == "explanation" and why["climb"] is True and not why.get("look_further")


def test_a_word_of_a_lists_own_framing_no_chunk_holds_does_not_keep_its_absence():
    kb = WordOverlapKB.titled(FERRY)
    framed = weigh_absence(kb, "What are the daily crossings of the Lowen Ferry on the river Tamar?", ["c2"])
    assert framed["missing"] == ["daily"] and framed["climb"] is True and "frame the request" in framed["reason"]
    value = weigh_absence(kb, "What is the daily fare of the Lowen Ferry on the river Tamar?", ["c2"])
    assert value["climb"] is False and "no chunk of the KB holds" in value["reason"]


def test_a_list_naming_something_no_chunk_holds_keeps_its_absence():
    kb = WordOverlapKB.titled(FERRY)
    verdict = weigh_absence(kb, "Which Kubernetes crossings does the Lowen Ferry make on the river Tamar?", ["c0"])
    assert verdict["shape"] == "list" and verdict["climb"] is False
