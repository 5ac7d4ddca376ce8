"""With the real local model and MiniLM, on a five-line ferry handbook (Markdown with front matter
and a timetable): a question the handbook does not answer is answered "not in the documents" on
the default path and on a forced chunk route (one LLM call), and one it answers is answered."""

from __future__ import annotations

import pytest

from engine.core.routes.common import looks_unanswered

pytestmark = [pytest.mark.local_llm, pytest.mark.embedder]

HANDBOOK = """---
title: Lowen Ferry handbook
---
# Lowen Ferry

The Lowen Ferry carries foot passengers across the Tamsk estuary, from the town quay to Quillane Point.

| departs | arrives |
|---|---|
| 07:15 | 07:40 |
| 12:30 | 12:55 |

A single ticket costs 4 crowns; children under 12 travel free.
"""
SAILS = "What colour are the Lowen Ferry's sails?"


@pytest.fixture(scope="module")
def ferry(tmp_path_factory, real_embedder):
    from engine.core.pipeline import RoutedRAG
    from engine.floor.llm.factory import make_llm
    from hierarchy.indexing import index_sources

    folder = tmp_path_factory.mktemp("ferry")
    (folder / "docs").mkdir()
    (folder / "docs" / "handbook.md").write_text(HANDBOOK)
    kb = index_sources(folder / "kb", [folder / "docs"], summaries="none", embedder=real_embedder).kb
    return RoutedRAG(kb=kb, llm=make_llm(cache=folder / "llm_cache.sqlite"))


@pytest.mark.parametrize("route", ["auto", "chunk"])
def test_a_question_the_handbook_does_not_answer_is_not_in_the_documents(ferry, route):
    ans = ferry.answer(SAILS, route=route)
    assert looks_unanswered(ans.text) is not None, (ans.text, ans.flags)
    if route == "chunk":
        assert ans.usage.llm_calls == 1 and ans.route == "chunk"
    assert ans.usage.llm_calls <= 2, ans.trace["llm_calls"]


def test_a_question_the_handbook_answers_is_answered_with_its_source(ferry):
    ans = ferry.answer("How much does a single ticket for the Lowen Ferry cost?")
    assert "4 crowns" in ans.text, (ans.text, ans.flags)
    assert any(s.n and "handbook" in str(s.path) for s in ans.sources)
