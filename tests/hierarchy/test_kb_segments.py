"""Commits cost what changed: a KB keeps its chunks and vectors in append-only segments
(hierarchy.kb_segments), so an add writes the added chunks and a delete the deleted ids, never
the KB again; compaction, KBs of format 1, check, repair and a writer killed mid-add.
Fake embedder: no model loads."""

from __future__ import annotations

import io
import json
import multiprocessing as mp
import os
import signal
from pathlib import Path

import numpy as np
import pytest

from engine.floor.base.errors import KBError
from hierarchy import kb_segments, store
from hierarchy.documents import Document
from hierarchy.kb import MANIFEST, KnowledgeBase
from hierarchy.kb_check import check_kb
from hierarchy.kb_repair import repair_kb
from hierarchy.lexical import ANALYSIS
from hierarchy.vector_store.base import FAISS, FAISS_HNSW, StoreSpec
from tests.fakes import HashedBowEmbedder
from tests.samples import make_docs

DIM = 128


def _emb() -> HashedBowEmbedder:
    return HashedBowEmbedder(dim=DIM)


def _kb(path: Path, per_topic: int = 25, store_kind: str = FAISS) -> KnowledgeBase:
    spec = StoreSpec(FAISS_HNSW, exact_max=0) if store_kind == FAISS_HNSW else StoreSpec()
    kb = KnowledgeBase.create(path, _emb(), chunk_words=200, overlap_words=0, store=spec)
    kb.add(make_docs(per_topic), show_progress=False)  # one chunk a document
    return kb


def _files(path: Path) -> dict[str, tuple[int, int, int]]:
    return {f.name: (f.stat().st_ino, f.stat().st_mtime_ns, f.stat().st_size) for f in path.iterdir() if f.is_file()}


def _written(before: dict, after: dict) -> dict[str, int]:
    """Bytes of every file that is new or was rewritten between two listings."""
    return {n: a[2] for n, a in after.items() if before.get(n, (None, None))[:2] != a[:2]}


def _data_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.glob("seg-*"))


def _state(kb: KnowledgeBase) -> tuple[list[str], np.ndarray]:
    return list(kb.chunk_ids), np.array(kb.vectors)


# -- what a commit writes --------------------------------------------------------------------


def test_adding_one_percent_of_documents_writes_about_one_percent_of_the_kb(tmp_path):
    kb = _kb(tmp_path / "kb")
    n, size = len(kb), _data_bytes(kb.path)
    before = _files(kb.path)
    kb.add(make_docs(1, prefix="new ")[:2], show_progress=False)  # 2 chunks onto 200
    written = _written(before, _files(kb.path))
    data = sum(b for name, b in written.items() if name.startswith("seg-"))
    assert len(kb) == n + 2 and set(written) - {MANIFEST, ".lock"} == {p.name for p in kb.path.glob("seg-*")} - set(
        before
    )  # only new segment files: no committed file was rewritten
    assert data < 0.02 * size  # 1% of the chunks, and a segment's fixed header
    assert written[MANIFEST] < 4_000  # the manifest grows with the segments, not the chunks
    assert _state(KnowledgeBase.open(kb.path, _emb()))[0] == kb.chunk_ids


def test_deleting_one_percent_of_documents_writes_only_the_ids_it_removes(tmp_path):
    kb = _kb(tmp_path / "kb")
    before = _files(kb.path)
    assert kb.delete(["river-0", "volcano-3"]) == 2
    written = _written(before, _files(kb.path))
    assert set(written) - {".lock"} == {MANIFEST, kb_segments.Segment(2, 0, 2).deleted_file}
    assert sum(written.values()) < 4_000
    again = KnowledgeBase.open(kb.path, _emb())
    assert len(again) == 198 and "river-0" not in again.doc_ids and again.index.ntotal == 198
    assert check_kb(kb.path).ok


