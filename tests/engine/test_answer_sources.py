"""Every answer carries its sources, as specs: on the chunk, summary and logic routes (scripted
LLM), numbered as the answer prompt showed the passages so a reader answer's [n] points at one,
carrying the document's path and the chunk's heading path, in Answer.to_dict(); and the lines
people read (engine.floor.sources_text)."""

from __future__ import annotations

import json
import re

import pytest

from engine.core.routes.chunk import answer_chunk
from engine.core.routes.logic.solve import answer_logic
from engine.core.routes.summary import answer_summary
from engine.floor.base.types import Answer, RetrievedChunk, Source, Usage
from engine.floor.sources_text import format_sources
from hierarchy.documents import Chunk
from hierarchy.kb import KnowledgeBase
from hierarchy.layers.update import build_layers
from tests.engine.logic_scripts import CHAIN_PLAN, CHAIN_Q, SUFFICIENT, corpus_kb, node, step
from tests.fakes import HashedBowEmbedder, ScriptedLLM, WordOverlapKB
from tests.samples import make_docs
from training.common.logic_experiment import LogicExperiment

NPM = [
    Chunk("u1", "npm-uninstall.md", "npm-uninstall", "npm uninstall removes a package.", 0,
          "npm-uninstall > Description", "docs/npm-uninstall.md"),
    Chunk("u2", "npm-uninstall.md", "npm-uninstall", "Example: npm uninstall sax removes the sax package.", 1,
          "npm-uninstall > Examples", "docs/npm-uninstall.md"),
    Chunk("i1", "npm-install.md", "npm-install", "npm install adds a package.", 0,
          "npm-install > Description", "docs/npm-install.md"),
]  # fmt: skip


class StoredChunkKB(WordOverlapKB):
    """WordOverlapKB whose hits come out as a real KB's do: RetrievedChunk.of the stored chunk."""

    def search(self, query, k=3, exclude=()):
        return [RetrievedChunk.of(self.chunks[h.chunk_id], h.score) for h in super().search(query, k, exclude)]


def prompt_of(llm: ScriptedLLM, call: int = -1) -> str:
    return llm.calls[call]["messages"][-1]["content"]


def shown_under(prompt: str, s: Source) -> bool:
    """The prompt shows the source's passage under its number, as format_passages writes it."""
    return f"[{s.n}] {s.title}: {s.text}" in prompt if s.title else f"[{s.n}] {s.text}" in prompt


# ---------------------------------------------------------------- chunk route


def test_chunk_route_sources_are_its_passages_numbered_as_the_prompt_shows_them():
    llm = ScriptedLLM(["Run npm uninstall sax [1]."])
    ans = answer_chunk("How do I uninstall the sax package with npm?", StoredChunkKB(NPM), llm, k=2, style="reader")
    assert [s.n for s in ans.sources] == [1, 2]
    assert [s.chunk_id for s in ans.sources] == [r["chunk_id"] for r in ans.trace["retrieved"]]
    assert all(shown_under(prompt_of(llm), s) for s in ans.sources)
    cited = ans.sources[int(re.search(r"\[(\d+)\]", ans.text).group(1)) - 1]
    assert (cited.chunk_id, cited.heading_path, cited.path) == ("u2", "npm-uninstall > Examples", NPM[1].source)
    assert f"[1] npm-uninstall: {NPM[1].text}" in prompt_of(llm)
    assert {s.kind for s in ans.sources} == {"chunk"} and all(s.used_by == [] for s in ans.sources)


def test_to_dict_includes_the_sources_as_json():
    ans = answer_chunk("uninstall sax", StoredChunkKB(NPM), ScriptedLLM(["x"]), k=1)
    d = json.loads(json.dumps(ans.to_dict()))
    (src,) = d["sources"]
    assert src["n"] == 1 and src["path"] == "docs/npm-uninstall.md" and src["heading_path"].startswith("npm-uninstall")
    assert set(src) >= {"n", "doc_id", "path", "title", "heading_path", "text", "score", "kind", "used_by"}


def test_a_kb_without_paths_or_headings_still_gives_sources():
    ans = answer_chunk("Who directed Jaws?", corpus_kb(), ScriptedLLM(["Spielberg"]), k=2)
    assert [s.n for s in ans.sources] == [1, 2]
    assert all(s.path == "" and s.heading_path == "" and s.doc_id for s in ans.sources)


# ---------------------------------------------------------------- summary route


@pytest.fixture
def layered_kb(tmp_path):
    kb = KnowledgeBase.create(tmp_path / "kb", HashedBowEmbedder(dim=128), chunk_words=200, overlap_words=0)
    kb.add(make_docs(), show_progress=False)
    build_layers(kb, show_progress=False, cluster_size=4)
    return kb


