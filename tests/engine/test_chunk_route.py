"""The chunk route: one retrieval, one answer-only call, cost booked, bad questions refused."""

from __future__ import annotations

import re

import pytest

from engine.core.routes import ChunkRoute, RouteContext, answer_on
from engine.core.routes.chunk import answer_chunk
from engine.core.routes.common import clean_answer, looks_unanswered
from engine.floor.base.errors import BadQuestionError, LogicRouteError
from hierarchy.documents import Chunk
from tests.fakes import ScriptedLLM, WordOverlapKB

# name -> text; the name is also the chunk's id, document and title.
PASSAGES = {
    "Ardmere": "The Ardmere Lighthouse was built by Quillane Shipwrights in 1871.",
    "Quillane": "Quillane Shipwrights was founded by Teodor Quillane.",
    "Other": "The Tamsk river is 143 km long.",
}
KB = WordOverlapKB(Chunk(name, name, name, text, 0) for name, text in PASSAGES.items())


def test_retrieves_k_chunks_once_and_answers_with_one_call():
    llm = ScriptedLLM(["Quillane Shipwrights"], delay=0.02)
    ans = answer_chunk("Who built the Ardmere Lighthouse?", KB, llm, k=2)
    assert ans.text == "Quillane Shipwrights"
    assert ans.route == "chunk"
    assert len(ans.trace["retrieved"]) == 2
    assert ans.trace["retrieved"][0]["chunk_id"] == "Ardmere"
    assert ans.usage.llm_calls == 1
    assert (ans.usage.prompt_tokens, ans.usage.completion_tokens) == llm.reported_tokens
    # wall time around the call (it slept 0.02 s), not the 0 s the LLM reported for itself
    assert ans.usage.seconds >= 0.02 and ans.usage.llm_seconds == 0.0
    # the passages reach the model: the reference QA-GraphRAG code forgot this
    prompt = llm.calls[0]["messages"][-1]["content"]
    assert "built by Quillane Shipwrights in 1871" in prompt and "Who built the Ardmere Lighthouse?" in prompt


@pytest.mark.parametrize("question", ["", "   \n\t", None])
def test_empty_question_is_refused_before_any_work(question):
    llm = ScriptedLLM([])
    with pytest.raises(BadQuestionError, match="empty"):
        answer_on(ChunkRoute(), question, RouteContext(KB, llm))
    assert llm.calls == []


def test_question_over_the_budget_is_refused():
    with pytest.raises(BadQuestionError, match="limit"):
        answer_on(ChunkRoute(), "why " * 1000, RouteContext(KB, ScriptedLLM([])))


@pytest.mark.parametrize(
    "raw,clean",
    [("Answer: Warsaw.", "Warsaw"), ("Warsaw\nbecause the passage says so", "Warsaw"), ("", ""), ("  1867 ", "1867")],
)
def test_answer_is_reduced_to_the_phrase(raw, clean):
    assert clean_answer(raw) == clean


@pytest.mark.local_llm
@pytest.mark.embedder
def test_local_llm_chunk_route_answers_from_a_real_kb(tmp_path):
    from engine.floor.llm.factory import make_llm
    from hierarchy.documents import Document
    from hierarchy.kb import KnowledgeBase
    from tests.real_embedder import shared_test_embedder

    kb = KnowledgeBase.create(tmp_path / "kb", shared_test_embedder())
    kb.add(
        [
            Document(
                "a",
                "Ardmere Lighthouse",
                "The Ardmere Lighthouse on Vaskarra was designed by the engineer Odile Farrant in 1871.",
            ),
            Document("b", "Tamsk River", "The Tamsk is a river of Vaskarra, 143 km long, flowing into the Skarn Sea."),
            Document("c", "Caddow University", "Caddow University in Brennick Harbour was founded in 1794."),
        ],
        show_progress=False,
    )
    llm = make_llm(cache=tmp_path / "llm_cache.sqlite")
    ans = answer_chunk("Who designed the Ardmere Lighthouse?", kb, llm)
    assert "Farrant" in ans.text
    assert ans.trace["retrieved"][0]["title"] == "Ardmere Lighthouse"
    assert ans.usage.llm_calls == 1 and ans.usage.prompt_tokens > 100
    again = answer_chunk("Who designed the Ardmere Lighthouse?", kb, llm)  # served by the cache
    assert again.text == ans.text and again.usage.cached_calls == 1
    assert 0.0 < ans.trace["confidence"] <= 1.0 and again.trace["confidence"] == ans.trace["confidence"]
    reader = answer_chunk("Who designed the Ardmere Lighthouse?", kb, llm, style="reader")
    cited = [int(n) for n in re.findall(r"\[(\d+)\]", reader.text)]
    assert "Farrant" in reader.text and cited, reader.text
    assert any(s.n == n and s.title == "Ardmere Lighthouse" for s in reader.sources for n in cited)


def test_reader_style_asks_for_cited_sentences_and_keeps_the_whole_reply():
    reply = "The Ardmere Lighthouse was built by Quillane Shipwrights [1].\nThey built it in 1871 [1]."
    llm = ScriptedLLM([reply])
    ans = answer_chunk("Who built the Ardmere Lighthouse, and when?", KB, llm, k=2, style="reader")
    assert ans.text == reply
    system = llm.calls[0]["messages"][0]["content"]
    assert "[2]" in system and "Not in the indexed documents." in system
    assert llm.calls[0]["max_tokens"] > 32


def test_a_reader_reply_that_the_passages_lack_the_answer_counts_as_unanswered():
    assert looks_unanswered("Not in the indexed documents.")


def test_an_unknown_style_is_refused_in_one_line():
    with pytest.raises(LogicRouteError, match="answer style"):
        answer_chunk("Who built the Ardmere Lighthouse?", KB, ScriptedLLM(["x"]), style="essay")
