"""A question is read once per answer (engine.floor.question.parse.read_question): the Decider's form stage,
the absence rules, escalation and the routes all read the one Question RoutedRAG builds, and the
grammar reads each of its views (form, answer shape, key terms) at most once.
No model loads: a tiny in-memory KB, a keyword router and scripted LLMs."""

from __future__ import annotations

from collections import Counter

import pytest

import engine.core.pipeline as pipeline_mod
import engine.core.routes.logic.solve as logic_mod
import engine.floor.question.forms as forms_mod
import engine.floor.question.parse as parse_mod
import engine.floor.question.structure as structure_mod
from engine.floor.prompts.answer import NOT_IN_DOCUMENTS
from tests.fakes import FakeRouter, ScriptedLLM, fake_logic, make_rag

CHAIN = "When was the director of Inception born?"


class ChunkRouter(FakeRouter):
    """Every question to chunk: the Decider's form stage then reads the form (it can change the route)."""

    def probs(self, questions):
        self.batches.append(list(questions))
        return [{"chunk": 0.8, "summary": 0.1, "logic": 0.1} for _ in questions]


@pytest.fixture
def reads(monkeypatch) -> Counter:
    """Counts of ("read", text) for every Question made and of (view, text) for every grammar
    reading of a text: the question's form, its answer shape and its key terms."""
    seen: Counter = Counter()

    def counted(name, fn):
        def wrapper(text, *a, **kw):
            seen[(name, text)] += 1
            return fn(text, *a, **kw)

        return wrapper

    read = counted("read", parse_mod.read_question)
    monkeypatch.setattr(parse_mod, "read_question", read)
    monkeypatch.setattr(pipeline_mod, "read_question", read)
    monkeypatch.setattr(forms_mod, "form_plan", counted("form", forms_mod.form_plan))
    monkeypatch.setattr(structure_mod, "answer_shape", counted("shape", structure_mod.answer_shape))
    monkeypatch.setattr(parse_mod, "key_terms", counted("terms", parse_mod.key_terms))
    return seen


def test_the_form_stage_and_the_absence_checks_read_one_question(monkeypatch, reads):
    # the form stage sends the chain to logic; the logic answer is checked for grounding (key terms)
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic(reply="30 July 1970"))
    llm = ScriptedLLM(rules={"Decompose": "plan", "Final answer": "30 July 1970"})
    ans = make_rag(llm, router=ChunkRouter()).answer(CHAIN)
    assert ans.route == "logic" and ans.trace["decision"]["form"] == "chain"
    assert reads[("read", CHAIN)] == 1 and reads[("form", CHAIN)] == 1
    assert max(reads.values()) == 1, reads


def test_an_absence_climbing_the_ladder_reads_the_question_once(monkeypatch, reads):
    # chunk says it has none; weigh_absence reads form, terms; logic answers after the absence,
    # checked by off_question_reason and ungrounded_reason on the same Question
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic(reply="30 July 1970"))
    llm = ScriptedLLM(replies=[NOT_IN_DOCUMENTS, "plan", "30 July 1970"])
    ans = make_rag(llm).answer(CHAIN, route="chunk", escalate=True)
    assert ans.route == "logic"  # the absence climbed the ladder
    assert reads[("read", CHAIN)] == 1 and reads[("terms", CHAIN)] == 1 and reads[("form", CHAIN)] == 1
    assert max(reads.values()) == 1, reads


def test_answer_many_reads_each_question_once(monkeypatch, reads):
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic(reply="30 July 1970"))
    llm = ScriptedLLM(rules={"Decompose": "plan", "Final answer": "30 July 1970", "Question:": "Warsaw"})
    questions = [CHAIN, "In which city was Marie Curie born?"]
    make_rag(llm, router=ChunkRouter()).answer_many(questions, concurrency=1)
    assert [reads[("read", q)] for q in questions] == [1, 1]
    assert max(reads.values()) == 1, reads
