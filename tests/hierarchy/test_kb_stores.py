"""A knowledge base on each vector store: the manifest remembers the store, a KB on Milvus (Lite,
and a standalone server: every Milvus spec runs on both) retrieves exactly what the same KB on
faiss retrieves, a KB moves between stores, and a Milvus store, written outside the KB folder's
commit, never shows a reader rows of a change that has not committed (or died), and the next
writer, `check` and `repair` settle them."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from engine.face.cli import main
from engine.floor.base.errors import KBCorruptError, KBError
from hierarchy.documents import Document
from hierarchy.indexing import add_documents, delete_documents, index_sources
from hierarchy.kb import MANIFEST, KnowledgeBase
from hierarchy.kb_check import check_kb
from hierarchy.kb_repair import repair_kb
from hierarchy.kb_stores import JOURNAL
from hierarchy.vector_store.base import EXACT_MAX, FAISS_HNSW, StoreSpec, parse_store
from tests.fakes import layered_kb
from tests.samples import make_docs

pytest.importorskip("pymilvus")
pytest.importorskip("milvus_lite")

DOCS = make_docs(6)  # 48 documents in 8 topics
QUESTIONS = [
    "Which river had a flood in its delta basin?",
    "Who was the soprano in the opera premiere?",
    "How much lava came out of the volcano crater?",
    "Which club signed the striker?",
    "When did the ship's captain sail from the harbour?",
    "What loan did the bank give?",
]


@pytest.fixture(params=["milvus-lite", "milvus-server"])
def milvus(request) -> str:
    """The --store of a KB on Milvus: Milvus Lite in the KB folder, or the session's server."""
    if request.param == "milvus-lite":
        return "milvus"
    return f"milvus://{request.getfixturevalue('milvus_server').uri}"


def _hits(kb: KnowledgeBase, q: str, k: int = 5, exclude=()) -> list[tuple[str, float]]:
    return [(h.chunk_id, round(h.score, 4)) for h in kb.search(q, k=k, exclude=exclude)]


def _kb(path, emb, store=None) -> KnowledgeBase:
    kb = KnowledgeBase.create(path, emb, chunk_words=200, overlap_words=0, store=store)
    kb.add(DOCS, show_progress=False)
    return kb


def test_a_kb_with_no_store_named_searches_exactly_below_20k_chunks_and_on_hnsw_past_it(tmp_path, emb):
    kb = _kb(tmp_path / "kb", emb)
    manifest = json.loads((tmp_path / "kb" / MANIFEST).read_text())
    assert manifest["store"] == {"kind": FAISS_HNSW, "exact_max": EXACT_MAX}
    assert kb.store.describe()["type"] == "faiss.IndexFlatIP"  # exact: the same hits as `faiss`
    assert _hits(kb, QUESTIONS[0]) == _hits(_kb(tmp_path / "exact", emb, store="faiss"), QUESTIONS[0])


def test_the_manifest_remembers_the_store_and_opening_uses_it(milvus, tmp_path, emb):
    _kb(tmp_path / "kb", emb, store=milvus)
    manifest = json.loads((tmp_path / "kb" / MANIFEST).read_text())
    assert manifest["store"]["kind"] == "milvus" and manifest["store"]["uri"] == parse_store(milvus).uri
    assert manifest["store"]["collection"].startswith("logicroute_")
    # the rows live in Milvus; the folder holds the chunks, their vectors (what the layers read) and postings
    assert {n.split(".", 1)[1] for n in manifest["files"]} == {"chunks.jsonl", "vectors.npy", "lexical.npz"}
    again = KnowledgeBase.open(tmp_path / "kb", emb)
    assert again.store.spec.kind == "milvus" and len(again) == 48
    assert again.search(QUESTIONS[0], k=1)[0].title.startswith("River")


