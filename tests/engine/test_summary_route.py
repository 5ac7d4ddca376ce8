"""The summary route: descent from the top level, collapsed mode, context budget, trace, bad
input; with ScriptedLLM over a fake-embedder KB, over a real MiniLM KB (`embedder`) and once
with the real local model (`local_llm`)."""

from __future__ import annotations

import pytest

from engine.core.routes import RouteContext, SummaryRoute, answer_on
from engine.core.routes.summary import answer_summary, summary_context
from engine.floor.base.errors import BadQuestionError, KBError
from hierarchy.documents import Document
from hierarchy.indexing import add_documents, delete_documents
from hierarchy.kb import KnowledgeBase
from hierarchy.layers.persist import load_layers
from hierarchy.layers.update import build_layers
from tests.fakes import HashedBowEmbedder, ScriptedLLM
from tests.samples import TOPICS, make_docs


@pytest.fixture
def kb(tmp_path):
    kb = KnowledgeBase.create(tmp_path / "kb", HashedBowEmbedder(dim=128), chunk_words=200, overlap_words=0)
    kb.add(make_docs(), show_progress=False)
    build_layers(kb, show_progress=False, cluster_size=4)
    return kb


def words(chunks) -> int:
    return sum(len(c.text.split()) for c in chunks)


def test_without_layers_the_route_answers_on_chunks_and_says_how_to_build_them(tmp_path):
    kb = KnowledgeBase.create(tmp_path / "kb", HashedBowEmbedder(dim=128))
    kb.add(make_docs(1), show_progress=False)
    ans = answer_summary("What about the river?", kb, ScriptedLLM(["x"]))
    assert (ans.text, ans.route, ans.trace["fallback_from"]) == ("x", "chunk", "summary")
    assert any("--summaries extractive" in f for f in ans.flags)
    with pytest.raises(KBError, match="logicroute index"):
        summary_context("What about the river?", kb)


def test_empty_question(kb):
    for q in ("", "   \n"):
        with pytest.raises(BadQuestionError):
            answer_on(SummaryRoute(), q, RouteContext(kb, ScriptedLLM(["x"])))


def test_descends_from_top_to_chunks_with_one_llm_call(kb):
    layers = load_layers(kb)
    llm = ScriptedLLM(["1931."])
    ans = answer_summary("Which volcano eruption had lava and magma?", kb, llm, k=2)
    assert ans.text == "1931" and ans.route == "summary"
    assert ans.usage.llm_calls == 1 and len(llm.calls) == 1
    t = ans.trace
    assert t["start_level"] == layers.top and not t["collapsed"]
    per = t["per_level"]
    assert set(per) == {str(level) for level in range(layers.top + 1)}
    for level in range(layers.top, 0, -1):
        assert 1 <= len(per[str(level)]) <= 2
        if level < layers.top:  # chosen nodes are children of the nodes chosen one level up
            parents = {layers.nodes[n].parent for n in per[str(level)]}
            assert parents <= set(per[str(level + 1)])
    assert {layers.assignment()[c] for c in per["0"]} <= set(per["1"])
    # The descent lands in the volcano documents and the context shows them.
    assert all(kb.chunks[c].title.startswith("Volcano") for c in per["0"])
    prompt = llm.calls[0]["messages"][-1]["content"]
    assert "Summary (level" in prompt and "Volcano" in prompt
    assert t["chunk_ids"] and set(t["chunk_ids"]) <= set(per["0"])
    assert t["context_words"] <= 450
    assert [c["purpose"] for c in t["llm_calls"]] == ["answer"]


def test_context_budget_and_no_llm_in_summary_context(kb):
    ctx, visited = summary_context("river delta flood basin", kb, k=3, context_words=120)
    assert words(ctx) <= 120 and visited["context_words"] == words(ctx)
    assert visited["summary_ids"] and visited["chunk_ids"]
    assert all(c.is_summary and c.doc_id == "" for c in ctx if c.chunk_id in visited["summary_ids"])
    # Summary sentences already shown by a chunk are not repeated.
    layers = load_layers(kb)
    shown = " ".join(" ".join(c.text.split()) for c in ctx if c.doc_id)
    for c in ctx:
        if not c.doc_id:
            for _title, sentence in layers.nodes[c.chunk_id].units:
                assert not (sentence in shown and sentence in c.text)
    # The full context: summaries first, then chunks; and never an LLM anywhere.
    kinds = [bool(c.doc_id) for c in ctx]
    assert kinds == sorted(kinds)


class _NoWalk(list):
    """A KB's chunk ids that fail the test if anything walks them all."""

    def __iter__(self):
        raise AssertionError("the descent walked every chunk id of the KB")


def test_the_descent_reads_only_the_chunks_under_its_nodes_never_every_chunk_id(kb, monkeypatch):
    # Why: a walk over every id costs ~20 ms a question at 100k chunks (bench scale's descent)
    before = summary_context("river delta flood basin", kb, k=3)
    monkeypatch.setattr(kb, "chunk_ids", _NoWalk(kb.chunk_ids))
    after = summary_context("river delta flood basin", kb, k=3)
    assert [c.chunk_id for c in after[0]] == [c.chunk_id for c in before[0]] and after[1]["chunk_ids"]


