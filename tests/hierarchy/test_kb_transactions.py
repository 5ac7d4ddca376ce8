"""Write transactions: one writer lock held from reading the KB to the layers' commit, so two
`index` runs take turns; the layers and the manifest refuse a commit based on a state that is
no longer the one on disk (instead of undoing another writer's change)."""

from __future__ import annotations

import json
import threading

import pytest

from engine.floor.base.errors import KBError
from hierarchy import indexing, store
from hierarchy.documents import Document
from hierarchy.indexing import index_sources
from hierarchy.kb import MANIFEST, KnowledgeBase
from hierarchy.kb_check import check_kb
from hierarchy.layers.persist import META, layers_dir, read_layers, save_layers
from hierarchy.layers.update import build_layers
from tests.fakes import layered_kb
from tests.samples import make_docs


@pytest.fixture
def kb(tmp_path, emb) -> KnowledgeBase:
    return layered_kb(tmp_path / "kb", emb, docs_per_topic=3)


def _jsonl(path, docs) -> str:
    path.write_text("".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n" for d in docs))
    return str(path)


def test_a_second_index_waits_for_the_first_ones_layer_update(kb, emb, tmp_path, monkeypatch):
    """Run A stops inside its layer update; run B starts then. B must not commit before A is
    done: else A's layers, read before B's chunks landed, would drop them."""
    real_sync = indexing.sync_layers
    a_in_layers, b_done = threading.Event(), threading.Event()

    def slow_sync(kb_, **kw):
        if threading.current_thread().name == "A":
            a_in_layers.set()
            b_done.wait(timeout=1.0)  # B finishing here would be the bug
        return real_sync(kb_, **kw)

    monkeypatch.setattr(indexing, "sync_layers", slow_sync)
    errors: list[BaseException] = []

    def run(src):
        try:
            index_sources(kb.path, [src], embedder=emb, show_progress=False)
        except BaseException as e:  # pragma: no cover - the failure this test exists for
            errors.append(e)
        finally:
            if threading.current_thread().name == "B":
                b_done.set()

    a = threading.Thread(target=run, args=(_jsonl(tmp_path / "a.jsonl", make_docs(1, prefix="a ")),), name="A")
    b = threading.Thread(target=run, args=(_jsonl(tmp_path / "b.jsonl", make_docs(1, prefix="b ")),), name="B")
    a.start()
    assert a_in_layers.wait(timeout=10)
    b.start()
    a.join(timeout=30)
    b.join(timeout=30)
    assert errors == []
    final = KnowledgeBase.open(kb.path, emb)
    assert len(final) == 3 * 8 + 2 * 8
    assert set(read_layers(final).assignment()) == set(final.chunk_ids)
    assert check_kb(kb.path).ok


def test_layers_computed_from_a_kb_that_has_moved_on_are_refused(kb, emb):
    stale = KnowledgeBase.open(kb.path, emb)
    kb.add([Document("mars", "Mars", "Mars is the red planet.")], show_progress=False)
    meta_before = (layers_dir(kb) / META).read_bytes()
    with pytest.raises(KBError, match="changed by another process"):
        build_layers(stale, show_progress=False, cluster_size=4, rebuild=True)
    assert (layers_dir(kb) / META).read_bytes() == meta_before


def test_layers_read_before_another_layer_commit_are_refused(kb):
    layers = read_layers(kb)
    meta_before = (layers_dir(kb) / META).read_bytes()
    with pytest.raises(KBError, match="summary layers .* were changed by another process"):
        save_layers(kb, layers, base_generation="a generation that is not on disk")
    assert (layers_dir(kb) / META).read_bytes() == meta_before


def test_annotate_refuses_when_another_entry_was_committed_meanwhile(kb, emb):
    other = KnowledgeBase.open(kb.path, emb)
    other.annotate("notes", {"by": "other"})
    with pytest.raises(KBError, match="changed by another process"):
        kb.annotate("notes", {"by": "stale"})  # same data files: only the whole manifest tells
    assert json.loads((kb.path / MANIFEST).read_text())["notes"] == {"by": "other"}


def test_the_writer_lock_is_reentrant_within_a_thread_and_exclusive_across_threads(kb, emb):
    entered = threading.Event()

    def other_writer():
        with KnowledgeBase.open(kb.path, emb).writing():
            entered.set()

    with kb.writing(), kb.writing():  # nested: would deadlock if not re-entrant
        kb.add([Document("mars", "Mars", "Mars is the red planet.")], show_progress=False)
        t = threading.Thread(target=other_writer)
        t.start()
        assert not entered.wait(timeout=0.3)  # held by this transaction
    t.join(timeout=10)
    assert entered.is_set()


def test_a_failed_transaction_releases_the_lock(kb, emb):
    with pytest.raises(RuntimeError), kb.writing():
        raise RuntimeError("boom")
    with store.probe_lock(kb.path) as quiet:
        assert quiet
