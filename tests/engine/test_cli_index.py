"""`logicroute index` as a user runs it (a fake embedder injected, no model): the README's two
folders both stay, and a rerun over unchanged files says they are already indexed."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from engine.face.cli import main
from hierarchy.kb import KnowledgeBase
from tests.fakes import HashedBowEmbedder


@pytest.fixture
def emb() -> HashedBowEmbedder:
    return HashedBowEmbedder(dim=128)


def run(emb, *args: str, usage_error_expected: bool = False):
    return CliRunner().invoke(main, list(args), obj={"embedder": emb}, usage_error_expected=usage_error_expected)


def write(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_readmes_index_docs_then_more_docs_keeps_both_folders(tmp_path, emb, monkeypatch):
    """README, "Use it on your own documents": `index docs/ notes.jsonl --kb kb/`, then
    `index more_docs/ --kb kb/`, here with relative names the two folders share."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "docs" / "lighthouse.md", "# Lighthouse\n\nThe Ardmere lighthouse was built in 1871.")
    write(tmp_path / "docs" / "guide" / "river.txt", "The Tamsk river is 143 km long.")
    (tmp_path / "notes.jsonl").write_text(json.dumps({"id": "n1", "title": "Note", "text": "A keeper's note."}) + "\n")
    write(tmp_path / "more_docs" / "lighthouse.md", "# Lighthouse\n\nThe Korsa lighthouse burned down in 1902.")
    write(tmp_path / "more_docs" / "guide" / "river.txt", "The Olm river freezes every winter.")
    first = run(emb, "index", "docs/", "notes.jsonl", "--kb", "kb/", "--summaries", "none")
    assert first.exit_code == 0, first.output
    second = run(emb, "index", "more_docs/", "--kb", "kb/", "--summaries", "none")
    assert second.exit_code == 0, second.output
    assert "2 documents -> 2 new chunks" in second.stderr
    assert "2 documents indexed with their folder's name in the id" in second.stderr
    kb = KnowledgeBase.open(tmp_path / "kb", emb)
    assert sorted(kb.doc_ids) == [
        "guide/river.txt",
        "lighthouse.md",
        "more_docs/guide/river.txt",
        "more_docs/lighthouse.md",
        "n1",
    ]
    assert "Korsa" in kb.chunks_of("more_docs/lighthouse.md")[0].text
    assert "Ardmere" in kb.chunks_of("lighthouse.md")[0].text
    again = run(emb, "index", "more_docs/", "--kb", "kb/", "--summaries", "none")  # in place, no third copy
    assert again.exit_code == 0 and "2 documents (2 already indexed, unchanged) -> 0 new chunks" in again.stderr
    check = run(emb, "check", "--kb", "kb/", "--json")
    assert check.exit_code == 0 and json.loads(check.stdout)["documents"] == 5


def test_a_rerun_over_unchanged_files_says_already_indexed_not_duplicates(tmp_path, emb):
    for i in range(3):
        write(tmp_path / "docs" / f"d{i}.txt", f"Document number {i} tells of harbour {i}.")
    args = ["index", str(tmp_path / "docs"), "--kb", str(tmp_path / "kb"), "--summaries", "none"]
    assert run(emb, *args).exit_code == 0
    again = run(emb, *args)
    assert again.exit_code == 0
    assert "3 documents (3 already indexed, unchanged) -> 0 new chunks (3 unchanged)" in again.stderr
    assert "duplicate" not in again.stderr


def test_a_chunk_another_document_holds_is_reported_as_a_duplicate(tmp_path, emb):
    write(tmp_path / "a" / "x.md", "# Harbours\n\nThe same words in two files.")
    write(tmp_path / "b" / "y.md", "# Harbours\n\nThe same words in two files.")  # same title and text: one chunk
    run(emb, "index", str(tmp_path / "a"), "--kb", str(tmp_path / "kb"), "--summaries", "none")
    r = run(emb, "index", str(tmp_path / "b"), "--kb", str(tmp_path / "kb"), "--summaries", "none")
    assert "1 documents -> 0 new chunks (1 duplicates of other documents' chunks)" in r.stderr


def test_index_retrieval_dense_is_recorded_and_ask_retrieval_holds_for_its_run(tmp_path, emb):
    from engine.core.pipeline import RoutedRAG

    write(tmp_path / "docs" / "lava.md", "# Lava\n\nLava flows from the crater of a volcano.")
    built = run(emb, "index", str(tmp_path / "docs"), "--kb", str(tmp_path / "kb"), "--summaries", "none")
    assert built.exit_code == 0, built.output
    assert KnowledgeBase.open(tmp_path / "kb", emb).retrieval == "hybrid"  # a new KB's default
    dense = run(emb, "index", "--kb", str(tmp_path / "kb"), "--retrieval", "dense", "--summaries", "none")
    assert dense.exit_code == 0, dense.output
    kb = KnowledgeBase.open(tmp_path / "kb", emb)
    assert kb.retrieval == "dense"
    rag = RoutedRAG(kb=kb, retrieval="hybrid", llm=object())  # what `ask --retrieval hybrid` builds
    assert rag.kb.retrieval == "hybrid" and KnowledgeBase.open(tmp_path / "kb", emb).retrieval == "dense"
    bad = run(emb, "index", "--kb", str(tmp_path / "kb"), "--retrieval", "bm25", usage_error_expected=True)
    assert bad.exit_code == 2 and "'bm25' is not one of 'dense', 'hybrid'" in bad.output