def test_a_kb_on_milvus_retrieves_the_same_chunks_as_the_kb_on_faiss(milvus, tmp_path, emb):
    on_faiss = _kb(tmp_path / "faiss", emb)
    on_milvus = _kb(tmp_path / "milvus", emb, store=milvus)
    for q in QUESTIONS:
        first = _hits(on_faiss, q)
        assert _hits(on_milvus, q) == first
        excluded = [c for c, _ in first[:3]]  # sampling without replacement, as the logic route does
        assert _hits(on_milvus, q, exclude=excluded) == _hits(on_faiss, q, exclude=excluded)
    batch_f = [[h.chunk_id for h in hs] for hs in on_faiss.search_batch(QUESTIONS, k=4)]
    assert [[h.chunk_id for h in hs] for hs in on_milvus.search_batch(QUESTIONS, k=4)] == batch_f


def test_a_kb_moved_from_faiss_to_milvus_retrieves_the_same_chunks(milvus, tmp_path, emb):
    path = tmp_path / "kb"
    kb = _kb(path, emb)
    before = {q: _hits(kb, q) for q in QUESTIONS}
    result = index_sources(path, [], embedder=emb, summaries="none", store=parse_store(milvus))
    assert result.moved_store == parse_store(milvus).label()
    moved = KnowledgeBase.open(path, emb)
    assert moved.store.spec.kind == "milvus" and not (path / "index.faiss").exists()
    assert {q: _hits(moved, q) for q in QUESTIONS} == before
    assert check_kb(path).ok


def test_a_kb_moved_back_to_faiss_drops_its_milvus_collection(milvus, tmp_path, emb):
    path = tmp_path / "kb"
    kb = _kb(path, emb, store=milvus)
    old = kb.store
    assert kb.move_store("faiss") and not kb.move_store("faiss")  # the second names where they are
    assert KnowledgeBase.open(path, emb).store.spec.kind == "faiss" and old.count() == 0
    assert _hits(KnowledgeBase.open(path, emb), QUESTIONS[1]) == _hits(kb, QUESTIONS[1])


def test_adds_and_deletes_keep_milvus_rows_equal_to_the_committed_chunks(milvus, tmp_path, emb):
    kb = _kb(tmp_path / "kb", emb, store=milvus)
    add_documents(kb, make_docs(1, prefix="x-"), show_progress=False)
    assert kb.store.all_ids() == set(kb.chunk_ids) and len(kb) == 56
    delete_documents(kb, [d.id for d in DOCS[:10]])
    assert kb.store.all_ids() == set(kb.chunk_ids) and len(kb) == 46
    assert not (kb.path / JOURNAL).exists()


def test_rows_of_a_change_that_died_are_never_seen_and_the_next_writer_removes_them(milvus, tmp_path, emb):
    kb = _kb(tmp_path / "kb", emb, store=milvus)
    # What a writer killed between writing Milvus and committing the manifest leaves behind:
    # a journal naming the ids and their rows in Milvus, with no commit holding them.
    ghost = Document("ghost", "River ghost", "river water delta basin flood bank river water delta")
    vec = emb.encode([f"{ghost.title}\n{ghost.text}"])
    (kb.path / JOURNAL).write_text(json.dumps({"ids": ["ghost-row"]}))
    kb.store.add(["ghost-row"], vec)
    reader = KnowledgeBase.open(kb.path, emb)
    assert "ghost-row" not in [h.chunk_id for h in reader.search(vec[0], k=len(reader))]
    assert len(reader.search(vec[0], k=5)) == 5  # the window widens past the row no commit has
    assert any("the next write removes them" in n for n in check_kb(kb.path).notes)
    add_documents(reader, [Document("new", "New", "A ship sailed.")], show_progress=False)
    assert reader.store.all_ids() == set(reader.chunk_ids) and not (kb.path / JOURNAL).exists()


