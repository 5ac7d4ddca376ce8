"""add_documents / delete_documents: the KB changes, then the summary layers follow."""

from __future__ import annotations

import subprocess
import sys

import pytest

import hierarchy.indexing as indexing
from hierarchy.documents import Document
from hierarchy.indexing import add_documents, delete_documents
from hierarchy.kb import LAYERS_DIR, KnowledgeBase
from tests.fakes import HashedBowEmbedder
from tests.samples import DOCS


@pytest.fixture
def kb(tmp_path) -> KnowledgeBase:
    kb = KnowledgeBase.create(tmp_path / "kb", HashedBowEmbedder(), chunk_words=30, overlap_words=5)
    kb.add(DOCS, show_progress=False)
    return kb


@pytest.fixture
def calls(monkeypatch) -> list:
    seen: list = []
    monkeypatch.setattr(
        indexing, "update_after_change", lambda kb_, added, removed: seen.append((kb_, list(added), list(removed)))
    )
    return seen


def test_layers_follow_adds_and_deletes_when_they_exist(kb, calls):
    add_documents(kb, [Document("x", "X", "Something new.")], show_progress=False)
    assert calls == []  # no committed layers: nothing to update
    (kb.path / LAYERS_DIR).mkdir()
    (kb.path / LAYERS_DIR / "meta.json").write_text("{}")  # committed layers (the update is faked)
    report = add_documents(kb, [Document("y", "Y", "Something else.")], show_progress=False)
    assert report["added_chunks"] == 1
    y_ids = [c.id for c in kb.chunks_of("y")]
    assert delete_documents(kb, ["y"]) == len(y_ids)
    assert [(c[1], c[2]) for c in calls] == [(y_ids, []), ([], y_ids)]
    assert calls[0][0] is kb


def test_replaced_and_unchanged_documents(kb, calls):
    (kb.path / LAYERS_DIR).mkdir()
    (kb.path / LAYERS_DIR / "meta.json").write_text("{}")  # committed layers (the update is faked)
    old = [c.id for c in kb.chunks_of("nile")]
    add_documents(kb, [Document("nile", "Nile", "The Nile flows north into the Mediterranean.")], show_progress=False)
    assert [(c[1], c[2]) for c in calls] == [([c.id for c in kb.chunks_of("nile")], sorted(old))]
    add_documents(kb, DOCS[:2], show_progress=False)  # nothing new
    assert delete_documents(kb, ["unknown"]) == 0
    assert len(calls) == 1


def test_the_store_does_not_import_the_layers():
    code = "import sys, hierarchy.kb; print(any(m.startswith('hierarchy.layers') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
