"""A KB on a real Milvus server survives the server's faults: down when `index` or `ask` starts
(one line naming the URI, exit 2, the KB untouched), killed in the middle of `index` (the last
commit intact; after a restart the rerun adds every chunk once), a collection dropped behind the
KB's back (`check` names it, `check --repair` rebuilds it from the KB's own chunks).

The server is tests.milvus_server's, started once (`milvus_fault_server`: stopped and killed
here, so the contract specs' `milvus_server` never sees a fault). Figures printed with -s are
recorded in docs/results/milvus_server.md (with how they were measured)."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from engine.core.pipeline import RoutedRAG
from engine.face.cli import main
from engine.floor.base.errors import KBCorruptError, StoreUnavailableError
from hierarchy.indexing import index_sources
from hierarchy.kb import KnowledgeBase
from hierarchy.kb_check import check_kb
from hierarchy.kb_repair import repair_kb
from hierarchy.kb_stores import JOURNAL
from hierarchy.vector_store.base import parse_store
from tests.fakes import FakeRouter, ScriptedLLM
from tests.samples import make_docs

pytest.importorskip("pymilvus")

QUESTION = "Which river had a flood in its delta basin?"


def _source(folder, name: str, docs) -> str:
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n" for d in docs))
    return str(path)


def _index(kb_dir, sources, emb, store=None):
    return index_sources(kb_dir, sources, embedder=emb, summaries="none", store=store, show_progress=False)


def _files(kb_dir) -> dict[str, bytes]:
    """Every file of the KB folder and its bytes: what "untouched" compares."""
    return {str(p.relative_to(kb_dir)): p.read_bytes() for p in sorted(kb_dir.rglob("*")) if p.is_file()}


def _one_error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


def _on_the_kb(monkeypatch, emb) -> None:
    """`ask` on the KB it is given, with the fake router and a scripted LLM: no model loads."""

    def open_on(cls, kb, **options):
        return RoutedRAG(kb=KnowledgeBase.open(kb, emb), llm=ScriptedLLM(replies=["The Nile."]), router=FakeRouter())

    monkeypatch.setattr(RoutedRAG, "open", classmethod(open_on))


def test_index_and_ask_with_the_server_down_say_so_in_one_line_exit_2_and_leave_the_kb_untouched(
    milvus_fault_server, tmp_path, emb, monkeypatch
):
    server = milvus_fault_server
    kb_dir = tmp_path / "kb"
    _index(kb_dir, [_source(tmp_path, "first", make_docs(1))], emb, store=parse_store(f"milvus://{server.uri}"))
    _on_the_kb(monkeypatch, emb)
    asked = CliRunner().invoke(main, ["ask", QUESTION, "--kb", str(kb_dir), "--route", "chunk"], obj={"embedder": emb})
    assert asked.exit_code == 0, asked.output  # the same command answers while the server is up
    before = _files(kb_dir)
    server.stop()

    more = _source(tmp_path, "more", make_docs(1, prefix="more "))
    indexed = CliRunner().invoke(
        main, ["index", more, "--kb", str(kb_dir), "--summaries", "none"], obj={"embedder": emb}
    )
    assert indexed.exit_code == 2
    assert _one_error_line(indexed).startswith(f"error: cannot reach Milvus at {server.uri}")
    asked = CliRunner().invoke(main, ["ask", QUESTION, "--kb", str(kb_dir), "--route", "chunk"], obj={"embedder": emb})
    assert asked.exit_code == 2
    assert _one_error_line(asked).startswith(f"error: cannot reach Milvus at {server.uri}")
    new_kb = tmp_path / "new-kb"
    args = ["index", more, "--kb", str(new_kb), "--summaries", "none", "--store", f"milvus://{server.uri}"]
    created = CliRunner().invoke(main, args, obj={"embedder": emb})
    assert created.exit_code == 2 and f"cannot reach Milvus at {server.uri}" in _one_error_line(created)
    assert _files(kb_dir) == before  # not a byte of the KB changed: no journal, no lock left, no commit

    server.start()
    assert check_kb(kb_dir).ok
    asked = CliRunner().invoke(main, ["ask", QUESTION, "--kb", str(kb_dir), "--route", "chunk"], obj={"embedder": emb})
    assert asked.exit_code == 0, asked.output


def test_a_server_killed_in_the_middle_of_index_leaves_the_last_commit_and_the_rerun_adds_every_chunk_once(
    milvus_fault_server, tmp_path, emb, monkeypatch
):
    import pymilvus

    from hierarchy.vector_store import milvus_store

    server = milvus_fault_server
    store = parse_store(f"milvus://{server.uri}")
    first = _source(tmp_path, "first", make_docs(2))  # 16 documents
    second = _source(tmp_path, "second", make_docs(6, prefix="second "))  # 48 more
    expected = len(_index(tmp_path / "oracle", [first, second], emb, store=parse_store("faiss")).kb)
    kb_dir = tmp_path / "kb"
    committed = len(_index(kb_dir, [first], emb, store=store).kb)
    manifest = (kb_dir / "manifest.json").read_bytes()

    upsert = pymilvus.MilvusClient.upsert
    batches = []

    def upsert_then_crash(self, *a, **k):
        out = upsert(self, *a, **k)
        batches.append(len(k["data"]))
        if len(batches) == 1:
            server.kill()  # SIGKILL after the first batch landed: nothing flushed, nothing said
        return out

    with monkeypatch.context() as m:
        m.setattr(milvus_store, "BATCH", 8)  # rows per upsert: the change goes in several batches
        m.setattr(pymilvus.MilvusClient, "upsert", upsert_then_crash)
        with pytest.raises(StoreUnavailableError, match=f"cannot reach Milvus at {server.uri}"):
            _index(kb_dir, [second], emb)

    assert (kb_dir / "manifest.json").read_bytes() == manifest  # the last commit, as it was
    assert len(KnowledgeBase.open(kb_dir, emb)) == committed and (kb_dir / JOURNAL).exists()
    t0 = time.monotonic()
    server.start()
    restart_s = time.monotonic() - t0
    kb = KnowledgeBase.open(kb_dir, emb)
    rows_after_restart = kb.store.count()  # the committed rows and the dead change's first batch
    assert rows_after_restart == committed + batches[0]
    assert not {h.chunk_id for h in kb.search(QUESTION, k=committed)} - set(kb.chunk_ids)  # never shown
    assert check_kb(kb_dir).ok

    _index(kb_dir, [second], emb)  # the rerun: settles the dead change's rows, adds the rest
    kb = KnowledgeBase.open(kb_dir, emb)
    assert len(kb) == expected and kb.store.count() == expected  # no chunk missing, none twice
    assert kb.store.all_ids() == set(kb.chunk_ids) and not (kb_dir / JOURNAL).exists()
    assert check_kb(kb_dir).ok
    again = _index(kb_dir, [second], emb).added
    assert (again["duplicate_chunks"], kb.store.count()) == (0, expected)
    print(
        f"\nkilled mid-index: committed {committed} chunks, first batch {batches[0]} rows landed, "
        f"Milvus rows after restart {rows_after_restart}, KB after the crash {committed}, "
        f"after the rerun {len(kb)} chunks / {kb.store.count()} rows (expected {expected}); restart {restart_s:.1f} s"
    )


def test_a_collection_dropped_behind_the_kbs_back_is_named_by_check_and_search_and_repair_rebuilds_it(
    milvus_server, tmp_path, emb
):
    from pymilvus import MilvusClient

    kb_dir = tmp_path / "kb"
    kb = _index(
        kb_dir, [_source(tmp_path, "docs", make_docs(2))], emb, store=parse_store(f"milvus://{milvus_server.uri}")
    ).kb
    hits = [h.chunk_id for h in kb.search(QUESTION, k=5)]
    collection = kb.store.spec.collection
    MilvusClient(uri=milvus_server.uri).drop_collection(collection)

    report = check_kb(kb_dir)
    assert not report.ok and any(collection in p and "--repair" in p for p in report.problems), report.problems
    with pytest.raises(KBCorruptError, match=f"no collection {collection}.*check --repair"):
        KnowledgeBase.open(kb_dir, emb).search(QUESTION, k=5)  # never an empty answer that looks fine
    checked = CliRunner().invoke(main, ["check", "--kb", str(kb_dir)])
    assert checked.exit_code != 0 and collection in checked.output

    repaired = repair_kb(kb_dir, embedder=emb, show_progress=False)
    assert any(f"had no collection {collection}: rebuilt, {len(kb)} committed chunks" in n for n in repaired.notes)
    again = KnowledgeBase.open(kb_dir, emb)
    assert check_kb(kb_dir).ok and again.store.all_ids() == set(kb.chunk_ids)
    assert [h.chunk_id for h in again.search(QUESTION, k=5)] == hits
