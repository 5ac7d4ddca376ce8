"""`logicroute check`: a read-only verdict on a KB (counts, fingerprints, layer coverage) that
loads no model, changes no file and stays calm beside a writer."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from engine.face.cli import main
from hierarchy import store
from hierarchy.documents import Document
from hierarchy.kb import KnowledgeBase
from hierarchy.kb_check import check_kb
from hierarchy.layers.persist import META, layers_dir
from tests.fakes import layered_kb, segment_file


@pytest.fixture
def kb(tmp_path, emb) -> KnowledgeBase:
    return layered_kb(tmp_path / "kb", emb)


def _snapshot(path) -> dict:
    return {p.relative_to(path): (p.stat().st_mtime_ns, p.read_bytes()) for p in path.rglob("*") if p.is_file()}


def test_a_consistent_kb_passes_with_its_counts(kb):
    r = CliRunner().invoke(main, ["check", "--kb", str(kb.path), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["ok"] and out["documents"] == 16 and out["chunks"] == 16 and out["vectors"] == 16
    assert out["files"] == {p.name: "ok" for p in kb.path.glob("seg-*")} and out["index"] == 16
    assert out["layers"]["chunks"] == 16 and out["layers"]["uncovered_chunks"] == 0
    text = CliRunner().invoke(main, ["check", "--kb", str(kb.path)])
    assert text.exit_code == 0 and "16 documents, 16 chunks" in text.output and "consistent" in text.output


def test_checking_changes_no_file(kb):
    (kb.path / store.LOCK).unlink()  # not even the lock file is created
    before = _snapshot(kb.path)
    assert check_kb(kb.path).ok
    assert _snapshot(kb.path) == before


def test_damaged_vectors_fail_and_name_the_repair(kb):
    vectors = segment_file(kb.path, "vectors")
    vectors.write_bytes(b"garbage")
    r = CliRunner().invoke(main, ["check", "--kb", str(kb.path)])
    assert r.exit_code == 1
    assert f"{vectors.name}: mismatch" in r.output and f"logicroute check --repair --kb {kb.path}" in r.output
    out = json.loads(CliRunner().invoke(main, ["check", "--kb", str(kb.path), "--json"]).output)
    assert not out["ok"] and out["files"][vectors.name] == "mismatch" and out["vectors"] is None


def test_manifest_counts_that_disagree_with_the_files_fail(kb):
    m = json.loads((kb.path / "manifest.json").read_text())
    m["counts"]["documents"] = 3
    (kb.path / "manifest.json").write_text(json.dumps(m))
    report = check_kb(kb.path)
    assert not report.ok and any("3 documents" in p for p in report.problems)


def test_layers_that_miss_chunks_fail(kb):
    kb.add([Document("mars", "Mars", "Mars is the red planet.")], show_progress=False)  # no layer update
    report = check_kb(kb.path)
    assert not report.ok and report.layers["uncovered_chunks"] == 1 and report.chunks == 17


def test_a_changed_layer_file_fails_its_fingerprint(kb):
    meta = json.loads((layers_dir(kb) / META).read_text())
    nodes = layers_dir(kb) / meta["files"]["nodes"]
    nodes.write_text(nodes.read_text().replace('"text"', '"text" ', 1))  # still reads, other bytes
    report = check_kb(kb.path)
    assert not report.ok and any(meta["files"]["nodes"] in p and "mismatch" in p for p in report.problems)


def test_the_snapshot_of_a_change_that_died_is_a_note_not_damage(kb, monkeypatch):
    def crash(*a, **k):
        raise RuntimeError("crash before the manifest")

    monkeypatch.setattr(store, "atomic_write_json", crash)
    monkeypatch.setattr(store, "restore_snapshots", lambda directory, names: None)  # a hard crash
    with pytest.raises(RuntimeError):
        kb.delete(["river-0"])
    monkeypatch.undo()
    orphan = segment_file(kb.path, "deleted")  # written, never committed: no reader looks at it
    report = check_kb(kb.path)
    assert report.ok and orphan.name not in report.files and report.chunks == 16


def test_beside_an_active_writer_layer_lag_is_a_note(kb, emb):
    with KnowledgeBase.open(kb.path, emb).writing() as w:
        w.add([Document("mars", "Mars", "Mars is the red planet.")], show_progress=False)
        report = check_kb(kb.path)  # the writer holds the lock, its layer update is still to come
    assert report.writer_active and report.ok and report.chunks == 17
    assert any("the writer updates them" in n for n in report.notes)


def test_a_missing_kb_is_one_line_and_exit_2(tmp_path):
    r = CliRunner().invoke(main, ["check", "--kb", str(tmp_path / "nowhere")])
    assert r.exit_code == 2 and r.output.startswith("error: no knowledge base") and r.output.count("\n") == 1


def test_check_loads_no_model(kb):
    code = (
        "import sys; from click.testing import CliRunner; from engine.face.cli import main; "
        "h = CliRunner().invoke(main, ['check', '--help']); assert h.exit_code == 0, h.output; "
        f"r = CliRunner().invoke(main, ['check', '--kb', {str(kb.path)!r}, '--json']); "
        "assert r.exit_code == 0, r.output; "
        "print([m for m in ('torch', 'sentence_transformers', 'llama_cpp', 'openai') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
