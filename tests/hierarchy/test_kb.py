"""KnowledgeBase (chunk level), its commits through hierarchy.store, and atomic writes.

Most tests use a tiny deterministic bag-of-words embedder; the ones that load MiniLM are
marked `embedder` and share the session's one instance."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from engine.floor.base.errors import EmbedderMismatchError, KBCorruptError, KBError, KBNotFoundError
from engine.floor.base.files import atomic_write_bytes, atomic_write_json, atomic_write_text
from hierarchy import store
from hierarchy.documents import Document
from hierarchy.kb import LAYERS_DIR, MANIFEST, KnowledgeBase
from tests.fakes import HashedBowEmbedder, segment_file
from tests.samples import DOCS


@pytest.fixture
def emb() -> HashedBowEmbedder:
    return HashedBowEmbedder()


@pytest.fixture
def kb(tmp_path, emb) -> KnowledgeBase:
    kb = KnowledgeBase.create(tmp_path / "kb", emb, chunk_words=30, overlap_words=5)
    kb.add(DOCS, show_progress=False)
    return kb


def _no_temp_files(path: Path) -> bool:
    return not [p for p in path.rglob("*") if p.name.endswith(".tmp") or p.name.endswith(".prev")]


# -- create / add / search / reopen ----------------------------------------------------------


def test_create_add_search_reopen(kb, emb, tmp_path):
    assert len(kb) == 5 and len(kb.vectors) == 5 and kb.index.ntotal == 5
    assert kb.chunk_ids == [c.id for c in kb.chunks.values()]
    hits = kb.search("capital of Japan", k=2)
    assert hits[0].doc_id == "tokyo" and len(hits) == 2
    assert hits[0].score >= hits[1].score
    m = json.loads((kb.path / MANIFEST).read_text())
    assert m["counts"] == {"documents": 5, "chunks": 5}
    assert m["embedder"]["id"] == "fake-bow" and m["embedder"]["dim"] == 64
    assert m["chunking"]["chunk_words"] == 30 and m["build"]["chunks_embedded"] == 5
    assert {"format_version", "created", "updated", "files"} <= set(m)
    assert m["format_version"] == 2 and set(m["files"]) == {p.name for p in kb.path.glob("seg-*")}
    assert not (kb.path / "index.faiss").exists()  # an exact index is built from the vectors at open
    kb2 = KnowledgeBase.open(kb.path, emb)
    assert kb2.chunk_ids == kb.chunk_ids and np.array_equal(kb2.vectors, kb.vectors)
    assert [h.chunk_id for h in kb2.search("capital of Japan", k=2)] == [h.chunk_id for h in hits]
    assert _no_temp_files(kb.path)


def test_search_accepts_vector_and_batch(kb, emb):
    q = emb.encode(["highest mountain"])[0]
    assert kb.search(q, k=1)[0].doc_id == "everest"
    batch = kb.search_batch(["highest mountain", "long river in Africa"], k=2)
    assert [b[0].doc_id for b in batch] == ["everest", "nile"]
    assert [h.chunk_id for h in batch[1]] == [h.chunk_id for h in kb.search("long river in Africa", k=2)]
    assert kb.search("anything", k=0) == [] and kb.search_batch([], k=3) == []


def test_empty_kb_search(tmp_path, emb):
    kb = KnowledgeBase.create(tmp_path / "e", emb)
    assert len(kb) == 0 and kb.search("x") == []
    assert len(KnowledgeBase.open(tmp_path / "e", emb)) == 0


def test_add_embeds_only_new_chunks(kb, emb):
    emb.calls.clear()
    new = Document("nile2", "Amazon", "The Amazon is a river in South America.")
    r = kb.add(DOCS + [new], show_progress=False)
    assert r["added_chunks"] == 1 and r["unchanged_chunks"] == 5 and r["duplicate_chunks"] == 0
    assert r["documents"] == 6 and r["unchanged_documents"] == 5
    assert len(emb.calls) == 1 and len(emb.encoded) == 1 and "Amazon" in emb.encoded[0]
    assert len(kb) == 6
    emb.calls.clear()
    r = kb.add(DOCS, show_progress=False)  # nothing new: no encode call, no rewrite
    assert r["added_chunks"] == 0 and emb.calls == []


def test_identical_chunk_under_another_doc_id_dedupes(kb, emb):
    emb.calls.clear()
    r = kb.add([Document("paris-copy", "Paris", DOCS[0].text)], show_progress=False)
    assert r == {**r, "added_chunks": 0, "duplicate_chunks": 1, "unchanged_chunks": 0} and emb.calls == []


def test_changed_document_replaces_its_chunks(tmp_path, emb):
    kb = KnowledgeBase.create(tmp_path / "kb", emb, chunk_words=6, overlap_words=0)
    text = "First sentence is here now. Second sentence is right here. Third one ends it."
    kb.add([Document("d", "T", text)], show_progress=False)
    old = {c.id: c.text for c in kb.chunks_of("d")}
    assert len(old) == 3
    emb.calls.clear()
    r = kb.add([Document("d", "T", text.replace("Third one ends it.", "A new ending."))], show_progress=False)
    assert r["added_chunks"] == 1 and r["removed_chunks"] == 1
    assert emb.encoded == ["T\nA new ending."]  # unchanged chunks not re-embedded
    assert [c.text for c in kb.chunks_of("d")][-1] == "A new ending."
    assert len(kb) == 3 and kb.index.ntotal == 3
    kb2 = KnowledgeBase.open(kb.path, emb)
    assert kb2.chunk_ids == kb.chunk_ids
    assert kb2.search("new ending", k=1)[0].text == "A new ending."


def test_delete_and_reopen(kb, emb):
    n = kb.delete(["tokyo", "unknown-doc"])
    assert n == 1 and len(kb) == 4 and kb.index.ntotal == 4
    assert "tokyo" not in {h.doc_id for h in kb.search("capital of Japan", k=4)}
    assert kb.delete("tokyo") == 0
    kb2 = KnowledgeBase.open(kb.path, emb)
    assert len(kb2) == 4 and kb2.manifest["counts"] == {"documents": 4, "chunks": 4}
    assert np.array_equal(kb2.vectors, kb.vectors)
    kb2.delete([d.id for d in DOCS])
    assert len(KnowledgeBase.open(kb.path, emb)) == 0


def test_exclude_widens_to_return_k_new_chunks(kb):
    first = kb.search("capital", k=2)
    more = kb.search("capital", k=2, exclude={h.chunk_id for h in first})
    assert len(more) == 2
    assert not {h.chunk_id for h in more} & {h.chunk_id for h in first}
    everything_but_one = set(kb.chunk_ids[1:]) | {"not-a-chunk"}
    rest = kb.search("capital", k=3, exclude=everything_but_one)
    assert [h.chunk_id for h in rest] == [kb.chunk_ids[0]]  # KB exhausted: fewer than k
    assert kb.search("capital", k=3, exclude=set(kb.chunk_ids)) == []


def test_create_refuses_existing_kb_unless_overwrite(kb, emb):
    with pytest.raises(KBError, match="already exists"):
        KnowledgeBase.create(kb.path, emb)
    (kb.path / LAYERS_DIR).mkdir()
    kb2 = KnowledgeBase.create(kb.path, emb, overwrite=True)
    assert len(kb2) == 0 and not (kb.path / LAYERS_DIR).exists()


# -- open: errors ----------------------------------------------------------------------------


def test_open_missing_kb(tmp_path, emb):
    with pytest.raises(KBNotFoundError) as e:
        KnowledgeBase.open(tmp_path / "nowhere", emb)
    assert str(tmp_path / "nowhere") in str(e.value) and "logicroute index" in str(e.value)


def test_corrupt_manifest(kb, emb):
    (kb.path / MANIFEST).write_text("{not json")
    with pytest.raises(KBCorruptError, match="logicroute check --repair --kb"):
        KnowledgeBase.open(kb.path, emb)


def test_missing_vectors(kb, emb):
    segment_file(kb.path, "vectors").unlink()
    with pytest.raises(KBCorruptError, match=r"vectors\.npy is missing"):
        KnowledgeBase.open(kb.path, emb)


def test_manifest_count_mismatch(kb, emb):
    m = json.loads((kb.path / MANIFEST).read_text())
    m["counts"]["chunks"] = 7
    (kb.path / MANIFEST).write_text(json.dumps(m))
    with pytest.raises(KBCorruptError, match="manifest says 7 chunks"):
        KnowledgeBase.open(kb.path, emb)


def test_files_changed_behind_the_manifest(kb, emb):
    with segment_file(kb.path, "chunks").open("a") as f:
        f.write(json.dumps({"id": "x", "doc_id": "x", "title": "", "text": "x", "position": 0}) + "\n")
    with pytest.raises(KBCorruptError, match=r"chunks\.jsonl"):
        KnowledgeBase.open(kb.path, emb)


def test_embedder_mismatch(kb):
    other = HashedBowEmbedder(id="other-model")
    with pytest.raises(EmbedderMismatchError) as e:
        KnowledgeBase.open(kb.path, other)
    assert "fake-bow" in str(e.value) and "other-model" in str(e.value)
    with pytest.raises(EmbedderMismatchError):
        KnowledgeBase.open(kb.path, HashedBowEmbedder(dim=32))


# -- crash safety ----------------------------------------------------------------------------


def _boom(*a, **k):
    raise RuntimeError("simulated crash before the manifest")


def test_interrupted_add_leaves_previous_state(kb, emb, monkeypatch):
    before = list(kb.chunk_ids)
    monkeypatch.setattr(store, "atomic_write_json", _boom)  # data files written, manifest not
    with pytest.raises(RuntimeError, match="simulated"):
        kb.add([Document("new", "New", "A brand new document about volcanoes.")], show_progress=False)
    assert kb.chunk_ids == before  # in memory unchanged
    monkeypatch.undo()
    kb2 = KnowledgeBase.open(kb.path, emb)
    assert kb2.chunk_ids == before and kb2.index.ntotal == len(before)
    assert _no_temp_files(kb.path)
    kb2.add([Document("new", "New", "A brand new document about volcanoes.")], show_progress=False)
    assert len(KnowledgeBase.open(kb.path, emb)) == len(before) + 1


def test_crash_without_rollback_is_read_as_committed_and_repaired_by_the_next_writer(kb, emb, monkeypatch):
    """A hard crash (no except clause runs): the new segment on disk, the old manifest naming the old ones."""
    before = list(kb.chunk_ids)
    monkeypatch.setattr(store, "atomic_write_json", _boom)
    monkeypatch.setattr(store, "restore_snapshots", lambda directory, names: None)
    with pytest.raises(RuntimeError):
        kb.delete(["paris", "berlin"])
    monkeypatch.undo()
    recorded = json.loads((kb.path / MANIFEST).read_text())["files"]
    orphans = [p for p in kb.path.glob("seg-*") if p.name not in recorded]  # the uncommitted change
    assert orphans
    files = {f.name: f.stat().st_ino for f in kb.path.iterdir()}
    kb2 = KnowledgeBase.open(kb.path, emb)
    assert kb2.chunk_ids == before  # the committed state, read from the snapshots
    assert {f.name: f.stat().st_ino for f in kb.path.iterdir()} == files  # a reader changes nothing
    kb2.add([Document("mars", "Mars", "Mars is the red planet.")], show_progress=False)  # a writer repairs first
    assert KnowledgeBase.open(kb.path, emb).chunk_ids[:5] == before
    recorded = json.loads((kb.path / MANIFEST).read_text())["files"]
    assert {p.name for p in kb.path.glob("seg-*")} == set(recorded)  # the dead change's files went or were reused
    assert not list(kb.path.glob("*.prev")) and _no_temp_files(kb.path)


def test_readers_during_a_writers_commits_see_committed_states_and_change_nothing(kb, emb):
    """Opens racing 5 adds in another thread: each sees a whole commit; the KB survives."""
    import threading

    sizes, errors, done = set(), [], threading.Event()

    def read_loop():
        while not done.is_set():
            try:
                k = KnowledgeBase.open(kb.path, emb)
                sizes.add((len(k), k.index.ntotal))
            except KBCorruptError as e:  # pragma: no cover - the failure this test exists for
                errors.append(str(e))

    reader = threading.Thread(target=read_loop)
    reader.start()
    try:
        for i in range(5):
            kb.add([Document(f"d{i}", f"Doc {i}", f"Document number {i} about topic {i}.")], show_progress=False)
    finally:
        done.set()
        reader.join()
    assert errors == []
    assert all(n == ntotal for n, ntotal in sizes) and sizes <= {(5 + i, 5 + i) for i in range(6)}
    assert len(KnowledgeBase.open(kb.path, emb)) == 10


def test_change_after_failed_rollback_restores_first(kb, emb, monkeypatch):
    before = list(kb.chunk_ids)
    monkeypatch.setattr(store, "atomic_write_json", _boom)
    monkeypatch.setattr(store, "restore_snapshots", lambda directory, names: None)
    with pytest.raises(RuntimeError):
        kb.delete(["paris", "berlin"])
    monkeypatch.undo()
    kb.add([Document("mars", "Mars", "Mars is the red planet.")], show_progress=False)  # same object
    kb2 = KnowledgeBase.open(kb.path, emb)
    assert kb2.chunk_ids[:5] == before and len(kb2) == 6 and kb2.index.ntotal == 6
    assert _no_temp_files(kb.path)


def test_change_by_another_process_is_not_overwritten(kb, emb):
    other = KnowledgeBase.open(kb.path, emb)
    other.add([Document("mars", "Mars", "Mars is the red planet.")], show_progress=False)
    with pytest.raises(KBError, match="changed by another process"):
        kb.add([Document("venus", "Venus", "Venus is hot.")], show_progress=False)
    assert len(KnowledgeBase.open(kb.path, emb)) == 6


# -- manifest entries of the layers above -----------------------------------------------------


def test_annotate_commits_an_entry_and_keeps_the_data(kb, emb):
    files = dict(kb.manifest["files"])
    kb.annotate("summaries", {"levels": 2})
    assert kb.manifest["summaries"] == {"levels": 2} and kb.manifest["files"] == files
    kb2 = KnowledgeBase.open(kb.path, emb)
    assert kb2.manifest["summaries"] == {"levels": 2} and kb2.chunk_ids == kb.chunk_ids
    kb2.add([Document("mars", "Mars", "Mars is the red planet.")], show_progress=False)
    assert KnowledgeBase.open(kb.path, emb).manifest["summaries"] == {"levels": 2}  # kept by later commits


def test_annotate_refuses_the_kbs_own_entries_and_stale_objects(kb, emb):
    with pytest.raises(KBError, match="belongs to the knowledge base"):
        kb.annotate("counts", {})
    other = KnowledgeBase.open(kb.path, emb)
    other.add([Document("mars", "Mars", "Mars is the red planet.")], show_progress=False)
    with pytest.raises(KBError, match="changed by another process"):
        kb.annotate("summaries", {"levels": 1})
    assert "summaries" not in KnowledgeBase.open(kb.path, emb).manifest


def test_failed_annotate_changes_nothing(kb, emb, monkeypatch):
    monkeypatch.setattr(store, "atomic_write_json", _boom)
    with pytest.raises(RuntimeError):
        kb.annotate("summaries", {"levels": 1})
    monkeypatch.undo()
    assert "summaries" not in kb.manifest
    assert "summaries" not in KnowledgeBase.open(kb.path, emb).manifest


# -- atomic writes ---------------------------------------------------------------------------


def test_atomic_write_leaves_no_temp_files(tmp_path):
    atomic_write_text(tmp_path / "a" / "t.txt", "hello")
    atomic_write_json(tmp_path / "a" / "j.json", {"k": "é"})
    atomic_write_bytes(tmp_path / "a" / "b.bin", b"\x00\x01")
    assert (tmp_path / "a" / "t.txt").read_text() == "hello"
    assert json.loads((tmp_path / "a" / "j.json").read_text(encoding="utf-8")) == {"k": "é"}
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["b.bin", "j.json", "t.txt"]


def test_atomic_write_failure_keeps_old_file(tmp_path, monkeypatch):
    p = tmp_path / "f.txt"
    atomic_write_text(p, "old")

    def fail(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        atomic_write_text(p, "new")
    monkeypatch.undo()
    assert p.read_text() == "old" and [x.name for x in tmp_path.iterdir()] == ["f.txt"]


# -- with the real MiniLM --------------------------------------------------------------------


@pytest.mark.embedder
def test_kb_with_real_embedder(tmp_path, real_embedder):
    kb = KnowledgeBase.create(tmp_path / "kb", real_embedder)
    r = kb.add(DOCS, show_progress=False)
    assert r["added_chunks"] == 5
    assert kb.search("Which city is Japan's capital?", k=1)[0].doc_id == "tokyo"
    assert kb.search("tallest peak in the world", k=1)[0].doc_id == "everest"
    kb2 = KnowledgeBase.open(kb.path, real_embedder)
    assert kb2.manifest["embedder"] == {"id": "all-MiniLM-L6-v2", "dim": 384, "model": None}
    assert [h.doc_id for h in kb2.search_batch(["river in Africa"], k=1)[0]] == ["nile"]