def test_a_commit_that_fails_takes_its_milvus_rows_back(milvus, tmp_path, emb, monkeypatch):
    kb = _kb(tmp_path / "kb", emb, store=milvus)
    import hierarchy.store as commits

    def refuse(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(commits, "atomic_write_json", refuse)  # the manifest never lands
    with pytest.raises(OSError, match="disk full"):
        kb.add(make_docs(1, prefix="y-"), show_progress=False)
    assert len(kb) == 48 and kb.store.all_ids() == set(kb.chunk_ids)


def test_check_finds_rows_missing_from_milvus_and_repair_writes_them_again(milvus, tmp_path, emb):
    kb = _kb(tmp_path / "kb", emb, store=milvus)
    kb.store.delete(kb.chunk_ids[:5])  # somebody emptied part of the collection behind the KB's back
    report = check_kb(kb.path)
    assert not report.ok and any("misses 5 committed chunks" in p for p in report.problems)
    fixed = repair_kb(kb.path, embedder=emb, show_progress=False)
    assert any("5 committed chunks written" in n for n in fixed.notes)
    assert check_kb(kb.path).ok


def test_overwriting_a_kb_on_milvus_drops_its_collection(milvus, tmp_path, emb):
    old = _kb(tmp_path / "kb", emb, store=milvus).store
    new = KnowledgeBase.create(tmp_path / "kb", emb, overwrite=True, store=milvus)
    assert old.count() == 0 and len(new) == 0 and new.store.spec.collection != old.spec.collection


def test_a_kb_on_faiss_hnsw_past_its_threshold_searches_and_checks(tmp_path, emb):
    kb = _kb(tmp_path / "kb", emb, store=StoreSpec(FAISS_HNSW, exact_max=20))
    assert kb.manifest["index"]["type"] == "faiss.IndexHNSWFlat"
    assert _hits(kb, QUESTIONS[2], k=3) == _hits(_kb(tmp_path / "exact", emb), QUESTIONS[2], k=3)
    assert check_kb(kb.path).ok
    delete_documents(kb, [d.id for d in DOCS[:40]])  # 8 left: under the threshold, exact again
    assert KnowledgeBase.open(kb.path, emb).manifest["index"]["type"] == "faiss.IndexFlatIP"


def test_summary_layers_build_over_a_kb_on_milvus(milvus, tmp_path, emb):
    kb = layered_kb(tmp_path / "kb", emb)
    assert kb.move_store(milvus)
    add_documents(kb, make_docs(1, prefix="z-"), show_progress=False)
    report = check_kb(kb.path)
    assert report.ok and report.layers["chunks"] == len(kb)


def test_the_cli_indexes_into_the_store_it_is_given_and_refuses_an_unknown_one(milvus, tmp_path, emb):
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n" for d in DOCS[:8]))
    kb_dir = tmp_path / "kb"
    args = ["index", str(src), "--kb", str(kb_dir), "--store", milvus, "--summaries", "none"]
    r = CliRunner().invoke(main, args, obj={"embedder": emb})
    assert r.exit_code == 0, r.output
    assert json.loads((kb_dir / MANIFEST).read_text())["store"]["kind"] == "milvus"
    bad = CliRunner().invoke(
        main,
        ["index", str(src), "--kb", str(kb_dir), "--store", "annoy"],
        obj={"embedder": emb},
        usage_error_expected=True,
    )
    assert bad.exit_code == 2 and "--store" in bad.output and "Traceback" not in bad.output


def test_an_unreachable_milvus_server_is_one_line(tmp_path, emb):
    with pytest.raises(KBError, match="cannot reach Milvus at http://127.0.0.1:9"):
        KnowledgeBase.create(tmp_path / "kb", emb, store="milvus://127.0.0.1:9")


# -- kill -9 on a Milvus store (processes: Milvus Lite lets one process at a time hold its folder) --


def _build_on_milvus(kb_dir: str, store: str) -> None:
    from tests.fakes import HashedBowEmbedder

    _kb(kb_dir, HashedBowEmbedder(dim=128), store=store)


def _killed_between_milvus_and_the_commit(kb_dir: str) -> None:
    import os
    import signal

    import hierarchy.store as commits
    from tests.fakes import HashedBowEmbedder

    def die(*a, **k):
        os.kill(os.getpid(), signal.SIGKILL)

    commits.commit = die  # the new rows are in Milvus, the manifest never lands
    kb = KnowledgeBase.open(kb_dir, HashedBowEmbedder(dim=128))
    add_documents(kb, make_docs(1, prefix="killed "), show_progress=False)


def test_a_writer_killed_between_milvus_and_its_commit_leaves_the_last_commit_and_the_next_write_settles_it(
    milvus, tmp_path
):
    import multiprocessing as mp
    import signal

    ctx = mp.get_context("spawn")
    kb_dir = str(tmp_path / "kb")
    build = ctx.Process(target=_build_on_milvus, args=(kb_dir, milvus))
    build.start()
    build.join(120)
    assert build.exitcode == 0
    killed = ctx.Process(target=_killed_between_milvus_and_the_commit, args=(kb_dir,))
    killed.start()
    killed.join(120)
    assert killed.exitcode == -signal.SIGKILL
    from tests.fakes import HashedBowEmbedder

    emb = HashedBowEmbedder(dim=128)
    kb = KnowledgeBase.open(kb_dir, emb)
    assert len(kb) == 48 and (kb.path / JOURNAL).exists()
    try:
        rows = kb.store.count()
    except KBCorruptError:  # Milvus Lite died with the writer mid-segment (seen on a loaded machine)
        assert "refilled with the 48 committed chunks" in " ".join(repair_kb(kb_dir, embedder=emb).notes)
    else:
        assert rows == 56  # the dead writer's 8 rows, which no reader is shown
        dead_rows = kb.store.all_ids() - set(kb.chunk_ids)
        assert len(dead_rows) == 8 and not dead_rows & {h.chunk_id for h in kb.search("river delta", k=48)}
        report = check_kb(kb_dir)
        assert report.ok and any("8 rows no commit has" in n for n in report.notes)
    index_sources(kb_dir, [], embedder=emb, summaries="none")  # the next write settles the journal
    kb = KnowledgeBase.open(kb_dir, emb)
    assert kb.store.all_ids() == set(kb.chunk_ids) and not (kb.path / JOURNAL).exists()


def test_a_milvus_collection_that_cannot_load_is_a_one_line_error_and_repair_refills_it(
    milvus, tmp_path, emb, monkeypatch
):
    import pymilvus

    _kb(tmp_path / "kb", emb, store=milvus)
    expected = _hits(KnowledgeBase.open(tmp_path / "kb", emb), QUESTIONS[0])

    torn = {"yes": True}  # a segment file its killed writer never finished, until the collection goes
    load, drop = pymilvus.MilvusClient.load_collection, pymilvus.MilvusClient.drop_collection

    def load_torn(self, *a, **k):
        if torn["yes"]:  # what Milvus Lite says then
            raise pymilvus.MilvusException(message="Failed to read all data for array (file seems not fully written?)")
        return load(self, *a, **k)

    def drop_torn(self, *a, **k):
        torn["yes"] = False
        return drop(self, *a, **k)

    monkeypatch.setattr(pymilvus.MilvusClient, "load_collection", load_torn)
    monkeypatch.setattr(pymilvus.MilvusClient, "drop_collection", drop_torn)
    with pytest.raises(KBCorruptError, match="cannot load the collection.*logicroute check --repair"):
        KnowledgeBase.open(tmp_path / "kb", emb).store.count()
    report = repair_kb(tmp_path / "kb", embedder=emb)
    assert any("refilled with the 48 committed chunks" in n for n in report.notes)
    monkeypatch.undo()
    again = KnowledgeBase.open(tmp_path / "kb", emb)
    assert again.store.all_ids() == set(again.chunk_ids) and _hits(again, QUESTIONS[0]) == expected
    assert check_kb(tmp_path / "kb").ok
