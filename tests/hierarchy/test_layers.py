"""Summary layers: tree build, invariants after add/delete, incremental == rebuild over the
same tree, summarizers, persistence, small and empty corpora.

Runs on a tiny deterministic bag-of-words embedder (no model) and ScriptedLLM."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.floor.base.errors import KBCorruptError
from hierarchy import store
from hierarchy.documents import Document
from hierarchy.indexing import add_documents, delete_documents
from hierarchy.kb import MANIFEST, KnowledgeBase
from hierarchy.layers import persist
from hierarchy.layers.nodes import CENTRAL_CHUNKS, LEVEL1_WORDS, UPPER_WORDS
from hierarchy.layers.persist import META, layers_dir, load_layers
from hierarchy.layers.tree import MAX_TOP, layers_from_structure
from hierarchy.layers.update import build_layers
from hierarchy.summarize import extractive_batch, mmr_select, render_units, split_sentences
from tests.fakes import HashedBowEmbedder, ScriptedLLM
from tests.samples import TOPICS, make_docs


def rendered_words(units) -> int:
    """Word count of render_units(units)."""
    return len(render_units(units).split())


@pytest.fixture
def kb(tmp_path):
    kb = KnowledgeBase.create(tmp_path / "kb", HashedBowEmbedder(dim=128), chunk_words=200, overlap_words=0)
    kb.add(make_docs(), show_progress=False)
    return kb


def check_tree(kb, layers) -> None:
    """Every chunk reachable from the top exactly once, no orphans, links consistent."""
    assert layers is not None
    nodes = layers.nodes
    assert set(nodes) == {i for ids in layers.levels for i in ids}
    assert len(layers.levels[-1]) <= MAX_TOP or layers.top == 1
    for lvl, ids in enumerate(layers.levels, 1):
        assert ids == sorted(ids)
        assert layers.vectors[lvl - 1].shape == (len(ids), kb.embedder.dim)
        for nid in ids:
            n = nodes[nid]
            assert n.level == lvl and n.children, nid
            assert n.text.strip(), nid
            if lvl == layers.top:
                assert n.parent is None
            else:
                assert n.parent in nodes and nid in nodes[n.parent].children
            if lvl > 1:
                assert all(nodes[c].parent == nid and nodes[c].level == lvl - 1 for c in n.children)
    reached = [c for top in layers.levels[-1] for c in layers.chunks_under(top)]
    assert sorted(reached) == sorted(kb.chunk_ids)  # all chunks, each once
    assert layers.assignment() == {
        c: nodes[c_parent].id for c_parent in layers.levels[0] for c in nodes[c_parent].children
    }


def assert_same(a, b) -> None:
    """Equal in structure, summaries and (to float tolerance) embeddings."""
    assert a.levels == b.levels
    assert a.structure() == b.structure()
    for nid in a.nodes:
        assert a.nodes[nid].parent == b.nodes[nid].parent
        assert a.nodes[nid].units == b.nodes[nid].units, nid
    for va, vb in zip(a.vectors, b.vectors):
        np.testing.assert_allclose(va, vb, atol=1e-5)


# -- summarizers -----------------------------------------------------------------------------


def test_split_sentences_keeps_abbreviations_and_initials():
    s = split_sentences("J. R. R. Tolkien wrote it. Dr. Smith met Mr. Jones in the U.S. Army. It was 1954! Then more")
    assert s == ["J. R. R. Tolkien wrote it.", "Dr. Smith met Mr. Jones in the U.S. Army.", "It was 1954!", "Then more"]


def test_extractive_respects_budget_and_avoids_repeats():
    emb = HashedBowEmbedder(dim=128)
    rep = "The river delta had 40 floods in 1931."
    passages = [
        ("Nile", f"{rep} The river basin holds 300 villages. {rep}"),
        ("Nile", f"{rep} The river bank is green and wide today."),  # overlapping chunk repeats it
        ("Opera", "The soprano sang an aria by the composer. The tenor left in 1920."),
    ]
    centroid = emb.encode(["river delta floods basin villages bank"])[0]
    for budget in (8, 15, 30, 60):
        units = extractive_batch([(passages, centroid)], emb.encode, budget)[0]
        assert units and rendered_words(units) <= budget
        sents = [u[1] for u in units]
        assert len(sents) == len(set(sents))
    units = extractive_batch([(passages, centroid)], emb.encode, 30)[0]
    assert [u[1] for u in units][0] == rep  # the most central sentence is kept, once


def test_extractive_near_duplicates_skipped_and_long_sentence_truncated():
    emb = HashedBowEmbedder(dim=128)
    units = [
        ["", "alpha beta gamma delta epsilon one."],
        ["", "alpha beta gamma delta epsilon two."],
        ["", "zeta eta theta iota kappa lambda mu."],
    ]
    vecs = emb.encode([u[1] for u in units])
    vecs[1] = vecs[0]  # an exact near-duplicate in embedding space
    got = mmr_select(units, vecs, vecs[0], 100)
    assert len(got) == 2 and got[0][1].startswith("alpha") and got[1][1].startswith("zeta")
    long = [["T", " ".join(f"w{i}" for i in range(50)) + "."]]
    got = mmr_select(long, emb.encode([long[0][1]]), emb.encode([long[0][1]])[0], 10)
    assert rendered_words(got) <= 10 and got[0][1].startswith("w0 w1")


def test_llm_summarizer_is_bounded_and_booked(kb):
    long_reply = " ".join(["word"] * 400)
    llm = ScriptedLLM(rules={"Summarize the passages": long_reply})
    cost = build_layers(kb, "llm", llm=llm, show_progress=False, cluster_size=4)
    layers = load_layers(kb)
    check_tree(kb, layers)
    n_nodes = sum(len(x) for x in layers.levels)
    assert cost["llm_calls"] == n_nodes and cost["total_tokens"] == sum(llm.reported_tokens)
    assert all(len(n.text.split()) <= max(LEVEL1_WORDS, UPPER_WORDS) for n in layers.nodes.values())
    assert all(c["schema"] is None for c in llm.calls)
    assert "key facts, names, dates and numbers" in llm.calls[0]["messages"][-1]["content"]
    meta = json.loads((layers_dir(kb) / META).read_text())
    assert meta["build"]["llm_calls"] == n_nodes and meta["summarizer"] == "llm"
    assert kb.manifest["summaries"]["build"]["total_tokens"] == cost["total_tokens"]
    # An update in the same process reuses the LLM the layers were built with.
    before = len(llm.calls)
    add_documents(kb, make_docs(1, {"river": TOPICS["river"]}, seed=5, prefix="New "), show_progress=False)
    assert len(llm.calls) > before
    check_tree(kb, load_layers(kb))


# -- build, persistence ----------------------------------------------------------------------


def test_build_tree_invariants_cost_and_persistence(kb):
    cost = build_layers(kb, show_progress=False, cluster_size=4)
    assert cost["mode"] == "build" and cost["llm_calls"] == 0 and cost["total_tokens"] == 0
    layers = load_layers(kb)
    check_tree(kb, layers)
    assert layers.top >= 2 and len(layers.levels[0]) > 4
    files = {p.name for p in layers_dir(kb).iterdir()}
    gen = layers.meta["generation"]
    assert {"meta.json", f"nodes.{gen}.json", f"assignment.{gen}.json", f"level_1.{gen}.faiss"} <= files
    assert not [f for f in files if f.endswith(".tmp")]
    m = json.loads((kb.path / MANIFEST).read_text())
    assert m["summaries"]["levels"] == layers.top and m["summaries"]["build"] == cost
    # Reopen from disk in a fresh KB object and a cold cache: same tree.
    persist._CACHE.clear()
    kb2 = KnowledgeBase.open(kb.path, HashedBowEmbedder(dim=128))
    again = load_layers(kb2)
    assert_same(layers, again)
    assert load_layers(kb2) is again  # cached per generation
    # Building again without rebuild changes nothing; rebuild=True rebuilds.
    assert build_layers(kb2, show_progress=False, cluster_size=4)["mode"] == "unchanged"
    assert load_layers(kb2) is again  # same generation: nothing was written
    assert build_layers(kb2, show_progress=False, cluster_size=4, rebuild=True)["mode"] == "build"


def test_past_a_size_an_embedded_level_1_summary_quotes_only_the_chunks_nearest_its_centroid(kb, monkeypatch):
    from hierarchy.layers import nodes as tree

    # The cap bounds the sentences the EMBEDDED scoring embeds; the lexical one embeds none.
    build_layers(kb, show_progress=False, cluster_size=8, scoring=tree.EMBEDDED)  # a small KB: every chunk is read
    small = load_layers(kb)
    monkeypatch.setattr(tree, "CENTRAL_ABOVE", len(kb) - 1)  # as if it were past the size
    build_layers(kb, show_progress=False, cluster_size=8, rebuild=True, scoring=tree.EMBEDDED)
    layers = load_layers(kb)
    wide = [n for n in (layers.nodes[i] for i in layers.levels[0]) if len(n.children) > CENTRAL_CHUNKS]
    assert wide  # clusters of 8: some have more chunks than the summary reads
    rows = {c: i for i, c in enumerate(kb.chunk_ids)}
    for n in wide:
        v = kb.vectors[[rows[c] for c in n.children]]
        c = v.mean(axis=0) / np.linalg.norm(v.mean(axis=0))
        near = [n.children[i] for i in np.argsort(-(v @ c), kind="stable")[:CENTRAL_CHUNKS]]
        text = " ".join(" ".join(kb.chunks[x].text.split()) for x in near)
        for _, sentence in n.units:
            assert " ".join(sentence.split()) in text, (n.id, sentence)
    assert any(small.nodes[n.id].units != n.units for n in wide)  # below the size, other chunks are quoted


def test_build_matches_rebuild_from_its_own_structure(kb):
    build_layers(kb, show_progress=False, cluster_size=4)
    layers = load_layers(kb)
    assert_same(layers, layers_from_structure(kb, layers.structure()))


def test_small_corpus_single_node_and_empty_kb(tmp_path):
    kb = KnowledgeBase.create(tmp_path / "small", HashedBowEmbedder(dim=128))
    kb.add(make_docs(1, {"river": TOPICS["river"], "film": TOPICS["film"]}), show_progress=False)
    build_layers(kb, show_progress=False)
    layers = load_layers(kb)
    assert layers.top == 1 and len(layers.levels[0]) == 1
    check_tree(kb, layers)
    empty = KnowledgeBase.create(tmp_path / "empty", HashedBowEmbedder(dim=128))
    cost = build_layers(empty, show_progress=False)
    assert cost["nodes_per_level"] == [] and load_layers(empty).top == 0
    add_documents(empty, make_docs(1), show_progress=False)  # the update builds properly on first content
    check_tree(empty, load_layers(empty))


# -- incremental -----------------------------------------------------------------------------


def test_add_goes_incremental_and_equals_rebuild_over_same_tree(kb):
    build_layers(kb, show_progress=False, cluster_size=4)
    before = load_layers(kb)
    total = sum(len(x) for x in before.levels)
    # Near an existing topic, and a topic unlike anything in the KB.
    new = make_docs(1, {"river": TOPICS["river"]}, seed=9, prefix="Extra ")
    new += [
        Document(
            "quantum",
            "Quantum",
            "Qubits entangle photons. Superposition decoheres quickly. "
            "Qubits photons superposition entangle decoheres.",
        )
    ]
    add_documents(kb, new, show_progress=False)
    after = load_layers(kb)
    check_tree(kb, after)
    upd = after.meta["updates"][-1]
    assert upd["mode"] == "incremental" and upd["added_chunks"] == 2 and upd["llm_calls"] == 0
    assert upd["new_clusters"] >= 1  # the quantum chunk starts its own cluster
    assert 0 < upd["resummarized_nodes"] < total
    qid = kb.chunks_of("quantum")[0].id
    assert after.nodes[after.assignment()[qid]].children == [qid]
    # Untouched nodes keep their ids and summaries.
    kept = [
        i
        for i in before.nodes
        if i in after.nodes and before.nodes[i].children == after.nodes[i].children and before.nodes[i].level == 1
    ]
    assert kept and all(before.nodes[i].units == after.nodes[i].units for i in kept)
    assert_same(after, layers_from_structure(kb, after.structure()))
    assert kb.manifest["summaries"]["last_update"]["mode"] == "incremental"


def test_delete_removes_chunks_and_empty_clusters_and_equals_rebuild(kb):
    build_layers(kb, show_progress=False, cluster_size=4)
    before = load_layers(kb)
    # Delete every document of one level-1 cluster, plus one chunk elsewhere.
    victim = before.levels[0][0]
    docs = {kb.chunks[c].doc_id for c in before.nodes[victim].children}
    other = next(kb.chunks[c].doc_id for c in kb.chunk_ids if kb.chunks[c].doc_id not in docs)
    delete_documents(kb, sorted(docs) + [other])
    after = load_layers(kb)
    check_tree(kb, after)
    assert victim not in after.nodes
    upd = after.meta["updates"][-1]
    assert upd["removed_chunks"] == len(docs) + 1 and upd["removed_nodes"] >= 1
    assert_same(after, layers_from_structure(kb, after.structure()))
    # Then add back: still consistent, and equal to a rebuild over the same tree.
    add_documents(kb, make_docs(1, seed=3, prefix="Back "), show_progress=False)
    after2 = load_layers(kb)
    check_tree(kb, after2)
    assert_same(after2, layers_from_structure(kb, after2.structure()))


def test_delete_everything_then_add(kb):
    build_layers(kb, show_progress=False, cluster_size=4)
    delete_documents(kb, kb.doc_ids)
    assert load_layers(kb).top == 0
    add_documents(kb, make_docs(2), show_progress=False)
    check_tree(kb, load_layers(kb))


# -- crash safety ----------------------------------------------------------------------------


def test_interrupted_save_keeps_previous_generation(kb, monkeypatch):
    build_layers(kb, show_progress=False, cluster_size=4)
    old = load_layers(kb)
    real = store.atomic_write_json

    def fail_on_meta(path, obj, **kw):
        if str(path).endswith("meta.json"):
            raise OSError("disk full")
        return real(path, obj, **kw)

    monkeypatch.setattr(store, "atomic_write_json", fail_on_meta)
    with pytest.raises(OSError):
        build_layers(kb, show_progress=False, cluster_size=4, rebuild=True)
    monkeypatch.setattr(store, "atomic_write_json", real)
    persist._CACHE.clear()
    assert_same(old, load_layers(kb))


def test_inconsistent_files_are_reported(kb):
    build_layers(kb, show_progress=False, cluster_size=4)
    meta_path = layers_dir(kb) / META
    meta = json.loads(meta_path.read_text())
    nodes_path = layers_dir(kb) / meta["files"]["nodes"]
    nj = json.loads(nodes_path.read_text())
    nj["generation"] = "other"
    nodes_path.write_text(json.dumps(nj))
    persist._CACHE.clear()
    with pytest.raises(KBCorruptError, match="logicroute check --repair --kb"):
        load_layers(kb)


def test_cluster_without_usable_sentences_still_gets_a_summary():
    emb = HashedBowEmbedder(dim=128)
    passages = [("T", "fragment only"), ("T", "lowercase start of a sentence that was cut")]
    units = extractive_batch([(passages, emb.encode(["fragment"])[0])], emb.encode, 5)[0]
    assert units and rendered_words(units) <= 5
