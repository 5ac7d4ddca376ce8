"""The summary layer that costs little to build (issue 57, item 3): the default extractive layer
embeds one text per node, never every sentence; its sentences are chosen by where their passage
sits in the cluster and by the cluster's words; updates still equal a rebuild; layers built the
old way keep their scoring; `index` says where its time went.

Runs on the bag-of-words fake embedder, which records every text it encodes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from engine.face.cli import main
from hierarchy.indexing import add_documents, index_sources
from hierarchy.kb import KnowledgeBase
from hierarchy.layers.nodes import CHUNK_MEAN, EMBEDDED, LEXICAL, SUMMARY_TEXT, node_vectors_of, scoring_of
from hierarchy.layers.persist import load_layers
from hierarchy.layers.tree import layers_from_structure
from hierarchy.layers.update import build_layers
from hierarchy.summarize import candidates
from hierarchy.summarize_lexical import lexical_select, word_vectors
from tests.fakes import HashedBowEmbedder
from tests.hierarchy.test_layers import assert_same, check_tree
from tests.samples import TOPICS, make_docs


@pytest.fixture
def kb(tmp_path):
    kb = KnowledgeBase.create(tmp_path / "kb", HashedBowEmbedder(dim=128), chunk_words=200, overlap_words=0)
    kb.add(make_docs(), show_progress=False)
    return kb


def sentences_of(kb) -> set[str]:
    return {u[1] for c in kb.chunk_ids for u in candidates([(kb.chunks[c].title, kb.chunks[c].text)])[0]}


# -- what the build embeds -------------------------------------------------------------------


def test_the_default_layer_embeds_nothing_and_a_nodes_vector_is_the_mean_of_its_chunks(kb):
    emb = kb.embedder
    emb.calls.clear()
    cost = build_layers(kb, show_progress=False, cluster_size=4)
    layers = load_layers(kb)
    assert layers.top >= 2
    assert emb.encoded == [] and cost["embedded_texts"] == 0
    assert layers.meta["sentence_scoring"] == LEXICAL and layers.meta["node_vectors"] == CHUNK_MEAN
    assert {"summary_seconds", "summary_embed_seconds"} <= set(cost)
    rows = {c: i for i, c in enumerate(kb.chunk_ids)}
    for nid in [*layers.levels[0], *layers.levels[-1]]:  # at every level: the mean over its chunks
        mean = kb.vectors[[rows[c] for c in layers.chunks_under(nid)]].mean(axis=0)
        np.testing.assert_allclose(layers.vector(nid), mean, atol=1e-5)
    # so a question's score for a node is its mean cosine to the node's chunks
    q = kb.embedder.encode(["river delta flood"])[0]
    top = layers.levels[-1][0]
    cosines = kb.vectors[[rows[c] for c in layers.chunks_under(top)]] @ q
    assert layers.vector(top) @ q == pytest.approx(cosines.mean(), abs=1e-5)


def test_summary_text_node_vectors_embed_one_text_per_node_and_no_sentence(kb):
    emb = kb.embedder
    emb.calls.clear()
    cost = build_layers(kb, show_progress=False, cluster_size=4, node_vectors=SUMMARY_TEXT)
    layers = load_layers(kb)
    nodes = sum(len(ids) for ids in layers.levels)
    assert len(emb.encoded) == nodes == cost["embedded_texts"]  # one summary text per node
    assert emb.encoded == [layers.nodes[i].text for ids in layers.levels for i in ids]
    assert not set(emb.encoded) & sentences_of(kb)  # no sentence was embedded on its own
    assert layers.meta["node_vectors"] == SUMMARY_TEXT


def test_the_embedded_scoring_still_embeds_every_candidate_sentence(kb):
    emb = kb.embedder
    emb.calls.clear()
    build_layers(kb, show_progress=False, cluster_size=4, scoring=EMBEDDED)
    layers = load_layers(kb)
    keys = {f"{u[0]}: {u[1]}" for c in kb.chunk_ids for u in candidates([(kb.chunks[c].title, kb.chunks[c].text)])[0]}
    assert keys <= set(emb.encoded)
    assert len(emb.encoded) > 3 * sum(len(ids) for ids in layers.levels)
    assert layers.meta["sentence_scoring"] == EMBEDDED


# -- what a summary picks --------------------------------------------------------------------


def test_a_summary_takes_the_sentences_that_carry_the_clusters_words_within_budget():
    passages = [
        ("Rivers", "The river floods the delta every spring. Tickets cost four dollars at the gate."),
        ("Rivers", "Spring floods raise the river over its delta banks. The delta river floods in spring."),
        ("Rivers", "A river delta floods when spring rain swells the river."),
    ]
    vecs = np.tile(np.eye(4, dtype=np.float32)[0], (3, 1))  # every passage equally central
    units = lexical_select(passages, vecs, vecs[0], max_words=20)
    chosen = [u[1] for u in units]
    assert "Tickets cost four dollars at the gate." not in chosen  # off the cluster's words
    assert sum(len(s.split()) for s in chosen) + 1 <= 20  # the title "Rivers" counts once
    assert chosen and all(any(s in p for _, p in passages) for s in chosen)  # quoted, in passage order


def test_a_sentence_from_a_passage_far_from_the_centroid_loses_a_tie():
    same = "Glaciers carve valleys over many centuries."
    passages = [("Far", same), ("Near", same.replace("many", "countless"))]
    center = np.array([1.0, 0.0], dtype=np.float32)
    vecs = np.array([[0.0, 1.0], [1.0, 0.0]], dtype=np.float32)  # the second passage sits at the centroid
    units = lexical_select(passages, vecs, center, max_words=8)
    assert [u[0] for u in units] == ["Near"]


def test_near_repeats_are_not_taken_twice_and_word_vectors_are_unit_rows():
    s1 = "The Ardmere lighthouse was built in 1871 by the harbour board."
    s2 = "The Ardmere lighthouse was built in 1871 by the harbour board again."
    x = word_vectors([s1, s2, "and the of"], [s1, s2])
    np.testing.assert_allclose(np.linalg.norm(x[:2], axis=1), 1.0, atol=1e-6)
    assert not x[2].any()  # stop words only: no term, a zero row
    vecs = np.ones((2, 2), dtype=np.float32) / np.sqrt(2)
    units = lexical_select([("", s1), ("", s2)], vecs, vecs[0], max_words=100)
    assert len(units) == 1


def test_a_cluster_without_usable_sentences_still_gets_a_summary_in_budget():
    passages = [("T", "fragment only"), ("T", "lowercase start of a sentence that was cut")]
    units = lexical_select(passages, np.ones((2, 2), np.float32), np.ones(2, np.float32), max_words=5)
    assert units and len(units[0][1].split()) <= 4  # the title's word counts against the budget


# -- updates, old layers, index --------------------------------------------------------------


@pytest.mark.parametrize(
    "how", [{}, {"node_vectors": SUMMARY_TEXT}, {"scoring": EMBEDDED, "node_vectors": SUMMARY_TEXT}]
)
def test_an_update_keeps_the_layers_scoring_and_equals_a_rebuild_of_the_same_tree(kb, how):
    build_layers(kb, show_progress=False, cluster_size=4, **how)
    add_documents(kb, make_docs(1, {"river": TOPICS["river"]}, seed=9, prefix="Extra "), show_progress=False)
    after = load_layers(kb)
    check_tree(kb, after)
    assert after.meta["updates"][-1]["mode"] == "incremental"
    assert scoring_of(after.meta) == how.get("scoring", LEXICAL)
    assert node_vectors_of(after.meta) == how.get("node_vectors", CHUNK_MEAN)
    assert_same(after, layers_from_structure(kb, after.structure(), **how))


def test_layers_from_before_the_keys_read_as_embedded_and_another_scoring_rebuilds(kb):
    assert scoring_of({"summarizer": "extractive"}) == EMBEDDED  # meta.json before issue 57
    assert node_vectors_of({"summarizer": "extractive"}) == SUMMARY_TEXT
    assert scoring_of({"summarizer": "llm"}) is None
    build_layers(kb, show_progress=False, cluster_size=4, scoring=EMBEDDED)
    assert build_layers(kb, show_progress=False, cluster_size=4, scoring=EMBEDDED)["mode"] == "unchanged"
    assert build_layers(kb, show_progress=False, cluster_size=4)["mode"] == "build"
    assert load_layers(kb).meta["sentence_scoring"] == LEXICAL


def test_index_reports_its_time_per_phase_and_builds_the_old_layer_on_request(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i, d in enumerate(make_docs(2)):
        (docs / f"doc{i}.md").write_text(f"# {d.title}\n\n{d.text}\n")
    result = index_sources(tmp_path / "kb", [docs], embedder=HashedBowEmbedder(dim=128), show_progress=False)
    assert set(result.phases) == {"read", "chunks", "layers"}
    assert all(p["seconds"] >= 0 and p["cpu_seconds"] >= 0 for p in result.phases.values())
    out = CliRunner().invoke(
        main,
        ["index", str(docs), "--kb", str(tmp_path / "old"), "--summaries", "extractive-embedded"],
        obj={"embedder": HashedBowEmbedder(dim=128)},
    )
    assert out.exit_code == 0, out.output
    assert "time: reading" in out.output and "summary layer" in out.output and "% of" in out.output
    meta = json.loads((tmp_path / "old" / "layers" / "meta.json").read_text())
    assert meta["summarizer"] == "extractive" and meta["sentence_scoring"] == EMBEDDED
    assert meta["node_vectors"] == SUMMARY_TEXT
