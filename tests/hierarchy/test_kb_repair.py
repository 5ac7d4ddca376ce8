"""`logicroute check --repair`: what a corruption error tells the user to run really rebuilds the KB
from the chunks it stores, and says what cannot be recovered."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from engine.face.cli import main
from engine.floor.base.errors import KBCorruptError
from hierarchy import store
from hierarchy.documents import Document
from hierarchy.kb import KnowledgeBase
from hierarchy.kb_check import check_kb
from hierarchy.kb_repair import repair_kb
from hierarchy.layers.persist import META, layers_dir
from hierarchy.vector_store.base import FAISS_HNSW, StoreSpec
from tests.fakes import layered_kb, segment_file


@pytest.fixture
def kb(tmp_path, emb) -> KnowledgeBase:
    return layered_kb(tmp_path / "kb", emb)


def _repair_via_the_cli(kb: KnowledgeBase, emb, exit_code: int = 0) -> dict:
    """The command the error names, run as the user would (with the test's embedder); exit
    code 1 when something could not be restored."""
    with pytest.raises(KBCorruptError) as e:
        KnowledgeBase.open(kb.path, emb)
    command = f"logicroute check --repair --kb {kb.path}"
    assert command in str(e.value)
    r = CliRunner().invoke(main, [*command.split()[1:], "--json"], obj={"embedder": emb})
    assert r.exit_code == exit_code, r.output
    return json.loads(r.stdout)  # the summaries' progress bars go to stderr


def _assert_healthy(kb: KnowledgeBase, emb, n_chunks: int) -> KnowledgeBase:
    fixed = KnowledgeBase.open(kb.path, emb)
    assert len(fixed) == n_chunks and fixed.index.ntotal == n_chunks
    assert fixed.search("lava eruption volcano", k=1)[0].doc_id.startswith("volcano")
    report = check_kb(kb.path)
    assert report.ok, report.problems
    return fixed


def test_damaged_vectors_are_embedded_again_from_the_chunks(kb, emb):
    before = np.array(kb.vectors)
    segment_file(kb.path, "vectors").write_bytes(b"garbage")
    out = _repair_via_the_cli(kb, emb)
    assert out["rebuilt"] and out["embedded"] == 16 and out["lost_lines"] == 0 and out["layers"] == "unchanged"
    fixed = _assert_healthy(kb, emb, 16)
    np.testing.assert_allclose(fixed.vectors, before, atol=1e-6)


def test_a_damaged_index_is_rebuilt_from_the_committed_vectors_without_embedding(tmp_path, emb):
    kb = layered_kb(tmp_path / "hnsw", emb, store=StoreSpec(FAISS_HNSW, exact_max=0))  # a persisted HNSW graph
    (kb.path / "index.faiss").write_bytes(b"garbage")
    emb.calls.clear()
    out = _repair_via_the_cli(kb, emb)
    assert out["rebuilt"] and out["embedded"] == 0 and emb.calls == []
    _assert_healthy(kb, emb, 16)


def test_unreadable_chunk_lines_are_reported_lost_with_their_documents(kb, emb):
    lines = segment_file(kb.path, "chunks").read_text().splitlines()
    lost = json.loads(lines[3])["doc_id"]
    lines[3] = lines[3][:-20]  # a torn line: the document id still reads, the chunk does not
    segment_file(kb.path, "chunks").write_text("\n".join(lines) + "\n")
    out = _repair_via_the_cli(kb, emb, exit_code=1)
    assert out["lost_lines"] == 1 and out["lost_documents"] == [lost] and out["documents"] == 15
    assert any(lost in n for n in out["notes"])
    fixed = _assert_healthy(kb, emb, 15)
    assert lost not in fixed.doc_ids and out["layers"] == "updated"


def _kb_with_a_last_segment_of_two_documents(path, emb) -> KnowledgeBase:
    """32 small documents, the last two added by a second `index`: its own segment."""
    kb = KnowledgeBase.create(path, emb)
    kb.add([Document(f"harbour-{i}.md", f"Harbour {i}", f"Harbour {i} has {i + 2} piers.") for i in range(30)])
    kb.add(
        [
            Document("lighthouse.md", "Lighthouse", "The Ardmere lighthouse was built in 1871."),
            Document("river.txt", "River", "The Tamsk river is 143 km long."),
        ],
        show_progress=False,
    )
    return kb


def _cut_mid_first_line(chunks_file) -> None:
    """What `truncate -s` did in the report: the first line torn (its document id still reads),
    the second one gone."""
    first = chunks_file.read_bytes().split(b"\n")[0]
    os.truncate(chunks_file, len(first) - 20)


def test_a_chunk_file_cut_mid_line_names_the_torn_document_counts_the_cut_one_and_exits_1(tmp_path, emb):
    kb = _kb_with_a_last_segment_of_two_documents(tmp_path / "kb", emb)
    _cut_mid_first_line(segment_file(kb.path, "chunks"))
    r = CliRunner().invoke(main, ["check", "--repair", "--kb", str(kb.path)], obj={"embedder": emb})
    assert r.exit_code == 1, r.output
    assert "lost: 2 chunks; index again: lighthouse.md, 1 more document whose id went with its line" in r.output
    assert "the manifest records 32 documents, 30 are restored" in r.output
    assert "holds 1 of the 2 chunk lines the manifest records: 1 cut off" in r.output
    fixed = KnowledgeBase.open(kb.path, emb)
    assert len(fixed.doc_ids) == 30 and check_kb(kb.path).ok


def test_without_a_manifest_that_reads_lines_cut_off_are_counted_against_the_vectors_file(tmp_path, emb):
    kb = _kb_with_a_last_segment_of_two_documents(tmp_path / "kb", emb)
    _cut_mid_first_line(segment_file(kb.path, "chunks"))
    (kb.path / "manifest.json").write_text("{not json")
    report = repair_kb(kb.path, embedder=emb, show_progress=False)
    assert report.lost and report.lost_lines == 2 and report.lost_documents == ["lighthouse.md"]
    assert report.documents == 30 and any("its vectors have: 1 cut off" in n for n in report.notes)


def test_a_repair_that_restores_everything_reports_nothing_lost(kb, emb):
    segment_file(kb.path, "vectors").write_bytes(b"garbage")
    report = repair_kb(kb.path, embedder=emb, show_progress=False)
    assert report.rebuilt and not report.lost and report.unnamed_lost_documents == 0 and report.documents == 16


def test_a_chunk_whose_text_changed_is_not_trusted(kb, emb):
    lines = segment_file(kb.path, "chunks").read_text().splitlines()
    c = json.loads(lines[0])
    c["text"] = "edited behind the manifest"
    lines[0] = json.dumps(c)
    segment_file(kb.path, "chunks").write_text("\n".join(lines) + "\n")
    report = repair_kb(kb.path, embedder=emb, show_progress=False)
    assert report.lost_documents == [c["doc_id"]] and report.chunks == 15


def test_an_unreadable_manifest_is_written_anew(kb, emb):
    (kb.path / "manifest.json").write_text("{not json")
    out = _repair_via_the_cli(kb, emb)
    assert out["embedded"] == 16 and any("manifest.json does not read" in n for n in out["notes"])
    _assert_healthy(kb, emb, 16)


def test_damaged_layers_are_rebuilt(kb, emb):
    meta = json.loads((layers_dir(kb) / META).read_text())
    (layers_dir(kb) / meta["files"]["nodes"]).write_text("{broken")
    report = repair_kb(kb.path, embedder=emb, show_progress=False)
    assert not report.rebuilt and report.layers == "rebuilt"
    _assert_healthy(kb, emb, 16)


def test_layers_left_behind_by_an_interrupted_update_are_caught_up(kb, emb):
    kb.add([Document("mars", "Mars", "Mars is the red planet.")], show_progress=False)  # no layer update
    report = repair_kb(kb.path, embedder=emb, show_progress=False)
    assert not report.rebuilt and report.layers == "updated" and report.chunks == 17
    assert check_kb(kb.path).ok


def test_an_intact_kb_is_left_as_it_is_after_finishing_a_change_that_died(kb, emb, monkeypatch):
    def crash(*a, **k):
        raise RuntimeError("crash before the manifest")

    monkeypatch.setattr(store, "atomic_write_json", crash)
    monkeypatch.setattr(store, "restore_snapshots", lambda directory, names: None)
    with pytest.raises(RuntimeError):
        kb.delete(["river-0"])
    monkeypatch.undo()
    r = CliRunner().invoke(main, ["check", "--repair", "--kb", str(kb.path)], obj={"embedder": emb})
    assert r.exit_code == 0 and "chunk level intact: 16 documents, 16 chunks" in r.output
    assert not list(kb.path.glob("*.prev"))
    _assert_healthy(kb, emb, 16)


def test_nothing_to_rebuild_from_is_one_clear_line(kb, emb):
    segment_file(kb.path, "chunks").unlink()
    r = CliRunner().invoke(main, ["check", "--repair", "--kb", str(kb.path)], obj={"embedder": emb})
    assert r.exit_code == 2 and "nothing to rebuild from" in r.output and r.output.count("\n") == 1


def test_repair_of_a_missing_kb_says_there_is_none(tmp_path, emb):
    r = CliRunner().invoke(main, ["check", "--repair", "--kb", str(tmp_path / "nowhere")], obj={"embedder": emb})
    assert r.exit_code == 2 and r.output.startswith("error: no knowledge base")
