"""A knowledge base this process may not write: reading it needs no write at all (not even the
lock file), and any change is refused with one typed line that says it is read-only. Also: a KB
with no chunks refuses to answer.

Tests run as root in CI, where permission bits do not stop writes: the read-only folder is
simulated by refusing every open for writing under it; the chmod variant runs only as non-root."""

from __future__ import annotations

import builtins
import errno
import io
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from engine.face.cli import main
from engine.floor.base.errors import KBEmptyError, KBReadOnlyError
from hierarchy.indexing import delete_documents, index_sources
from hierarchy.kb import KnowledgeBase
from hierarchy.kb_check import check_kb
from hierarchy.layers.persist import load_layers
from tests.fakes import layered_kb
from tests.samples import DOCS

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


@pytest.fixture
def kb(tmp_path, emb) -> KnowledgeBase:
    return layered_kb(tmp_path / "kb", emb)


def _read_only(monkeypatch, root: Path) -> list[str]:
    """Refuse, as a read-only folder would, every open for writing under `root`; returns the
    refused paths."""
    root_s = str(root.resolve())
    refused: list[str] = []
    real_os_open, real_open = os.open, builtins.open

    def under(p) -> bool:
        return not isinstance(p, int) and os.path.abspath(os.fspath(p)).startswith(root_s)

    def deny(p):
        refused.append(str(p))
        raise PermissionError(errno.EACCES, "Permission denied", str(p))

    def os_open(path, flags, mode=0o777, *, dir_fd=None):
        if flags & _WRITE_FLAGS and under(path):
            deny(path)
        return real_os_open(path, flags, mode, dir_fd=dir_fd)

    def open_(file, mode="r", *a, **k):
        if any(ch in mode for ch in "wax+") and under(file):
            deny(file)
        return real_open(file, mode, *a, **k)

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(builtins, "open", open_)
    monkeypatch.setattr(io, "open", open_)
    return refused


def _files(path: Path) -> dict:
    return {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in path.rglob("*") if p.is_file()}


def test_a_read_only_kb_opens_searches_and_checks_without_writing(kb, emb, monkeypatch):
    before = _files(kb.path)
    refused = _read_only(monkeypatch, kb.path)
    ro = KnowledgeBase.open(kb.path, emb)
    assert ro.search("lava eruption", k=1)[0].doc_id.startswith("volcano")
    assert load_layers(ro) is not None and check_kb(kb.path).ok
    assert refused == [] and _files(kb.path) == before


@pytest.mark.parametrize("change", ["index", "delete"])
def test_changing_a_read_only_kb_is_one_typed_line(kb, emb, tmp_path, monkeypatch, change):
    src = tmp_path / "new.jsonl"
    src.write_text('{"id": "mars", "title": "Mars", "text": "Mars is the red planet."}\n')
    before = _files(kb.path)
    _read_only(monkeypatch, kb.path)
    with pytest.raises(KBReadOnlyError) as e:
        if change == "index":
            index_sources(kb.path, [str(src)], embedder=emb, show_progress=False)
        else:
            delete_documents(KnowledgeBase.open(kb.path, emb), ["river-0"])
    assert "read-only" in str(e.value) and str(kb.path) in str(e.value) and "\n" not in str(e.value)
    assert _files(kb.path) == before


def test_the_cli_reports_a_read_only_kb_in_one_line(kb, emb, monkeypatch):
    _read_only(monkeypatch, kb.path)
    r = CliRunner().invoke(main, ["index", "--kb", str(kb.path), "--delete", "river-0"])
    assert r.exit_code == 2 and "read-only" in r.output and r.output.count("\n") == 1


def test_a_folder_without_write_access_is_read_only(kb, emb, monkeypatch):
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda p, m, **k: False if m & os.W_OK and Path(p) == kb.path else real_access(p, m, **k)
    )
    with pytest.raises(KBReadOnlyError, match="read-only"):
        delete_documents(kb, ["river-0"])
    assert len(KnowledgeBase.open(kb.path, emb)) == 16


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores permission bits")
def test_a_chmod_read_only_kb_reads_and_refuses_changes(kb, emb):
    paths = [kb.path, *kb.path.rglob("*")]
    for p in paths:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        assert len(KnowledgeBase.open(kb.path, emb).search("river", k=2)) == 2
        with pytest.raises(KBReadOnlyError):
            index_sources(kb.path, [], delete_ids=["river-0"], embedder=emb)
    finally:
        for p in paths:
            p.chmod(0o755 if p.is_dir() else 0o644)


def test_an_empty_kb_refuses_to_answer_in_one_line(tmp_path, emb):
    empty = KnowledgeBase.create(tmp_path / "empty", emb)
    with pytest.raises(KBEmptyError) as e:
        KnowledgeBase.open(empty.path, emb).require_chunks()
    assert "is empty" in str(e.value) and "logicroute index" in str(e.value) and "\n" not in str(e.value)
    empty.add(DOCS, show_progress=False)
    empty.require_chunks()  # chunks now: no error