def test_a_document_whose_source_changed_rewrites_only_its_chunk_and_keeps_its_place(tmp_path):
    kb = _kb(tmp_path / "kb", per_topic=3)
    doc = make_docs(3)[4]
    before = _files(kb.path)
    kb.add([Document(doc.id, doc.title, doc.text, {"source": "https://example.org/moved"})], show_progress=False)
    written = _written(before, _files(kb.path))
    seg = kb_segments.Segment(2, 1, lexical=ANALYSIS)
    assert sorted(written) == [MANIFEST, seg.chunks_file, seg.lexical_file, seg.vectors_file]
    again = KnowledgeBase.open(kb.path, _emb())
    assert again.chunk_ids == kb.chunk_ids and np.array_equal(again.vectors, kb.vectors)
    assert again.chunks[again.chunk_ids[4]].source == "https://example.org/moved"


def test_a_delete_from_an_hnsw_graph_marks_its_rows_and_rebuilds_only_past_a_fifth(tmp_path):
    kb = _kb(tmp_path / "kb", per_topic=5, store_kind=FAISS_HNSW)  # 40 chunks in a graph
    graph = kb.index
    kb.delete(["river-0", "volcano-1"])
    assert kb.index is graph and kb.index.ntotal == 40 and kb.store.count() == 38  # no rebuild, no copy
    hits = [h.doc_id for h in kb.search("lava eruption volcano crater", k=38)]
    assert len(hits) == 38 and not {"river-0", "volcano-1"} & set(hits)
    again = KnowledgeBase.open(kb.path, _emb())
    assert again.store.count() == 38 and again.index.ntotal == 40 and check_kb(kb.path).index == 38
    assert [h.doc_id for h in again.search("lava eruption volcano crater", k=38)] == hits
    kb.delete([f"opera-{i}" for i in range(5)] + ["ship-0", "ship-1"])  # 9 of 40 rows deleted: past a fifth
    assert kb.index.ntotal == 31 and kb.store.count() == 31 and check_kb(kb.path).ok


# -- compaction -------------------------------------------------------------------------------


def test_compaction_keeps_every_live_chunk_and_drops_deleted_ones(tmp_path, monkeypatch):
    kb = _kb(tmp_path / "kb", per_topic=5)  # 40 chunks
    kb.add(make_docs(1, prefix="a "), show_progress=False)
    kb.delete(["river-0", "a river-0", "opera-1"])
    assert len(json.loads((kb.path / MANIFEST).read_text())["segments"]) == 3  # garbage 3/48: under 20%
    ids, vectors = _state(kb)
    kb.delete([f"river-{i}" for i in range(1, 5)] + [f"volcano-{i}" for i in range(5)])  # 12 of 48 rows: past 20%
    manifest = json.loads((kb.path / MANIFEST).read_text())
    assert [s["rows"] for s in manifest["segments"]] == [len(kb)] and len(kb) == len(ids) - 9
    assert sorted(p.name for p in kb.path.glob("seg-*")) == sorted(manifest["files"])  # old segments pruned
    again = KnowledgeBase.open(kb.path, _emb())
    live = [i for i, c in enumerate(ids) if c in again.chunks]
    assert again.chunk_ids == [ids[i] for i in live] and np.array_equal(again.vectors, vectors[live])
    text = "".join(p.read_text() for p in kb.path.glob("seg-*.chunks.jsonl"))
    assert '"river-1"' not in text and '"opera-1"' not in text and '"a volcano-0"' in text
    assert check_kb(kb.path).ok


def test_segments_past_their_limit_are_compacted_into_one(tmp_path, monkeypatch):
    monkeypatch.setattr(kb_segments, "COMPACT_SEGMENTS", 3)
    kb = _kb(tmp_path / "kb", per_topic=2)
    counts = []
    for i in range(4):
        kb.add(make_docs(1, prefix=f"batch{i} ")[:1], show_progress=False)
        counts.append(len(json.loads((kb.path / MANIFEST).read_text())["segments"]))
    assert counts == [2, 3, 1, 2] and len(KnowledgeBase.open(kb.path, _emb())) == 20


# -- format 1 ---------------------------------------------------------------------------------