def test_summary_route_sources_are_its_context_items_in_prompt_order(layered_kb):
    llm = ScriptedLLM(["1931"])
    ans = answer_summary("Which volcano eruption had lava and magma?", layered_kb, llm, k=2)
    assert [s.n for s in ans.sources] == list(range(1, len(ans.sources) + 1))
    assert [s.chunk_id for s in ans.sources] == [r["chunk_id"] for r in ans.trace["retrieved"]]
    assert all(shown_under(prompt_of(llm), s) for s in ans.sources)
    kinds = {s.kind for s in ans.sources}
    assert kinds == {"summary", "chunk"}
    assert all(s.doc_id for s in ans.sources if s.kind == "chunk")


def test_summary_route_falling_back_to_chunks_still_has_sources(tmp_path):
    kb = KnowledgeBase.create(tmp_path / "kb", HashedBowEmbedder(dim=128))
    kb.add(make_docs(1), show_progress=False)
    ans = answer_summary("What about the river?", kb, ScriptedLLM(["x"]))
    assert ans.route == "chunk" and ans.sources and ans.sources[0].n == 1


# ---------------------------------------------------------------- logic route


def chain_llm(**memories) -> ScriptedLLM:
    return ScriptedLLM(
        [
            CHAIN_PLAN,
            step({"q1": "Steven Spielberg"}, memories.get("m1", "Spielberg directed Jaws.")),
            step({"q2": "December 18, 1946"}, memories.get("m2", "Spielberg born 1946.")),
            SUFFICIENT,
            "December 18, 1946",
        ]
    )


def test_logic_sources_are_numbered_as_the_final_prompt_shows_raw_chunks():
    llm = ScriptedLLM(
        [CHAIN_PLAN, {"answers": {"q1": "Steven Spielberg"}}, {"answers": {"q2": "1946"}}, SUFFICIENT, "1946"]
    )
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm, LogicExperiment(rolling_memory=False))
    assert [s.n for s in ans.sources] == list(range(1, len(ans.sources) + 1))
    assert all(shown_under(prompt_of(llm), s) for s in ans.sources)
    for s in ans.sources:
        assert s.used_by == [i for i in ("q1", "q2") if s.chunk_id in node(ans, i)["chunk_ids"]]
    assert {"q1", "q2"} <= {i for s in ans.sources for i in s.used_by}


def test_logic_sources_seen_only_through_the_memory_have_no_number_but_name_their_sub_questions():
    llm = chain_llm()
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm, LogicExperiment(final_chunks=0))
    retrieved = node(ans, "q1")["chunk_ids"] + node(ans, "q2")["chunk_ids"]
    assert [s.chunk_id for s in ans.sources] == retrieved
    assert all(s.n is None for s in ans.sources) and "[1]" not in prompt_of(llm)
    assert [s.used_by for s in ans.sources] == [["q1"]] * 3 + [["q2"]] * 3


def test_logic_last_hop_chunks_shown_beside_the_memory_are_numbered_first():
    llm = chain_llm()
    ans = answer_logic(CHAIN_Q, corpus_kb(), llm, LogicExperiment(k=1, final_chunks=3))
    shown, memory_only = ans.sources
    assert (shown.n, shown.chunk_id, shown.used_by) == (1, node(ans, "q2")["chunk_ids"][0], ["q2"])
    assert shown_under(prompt_of(llm), shown)
    assert (memory_only.n, memory_only.chunk_id, memory_only.used_by) == (None, node(ans, "q1")["chunk_ids"][0], ["q1"])


# ---------------------------------------------------------------- lines for people


def source(**kw) -> Source:
    base = {"n": 1, "chunk_id": "c", "doc_id": "npm-uninstall.md", "title": "npm-uninstall", "text": "t", "score": 1.0}
    return Source(**{**base, **kw})


def lines(*sources: Source) -> list[str]:
    return format_sources(Answer(text="", route="chunk", usage=Usage(), sources=list(sources)))


def test_a_source_line_is_the_file_name_then_the_heading_path_without_the_title():
    s = source(path="/srv/docs/npm-uninstall.md", heading_path="npm-uninstall > Examples")
    assert lines(s) == ["[1] npm-uninstall.md > Examples"]
    assert lines(source(n=2, path="https://docs.npmjs.com/cli/npm-uninstall/?v=1#x")) == ["[2] npm-uninstall"]


def test_a_source_line_falls_back_to_the_title_then_the_doc_id():
    assert lines(source(heading_path="npm-uninstall > Synopsis")) == ["[1] npm-uninstall > Synopsis"]
    assert lines(source(title="", doc_id="d7")) == ["[1] d7"]
    summary = source(n=3, title="Summary (level 2)", doc_id="", kind="summary")
    assert lines(summary) == ["[3] Summary (level 2)"]


def test_a_logic_source_line_says_which_sub_questions_used_it():
    s = source(n=None, used_by=["q1", "q2"], heading_path="npm-uninstall")
    assert lines(s) == ["[-] npm-uninstall (used by q1, q2)"]