def test_start_level_and_collapsed(kb):
    layers = load_layers(kb)
    ctx, v = summary_context("opera soprano aria", kb, k=2, start_level=1)
    assert v["start_level"] == 1 and set(v["per_level"]) == {"1", "0"}
    ctx, v = summary_context("opera soprano aria", kb, k=2, start_level=0)
    assert v["per_level"] == {"0": [c.chunk_id for c in ctx]} and not v["summary_ids"]
    ctx, v = summary_context("opera soprano aria", kb, k=2, start_level=99)
    assert v["start_level"] == layers.top and v["flags"]
    ctx, v = summary_context("opera soprano aria", kb, k=2, collapsed=True, context_words=200)
    assert v["collapsed"] and words(ctx) <= 200
    scores = [c.score for c in ctx]
    assert scores == sorted(scores, reverse=True)  # collapsed fills in score order
    assert any(c.title.startswith("Opera") for c in ctx)
    ans = answer_summary("opera soprano aria", kb, ScriptedLLM(["Opera 1"]), collapsed=True)
    assert ans.trace["collapsed"] and ans.usage.llm_calls == 1


def test_route_sees_added_documents_and_forgets_deleted(kb):
    new = Document("zz", "Quantum", "Qubits entangle photons quickly. Superposition of qubits decoheres photons.")
    add_documents(kb, [new], show_progress=False)
    _, v = summary_context("qubits entangle photons superposition", kb, k=3)
    assert kb.chunks_of("zz")[0].id in v["chunk_ids"]
    delete_documents(kb, ["zz"])
    _, v = summary_context("qubits entangle photons superposition", kb, k=3)
    assert all(kb.chunks.get(c) for c in v["chunk_ids"]) and not v["flags"]


def test_single_node_corpus(tmp_path):
    kb = KnowledgeBase.create(tmp_path / "kb", HashedBowEmbedder(dim=128))
    kb.add(make_docs(1, {"film": TOPICS["film"]}), show_progress=False)
    build_layers(kb, show_progress=False)
    ans = answer_summary("Who directed the film?", kb, ScriptedLLM(["Nolan"]))
    assert ans.trace["per_level"]["1"] == load_layers(kb).levels[0] and ans.text == "Nolan"


# -- real embedder -------------------------------------------------------------------------

CORPUS = [
    Document(
        "curie",
        "Marie Curie",
        "Marie Curie was a physicist and chemist born in Warsaw in 1867. "
        "She won the Nobel Prize in Physics in 1903 and the Nobel Prize in Chemistry in 1911.",
    ),
    Document(
        "pierre",
        "Pierre Curie",
        "Pierre Curie was a French physicist. He shared the 1903 Nobel "
        "Prize in Physics with Marie Curie and Henri Becquerel.",
    ),
    Document(
        "einstein",
        "Albert Einstein",
        "Albert Einstein developed the theory of relativity. "
        "He received the 1921 Nobel Prize in Physics for the photoelectric effect.",
    ),
    Document(
        "bohr",
        "Niels Bohr",
        "Niels Bohr was a Danish physicist who won the Nobel Prize in 1922 for his model of the atom.",
    ),
    Document(
        "nile",
        "Nile",
        "The Nile is a river in Africa about 6,650 km long. It flows into the Mediterranean Sea through Egypt.",
    ),
    Document(
        "amazon",
        "Amazon River",
        "The Amazon is a river in South America. It carries more water "
        "than any other river and is about 6,400 km long.",
    ),
    Document(
        "danube",
        "Danube",
        "The Danube is Europe's second-longest river. It flows through ten "
        "countries, including Austria and Hungary, into the Black Sea.",
    ),
    Document(
        "everest",
        "Mount Everest",
        "Mount Everest is Earth's highest mountain above sea level, at "
        "8,849 metres, in the Himalayas on the border of Nepal and China.",
    ),
    Document(
        "k2",
        "K2",
        "K2 is the second-highest mountain on Earth, at 8,611 metres, in the "
        "Karakoram range on the China-Pakistan border.",
    ),
    Document(
        "fuji",
        "Mount Fuji",
        "Mount Fuji is an active volcano and the highest mountain in Japan, at 3,776 metres. It last erupted in 1707.",
    ),
]


@pytest.fixture(scope="module")
def real_kb(tmp_path_factory):
    from tests.real_embedder import shared_test_embedder

    kb = KnowledgeBase.create(tmp_path_factory.mktemp("real") / "kb", shared_test_embedder())
    kb.add(CORPUS, show_progress=False)
    build_layers(kb, show_progress=False, cluster_size=3)
    return kb


@pytest.mark.embedder
def test_summary_route_over_real_minilm_kb(real_kb):
    layers = load_layers(real_kb)
    assert layers.top >= 1 and sum(len(x) for x in layers.levels) >= 2
    llm = ScriptedLLM(["8,849 metres"])
    ans = answer_summary("How high is Mount Everest?", real_kb, llm, k=2)
    assert ans.text == "8,849 metres"
    assert real_kb.chunks_of("everest")[0].id in ans.trace["chunk_ids"]
    assert "8,849" in llm.calls[0]["messages"][-1]["content"]
    _, v = summary_context("Which physicists won Nobel Prizes?", real_kb, k=2, collapsed=True)
    titles = {real_kb.chunks[c].title for c in v["chunk_ids"]}
    assert titles & {"Marie Curie", "Pierre Curie", "Albert Einstein", "Niels Bohr"}


@pytest.mark.local_llm
def test_summary_route_local_llm(real_kb, tmp_path):
    from engine.floor.llm.factory import make_llm

    llm = make_llm(cache=tmp_path / "llm_cache.sqlite")
    ans = answer_summary("In which year did Mount Fuji last erupt?", real_kb, llm, k=2)
    assert "1707" in ans.text, ans.text
    assert ans.usage.llm_calls == 1 and ans.usage.prompt_tokens > 0
