"""Real processes on one KB: readers beside a writer, two writers racing, and a writer killed
(SIGKILL) while it embeds and in its layer update. Fake embedder and extractive summaries: no model loads.

Afterwards the KB holds every document added, every opener saw a committed state (no error,
chunk, index and lexical postings counts of one commit), and the summary layers cover every chunk.
Readers beside a writer and two racing writers also run on a Milvus standalone server (the
session's `milvus_server`), where many processes share one collection: every hit a reader gets
is a chunk of the commit it opened."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
from pathlib import Path

import pytest

from hierarchy.kb import KnowledgeBase
from hierarchy.kb_check import check_kb
from hierarchy.layers.persist import read_layers
from tests.fakes import HashedBowEmbedder, layered_kb
from tests.samples import make_docs

DIM = 128
BATCH = 8  # documents (one chunk each) per index run: make_docs(1) gives one per topic
START = 16  # documents in the KB before the writers start
CTX = mp.get_context("spawn")  # a fresh interpreter per process: no state inherited from the test

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the writer lock is POSIX flock")


def _emb() -> HashedBowEmbedder:
    return HashedBowEmbedder(dim=DIM)


def _source(folder: Path, tag: str) -> str:
    path = folder / f"{tag}.jsonl"
    docs = make_docs(1, prefix=f"{tag} ")
    path.write_text("".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n" for d in docs))
    return str(path)


def _index(kb_dir: str, source: str):
    from hierarchy.indexing import index_sources

    return index_sources(kb_dir, [source] if source else [], embedder=_emb(), show_progress=False)


def _reader(kb_dir: str, ready, done, out) -> None:
    """Open, search and check until the writers are done; report (opens, searches, checks,
    errors, sizes seen)."""
    from hierarchy.layers.persist import load_layers

    opens = searches = checks = 0
    errors: list[str] = []
    sizes: set[tuple[int, int, int]] = set()
    emb = _emb()
    while True:
        finished = done.is_set()  # one more pass after the last commit
        try:
            kb = KnowledgeBase.open(kb_dir, emb)
            opens += 1
            # a shared store holds rows of the change under way too: its count is no commit's
            indexed = len(kb) if kb.store.spec.shared else int(kb.index.ntotal)
            sizes.add((len(kb), indexed, len(kb.doc_ids)))
            hits = kb.search("river delta flood", k=3, retrieval="dense")
            hits += [h for hs in kb.search_batch(["volcano lava", "opera aria"], k=2, retrieval="hybrid") for h in hs]
            searches += 2
            if stray := {h.chunk_id for h in hits} - set(kb.chunk_ids):  # pragma: no cover - a row of no commit
                errors.append(f"hits outside the commit read: {sorted(stray)}")
            if kb.lexical_index().n != len(kb):  # pragma: no cover - postings of another commit than the chunks
                errors.append(f"lexical index of {kb.lexical_index().n} chunks in a KB of {len(kb)}")
            load_layers(kb)
            report = check_kb(kb_dir)  # read-only, beside the writer: its verdict must hold too
            checks += 1
            if not report.ok:  # pragma: no cover - the failure this test exists for
                errors.append(f"check: {report.problems}")
        except Exception as e:  # pragma: no cover - the failure this test exists for
            errors.append(f"{type(e).__name__}: {e}")
        ready.set()
        if finished:
            break
    out.put({"opens": opens, "searches": searches, "checks": checks, "errors": errors, "sizes": sorted(sizes)})


def _writer(kb_dir: str, sources: list[str], start, out) -> None:
    start.wait()
    errors = []
    for s in sources:
        try:
            _index(kb_dir, s)
        except Exception as e:  # pragma: no cover - the failure this test exists for
            errors.append(f"{type(e).__name__}: {e}")
    out.put({"errors": errors})


def _killed_while_embedding(kb_dir: str, source: str) -> None:
    def die(self, texts, *a, **k):
        os.kill(os.getpid(), signal.SIGKILL)

    HashedBowEmbedder.encode = die  # the documents are read and chunked, then the process dies
    _index(kb_dir, source)


def _killed_in_the_layer_update(kb_dir: str, source: str) -> None:
    from hierarchy.layers import update

    def die(*a, **k):
        os.kill(os.getpid(), signal.SIGKILL)

    update.save_layers = die  # the chunks commit, then the process dies before the layers do
    _index(kb_dir, source)


@pytest.fixture
def kb_dir(tmp_path, request) -> str:
    """The KB the processes share: on the default store (faiss-hnsw), or on the session's Milvus
    server where a spec is parametrized with ON_EACH_STORE."""
    store = None
    if getattr(request, "param", "default") == "milvus-server":
        store = f"milvus://{request.getfixturevalue('milvus_server').uri}"
    kb = layered_kb(tmp_path / "kb", _emb(), store=store)
    assert len(kb) == START
    return str(kb.path)


def _assert_whole(kb_dir: str, n_docs: int) -> None:
    kb = KnowledgeBase.open(kb_dir, _emb())
    assert len(kb) == n_docs and len(kb.doc_ids) == n_docs
    assert set(read_layers(kb).assignment()) == set(kb.chunk_ids)
    report = check_kb(kb_dir)
    assert report.ok, report.problems


def _join(procs, timeout: float = 120) -> None:
    for p in procs:
        p.join(timeout)
        assert p.exitcode == 0, (p.name, p.exitcode)


ON_EACH_STORE = pytest.mark.parametrize("kb_dir", ["default", "milvus-server"], indirect=True)


@ON_EACH_STORE
def test_readers_beside_a_writer_see_committed_states(kb_dir, tmp_path):
    sources = [_source(tmp_path, f"w{i}") for i in range(5)]
    out, done, start = CTX.Queue(), CTX.Event(), CTX.Event()
    readies = [CTX.Event() for _ in range(3)]
    readers = [CTX.Process(target=_reader, args=(kb_dir, r, done, out)) for r in readies]
    writer = CTX.Process(target=_writer, args=(kb_dir, sources, start, out), name="writer")
    for p in [*readers, writer]:
        p.start()
    for r in readies:
        assert r.wait(timeout=60)  # every reader reads before the first write
    start.set()
    writer.join(120)
    done.set()
    results = [out.get(timeout=60) for _ in range(4)]
    _join([*readers, writer])
    committed = {(START + k * BATCH,) * 3 for k in range(6)}
    reads = [r for r in results if "opens" in r]
    counts = {k: sum(r[k] for r in reads) for k in ("opens", "searches", "checks")}
    counts["errors"] = sum(len(r["errors"]) for r in results)
    print(f"\nreaders beside a writer: {counts}, sizes seen {sorted({tuple(s) for r in reads for s in r['sizes']})}")
    assert counts["errors"] == 0, [r["errors"] for r in results]
    assert all(r["opens"] > 0 for r in reads)
    assert {tuple(s) for r in reads for s in r["sizes"]} <= committed
    _assert_whole(kb_dir, START + 5 * BATCH)


@ON_EACH_STORE
def test_two_writers_racing_both_land(kb_dir, tmp_path):
    out, start = CTX.Queue(), CTX.Event()
    writers = [
        CTX.Process(target=_writer, args=(kb_dir, [_source(tmp_path, f"{w}{i}") for i in range(3)], start, out))
        for w in ("a", "b")
    ]
    for p in writers:
        p.start()
    start.set()
    results = [out.get(timeout=120) for _ in writers]
    _join(writers)
    print(f"\ntwo writers: {sum(len(r['errors']) for r in results)} errors, 6 index runs")
    assert [r["errors"] for r in results] == [[], []]
    _assert_whole(kb_dir, START + 6 * BATCH)


def test_a_writer_killed_in_its_layer_update_is_caught_up_by_the_next_index(kb_dir, tmp_path):
    source = _source(tmp_path, "killed")
    p = CTX.Process(target=_killed_in_the_layer_update, args=(kb_dir, source))
    p.start()
    p.join(120)
    assert p.exitcode == -signal.SIGKILL
    report = check_kb(kb_dir)
    assert report.chunks == START + BATCH and report.layers["uncovered_chunks"] == BATCH and not report.ok
    _index(kb_dir, source)  # "0 new chunks": the layers still catch up
    _assert_whole(kb_dir, START + BATCH)


def test_a_writer_killed_while_embedding_leaves_the_last_commit_and_the_rerun_adds_everything(kb_dir, tmp_path):
    source = _source(tmp_path, "killed")
    p = CTX.Process(target=_killed_while_embedding, args=(kb_dir, source))
    p.start()
    p.join(120)
    assert p.exitcode == -signal.SIGKILL
    report = check_kb(kb_dir)
    assert report.ok and report.chunks == START, report.problems
    _index(kb_dir, source)
    _assert_whole(kb_dir, START + BATCH)
    again = _index(kb_dir, source).added  # the same run once more: all there, none of it a duplicate
    assert (again["unchanged_documents"], again["unchanged_chunks"], again["duplicate_chunks"]) == (BATCH, BATCH, 0)