def _as_format_1(kb: KnowledgeBase) -> None:
    """Rewrite the KB's folder as logicroute wrote it before segments: one chunks.jsonl,
    vectors.npy and index.faiss, a manifest of format_version 1 without "segments"."""
    import faiss

    buf = io.BytesIO()
    np.save(buf, kb.vectors, allow_pickle=False)
    index = faiss.IndexFlatIP(kb.dim)
    index.add(kb.vectors)
    payload = {
        "chunks.jsonl": "".join(json.dumps(kb.chunks[c].to_dict()) + "\n" for c in kb.chunk_ids).encode(),
        "vectors.npy": buf.getvalue(),
        "index.faiss": faiss.serialize_index(index).tobytes(),
    }
    manifest = {k: v for k, v in kb.manifest.items() if k != "segments"}
    manifest.update(format_version=1, files={n: store.fingerprint(b) for n, b in payload.items()})
    for p in kb.path.glob("seg-*"):
        p.unlink()
    for name, data in payload.items():
        (kb.path / name).write_bytes(data)
    (kb.path / MANIFEST).write_text(json.dumps(manifest))


def test_a_kb_of_format_1_opens_as_it_is_and_its_first_write_migrates_it(tmp_path):
    kb = _kb(tmp_path / "kb", per_topic=3)
    ids, vectors = _state(kb)
    hits = [h.chunk_id for h in kb.search("lava eruption", k=5, retrieval="dense")]  # what format 1 does
    _as_format_1(kb)
    old = KnowledgeBase.open(kb.path, _emb())
    assert old.chunk_ids == ids and np.array_equal(old.vectors, vectors)
    assert [h.chunk_id for h in old.search("lava eruption", k=5)] == hits
    report = check_kb(kb.path)
    assert report.ok and set(report.files) == {"chunks.jsonl", "vectors.npy", "index.faiss"}
    old.add(make_docs(1, prefix="new ")[:1], show_progress=False)
    manifest = json.loads((kb.path / MANIFEST).read_text())
    assert manifest["format_version"] == 2 and [s["rows"] for s in manifest["segments"]] == [len(ids) + 1]
    assert not any((kb.path / n).exists() for n in ("chunks.jsonl", "vectors.npy", "index.faiss"))
    again = KnowledgeBase.open(kb.path, _emb())
    assert again.chunk_ids[:-1] == ids and np.array_equal(again.vectors[:-1], vectors)
    assert check_kb(kb.path).ok


def test_a_kb_of_a_newer_format_is_refused_with_a_clear_error_and_repair_leaves_it_alone(tmp_path):
    kb = _kb(tmp_path / "kb", per_topic=1)
    manifest = json.loads((kb.path / MANIFEST).read_text())
    (kb.path / MANIFEST).write_text(json.dumps({**manifest, "format_version": 3, "segments": "a newer layout"}))
    before = _files(kb.path)
    with pytest.raises(KBError, match="format_version 3, written by a newer logicroute") as e:
        KnowledgeBase.open(kb.path, _emb())
    assert "repair" not in str(e.value)
    with pytest.raises(KBError, match="newer logicroute"):
        repair_kb(kb.path, embedder=_emb(), show_progress=False)
    assert {n: v for n, v in _files(kb.path).items() if n != ".lock"} == {
        n: v for n, v in before.items() if n != ".lock"
    }


# -- check and repair -------------------------------------------------------------------------


def _three_segments(path: Path) -> KnowledgeBase:
    kb = _kb(path, per_topic=4)  # 32 chunks
    kb.add(make_docs(1, prefix="b "), show_progress=False)  # segment 2: 8 chunks
    kb.delete(["river-0"])  # segment 3: one id
    return kb


def test_check_names_the_damaged_segment_and_repair_embeds_only_its_chunks_again(tmp_path):
    kb = _three_segments(tmp_path / "kb")
    ids, vectors = _state(kb)
    damaged = kb_segments.Segment(2, 8).vectors_file
    (kb.path / damaged).write_bytes(b"garbage")
    report = check_kb(kb.path)
    assert not report.ok and report.files[damaged] == "mismatch"
    # segments 1 and 2's chunks and lexical postings, segment 1's vectors, the deletion
    assert sum(v == "ok" for v in report.files.values()) == 6
    out = repair_kb(kb.path, embedder=_emb(), show_progress=False)
    assert out.rebuilt and out.embedded == 8 and out.lost_lines == 0
    fixed = KnowledgeBase.open(kb.path, _emb())
    assert fixed.chunk_ids == ids and np.allclose(fixed.vectors, vectors, atol=1e-6)
    assert check_kb(kb.path).ok and len(json.loads((kb.path / MANIFEST).read_text())["segments"]) == 1


