"""add_documents / delete_documents / index_sources: the KB changes, then the summary layers
follow in the same write transaction, and catch up on chunks an interrupted update left out."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from engine.floor.base.errors import DocumentNotFoundError
from hierarchy.documents import Document
from hierarchy.indexing import add_documents, delete_documents, has_layers, index_sources
from hierarchy.kb import KnowledgeBase
from hierarchy.kb_check import check_kb
from hierarchy.layers import update
from hierarchy.layers.persist import META, layers_dir, load_layers, read_layers
from hierarchy.layers.update import build_layers
from tests.samples import DOCS, make_docs


@pytest.fixture
def kb(tmp_path, emb) -> KnowledgeBase:
    kb = KnowledgeBase.create(tmp_path / "kb", emb, chunk_words=200, overlap_words=0)
    kb.add(make_docs(3), show_progress=False)
    return kb


def covered(kb: KnowledgeBase) -> set[str]:
    return set(read_layers(kb).assignment())


def write_jsonl(path, docs) -> str:
    path.write_text("".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n" for d in docs))
    return str(path)


def test_layers_follow_adds_and_deletes_when_they_exist(kb):
    add_documents(kb, [Document("x", "X", "Something new about rivers.")], show_progress=False)
    assert not has_layers(kb)  # no layers: nothing is built behind the user's back
    build_layers(kb, show_progress=False, cluster_size=4)
    add_documents(kb, [Document("y", "Y", "Something else about a volcano.")], show_progress=False)
    assert covered(kb) == set(kb.chunk_ids) and kb.chunks_of("y")[0].id in covered(kb)
    y_ids = [c.id for c in kb.chunks_of("y")]
    assert delete_documents(kb, ["y"]) == len(y_ids)
    assert covered(kb) == set(kb.chunk_ids)
    assert kb.manifest["summaries"]["generation"] == json.loads((layers_dir(kb) / META).read_text())["generation"]


def test_layers_built_over_an_empty_kb_are_built_on_the_first_add(tmp_path, emb):
    empty = KnowledgeBase.create(tmp_path / "empty", emb, chunk_words=200, overlap_words=0)
    build_layers(empty, show_progress=False)
    add_documents(empty, make_docs(2), show_progress=False)
    meta = json.loads((layers_dir(empty) / META).read_text())
    assert meta["levels"] >= 1 and covered(empty) == set(empty.chunk_ids)
    assert KnowledgeBase.open(empty.path, emb).manifest["summaries"]["generation"] == meta["generation"]


def test_an_unchanged_add_leaves_the_layers_alone(kb):
    build_layers(kb, show_progress=False, cluster_size=4)
    generation = read_layers(kb).meta["generation"]
    add_documents(kb, make_docs(3)[:2], show_progress=False)  # nothing new
    assert delete_documents(kb, ["unknown"]) == 0
    assert read_layers(kb).meta["generation"] == generation


def test_a_stale_kb_object_takes_up_the_committed_state_before_writing(kb, emb):
    build_layers(kb, show_progress=False, cluster_size=4)
    other = KnowledgeBase.open(kb.path, emb)
    add_documents(other, [Document("mars", "Mars", "Mars is the red planet.")], show_progress=False)
    add_documents(kb, [Document("venus", "Venus", "Venus is hot.")], show_progress=False)  # opened before mars
    again = KnowledgeBase.open(kb.path, emb)
    assert {"mars", "venus"} <= set(again.doc_ids) and covered(again) == set(again.chunk_ids)


def _die_in_the_layer_update(monkeypatch):
    def boom(*a, **k):
        raise KeyboardInterrupt("killed during the layer update")

    monkeypatch.setattr(update, "save_layers", boom)


def test_the_next_add_repairs_layers_an_interrupted_update_left_behind(kb, monkeypatch):
    build_layers(kb, show_progress=False, cluster_size=4)
    new = make_docs(1, prefix="new ")
    _die_in_the_layer_update(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        add_documents(kb, new, show_progress=False)
    monkeypatch.undo()
    assert len(set(kb.chunk_ids) - covered(kb)) == len(new)  # chunks committed, layers not
    assert not check_kb(kb.path).ok
    report = add_documents(kb, new, show_progress=False)
    assert report["added_chunks"] == 0 and covered(kb) == set(kb.chunk_ids)
    assert check_kb(kb.path).ok


def test_index_with_no_sources_repairs_layers_an_interrupted_update_left_behind(kb, emb, tmp_path, monkeypatch):
    build_layers(kb, show_progress=False, cluster_size=4)
    _die_in_the_layer_update(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        index_sources(kb.path, [write_jsonl(tmp_path / "new.jsonl", DOCS)], embedder=emb, show_progress=False)
    monkeypatch.undo()
    result = index_sources(kb.path, [], embedder=emb, show_progress=False)
    assert result.layers["mode"] == "incremental" and result.layers["added_chunks"] == len(DOCS)
    assert covered(result.kb) == set(result.kb.chunk_ids) and check_kb(kb.path).ok


def test_deleting_unknown_ids_names_them_and_changes_nothing(kb, emb):
    files = {p.name: p.read_bytes() for p in kb.path.iterdir() if p.is_file()}
    with pytest.raises(DocumentNotFoundError) as e:
        index_sources(kb.path, [], delete_ids=["river-0", "nope", "nada"], embedder=emb, summaries="none")
    message = str(e.value)
    assert "'nope', 'nada'" in message and "river-0" not in message and "\n" not in message
    assert {p.name: p.read_bytes() for p in kb.path.iterdir() if p.is_file() and p.name != ".lock"} == {
        k: v for k, v in files.items() if k != ".lock"
    }
    result = index_sources(kb.path, [], delete_ids=["river-0"], embedder=emb, summaries="none")
    assert result.deleted_chunks == 1 and "river-0" not in result.kb.doc_ids


def test_index_builds_the_layers_once_then_updates_them(tmp_path, emb):
    src = write_jsonl(tmp_path / "a.jsonl", make_docs(2))
    first = index_sources(tmp_path / "kb", [src], embedder=emb, show_progress=False)
    assert first.layers["mode"] == "build" and load_layers(first.kb) is not None
    src2 = write_jsonl(tmp_path / "b.jsonl", make_docs(1, prefix="more "))
    second = index_sources(tmp_path / "kb", [src2], embedder=emb, show_progress=False)
    assert second.layers["mode"] == "incremental" and covered(second.kb) == set(second.kb.chunk_ids)


def test_the_store_does_not_import_the_layers():
    code = "import sys, hierarchy.kb; print(any(m.startswith('hierarchy.layers') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