def test_index_skips_a_link_out_of_the_folder_and_v_lists_it(tmp_path, emb):
    write(tmp_path / "docs" / "a.md", "# Lighthouse\n\nThe Ardmere lighthouse was built in 1871.")
    write(tmp_path / "outside" / "passwd", "root:x:0:0:the secret line")
    (tmp_path / "docs" / "notes.txt").symlink_to(tmp_path / "outside" / "passwd")
    r = run(emb, "-v", "index", str(tmp_path / "docs"), "--kb", str(tmp_path / "kb"), "--summaries", "none")
    assert r.exit_code == 0, r.output
    target = (tmp_path / "outside" / "passwd").resolve()
    assert (
        f"warning: {tmp_path / 'docs'}: skipped 1 link that leads outside the folder: notes.txt -> {target}" in r.stderr
    )
    assert f"debug: {tmp_path / 'docs'}: skipped notes.txt -> {target}: link that leads outside the folder" in r.stderr
    kb = KnowledgeBase.open(tmp_path / "kb", emb)
    assert kb.doc_ids == ["a.md"] and not kb.search("root secret line", k=5)[0].text.startswith("root")


def test_index_set_changes_a_limit_on_reading_a_file_and_a_bad_key_fails_in_one_line(tmp_path, emb):
    from tests import doc_files

    write(tmp_path / "docs" / "a.md", "# Lighthouse\n\nThe Ardmere lighthouse was built in 1871.")
    doc_files.storms_docx(tmp_path / "docs" / "log.docx")
    args = ["index", str(tmp_path / "docs"), "--kb", str(tmp_path / "kb"), "--summaries", "none"]
    low = run(emb, *args, "--set", "intake.max_paragraphs=1")
    assert low.exit_code == 0, low.output
    assert "log.docx: skipped, holds more than 1 paragraphs, over the limit intake.max_paragraphs=1" in low.stderr
    assert KnowledgeBase.open(tmp_path / "kb", emb).doc_ids == ["a.md"]
    assert run(emb, *args).exit_code == 0
    assert sorted(KnowledgeBase.open(tmp_path / "kb", emb).doc_ids) == ["a.md", "log.docx"]
    bad = run(emb, *args, "--set", "intake.max_pagez=3")
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1
    assert "'intake.max_pagez=3': expected intake.NAME=VALUE, NAME one of max_file_mb," in bad.stderr


@pytest.mark.embedder
def test_a_file_whose_name_is_not_utf8_is_skipped_and_named_and_the_rest_of_the_folder_indexed(tmp_path, real_embedder):
    """An archive unpacked from another system: `caf\\xe9.txt` (Latin-1 bytes) beside `g.txt`.
    The real tokenizer refused the name's surrogate, and the whole folder was lost."""
    folder = tmp_path / "docs"
    write(folder / "g.txt", "The Ardmere lighthouse was built in 1871.")
    write(folder / "sub" / "h.txt", "The Tamsk river is 143 km long.")
    (folder / "sub" / "h.txt").parent.joinpath(b"caf\xe9.txt".decode("utf-8", "surrogateescape")).write_text("Coffee.")
    done = run(real_embedder, "index", str(folder), "--kb", str(tmp_path / "kb"), "--summaries", "none")
    assert done.exit_code == 0, done.output
    assert "skipped 1 file whose name is not UTF-8 (rename it to index it): sub/caf\\xe9.txt" in done.stderr
    assert sorted(KnowledgeBase.open(tmp_path / "kb", real_embedder).doc_ids) == ["g.txt", "sub/h.txt"]


@pytest.mark.embedder
def test_a_jsonl_document_with_a_lone_surrogate_is_indexed_with_a_replacement_character(tmp_path, real_embedder):
    lines = ['{"id": "a", "text": "Ada built the lighthouse \\ud800 in 1850."}', '{"id": "b", "text": "Bees."}']
    (tmp_path / "docs.jsonl").write_text("\n".join(lines) + "\n")
    done = run(
        real_embedder, "index", str(tmp_path / "docs.jsonl"), "--kb", str(tmp_path / "kb"), "--summaries", "none"
    )
    assert done.exit_code == 0, done.output
    assert "1 document held lone surrogates" in done.stderr
    kb = KnowledgeBase.open(tmp_path / "kb", real_embedder)
    assert kb.chunks_of("a")[0].text == "Ada built the lighthouse \ufffd in 1850." and kb.chunks_of("b")


def test_a_file_named_alone_whose_name_is_not_utf8_is_refused_in_one_line(tmp_path, emb):
    odd = tmp_path / b"caf\xe9.txt".decode("utf-8", "surrogateescape")
    odd.write_text("Coffee.")
    done = run(emb, "index", str(odd), "--kb", str(tmp_path / "kb"))
    assert done.exit_code == 2 and "caf\\xe9.txt: the file's name is not UTF-8: rename it to index it" in done.stderr