def test_a_damaged_deletion_list_is_reported_and_repair_says_what_may_be_back(tmp_path):
    kb = _three_segments(tmp_path / "kb")
    deleted = kb_segments.Segment(3, 0, 1).deleted_file
    (kb.path / deleted).write_text('["not the id"]')
    assert check_kb(kb.path).files[deleted] == "mismatch"
    out = repair_kb(kb.path, embedder=_emb(), show_progress=False)
    assert any(deleted in n and "may be back" in n for n in out.notes) and out.chunks == 40
    assert check_kb(kb.path).ok


def test_without_a_readable_manifest_repair_replays_every_segment_on_disk(tmp_path):
    kb = _three_segments(tmp_path / "kb")
    ids, vectors = _state(kb)
    (kb.path / MANIFEST).write_text("{not json")
    out = repair_kb(kb.path, embedder=_emb(), show_progress=False)
    assert out.rebuilt and out.chunks == 39 and out.embedded == 39  # no fingerprint vouches for any vector
    fixed = KnowledgeBase.open(kb.path, _emb())
    assert fixed.chunk_ids == ids and np.allclose(fixed.vectors, vectors, atol=1e-6) and check_kb(kb.path).ok


# -- a writer killed with SIGKILL in the middle of an incremental add ------------------------

CTX = mp.get_context("spawn")


def _build(kb_dir: str, store_kind: str) -> None:
    _kb(Path(kb_dir), per_topic=4, store_kind=store_kind)


def _killed_while_committing(kb_dir: str, when: str) -> None:
    """Opens the KB and adds 8 documents; dies after the first data file is written ("data") or
    after every data file, before the manifest ("manifest")."""
    from hierarchy import store as commits

    write = commits.atomic_write_bytes

    def die_after_first(path, data, **kw):
        write(path, data, **kw)
        os.kill(os.getpid(), signal.SIGKILL)

    def die(*a, **k):
        os.kill(os.getpid(), signal.SIGKILL)

    if when == "data":
        commits.atomic_write_bytes = die_after_first
    else:
        commits.atomic_write_json = die
    kb = KnowledgeBase.open(kb_dir, _emb())
    kb.add(make_docs(1, prefix="killed "), show_progress=False)


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
@pytest.mark.parametrize("store_kind", [FAISS, FAISS_HNSW])
@pytest.mark.parametrize("when", ["data", "manifest"])
def test_a_writer_killed_during_an_incremental_add_leaves_the_last_commit_and_the_next_writer_recovers(
    tmp_path, store_kind, when
):
    kb_dir = str(tmp_path / "kb")
    for target, args in ((_build, (kb_dir, store_kind)), (_killed_while_committing, (kb_dir, when))):
        p = CTX.Process(target=target, args=args)
        p.start()
        p.join(120)
    assert p.exitcode == -signal.SIGKILL
    committed = KnowledgeBase.open(kb_dir, _emb())
    assert len(committed) == 32 and committed.index.ntotal == 32 and check_kb(kb_dir).ok
    recorded = json.loads((Path(kb_dir) / MANIFEST).read_text())["files"]
    assert any(p.name not in recorded for p in Path(kb_dir).glob("seg-*"))  # the dead writer's segment
    committed.add(make_docs(1, prefix="killed "), show_progress=False)
    again = KnowledgeBase.open(kb_dir, _emb())
    assert len(again) == 40 and again.index.ntotal == 40 and check_kb(kb_dir).ok
    recorded = json.loads((Path(kb_dir) / MANIFEST).read_text())["files"]
    leftovers = [p.name for p in Path(kb_dir).iterdir() if p.is_file() and p.name not in recorded]
    assert sorted(leftovers) == [".lock", MANIFEST]  # no orphan segment, snapshot or temp file
