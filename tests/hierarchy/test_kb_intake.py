"""The documents an add takes in (hierarchy.kb_intake): files of the same relative name from two
folders both stay, re-indexing a folder updates it in place (also in a KB written before the
ids knew their folders), a real collision is refused naming both files, and a document with
no text is refused."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from engine.floor.base.errors import DataFormatError, DocumentIdConflictError
from hierarchy.documents import Document
from hierarchy.indexing import index_sources
from hierarchy.kb import KnowledgeBase
from hierarchy.sources import load_documents


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def texts(kb: KnowledgeBase) -> dict[str, str]:
    """Document id -> its text, as the KB holds it (one chunk a document here)."""
    return {d: " ".join(c.text for c in kb.chunks_of(d)) for d in kb.doc_ids}


def sources(kb: KnowledgeBase) -> dict[str, str]:
    return {d: kb.chunks_of(d)[0].source for d in kb.doc_ids}


def as_written_before(doc: Document, folder: str) -> Document:
    """The document as `index FOLDER` read it before ids knew their folder: no root, and the
    source as the command line named it (relative to where it ran)."""
    return replace(doc, root="", meta={**doc.meta, "source": f"{folder}{doc.id}"})


@pytest.fixture
def kb(tmp_path, emb) -> KnowledgeBase:
    return KnowledgeBase.create(tmp_path / "kb", emb)


def test_a_second_folder_with_the_same_file_names_keeps_the_first_folders_documents(tmp_path, kb):
    write(tmp_path / "a", "x.txt", "one lighthouse")
    write(tmp_path / "b", "x.txt", "two rivers")
    kb.add(load_documents(tmp_path / "a"), show_progress=False)
    report = kb.add(load_documents(tmp_path / "b"), show_progress=False)
    assert texts(kb) == {"x.txt": "one lighthouse", "b/x.txt": "two rivers"}
    assert report["added_chunks"] == 1 and report["removed_chunks"] == 0
    assert sources(kb) == {"x.txt": str(tmp_path / "a" / "x.txt"), "b/x.txt": str(tmp_path / "b" / "x.txt")}


def test_indexing_each_folder_again_updates_its_own_documents_in_place(tmp_path, kb):
    write(tmp_path / "a", "x.txt", "one lighthouse")
    write(tmp_path / "b", "x.txt", "two rivers")
    for folder in ("a", "b"):
        kb.add(load_documents(tmp_path / folder), show_progress=False)
    write(tmp_path / "a", "x.txt", "one lighthouse, repainted")
    write(tmp_path / "b", "x.txt", "two rivers, flooded")
    for folder in ("a", "b"):
        report = kb.add(load_documents(tmp_path / folder), show_progress=False)
        assert report["added_chunks"] == 1 and report["removed_chunks"] == 1
    assert texts(kb) == {"x.txt": "one lighthouse, repainted", "b/x.txt": "two rivers, flooded"}


def test_the_same_folder_named_through_another_path_is_the_same_documents(tmp_path, kb, monkeypatch):
    write(tmp_path / "a", "x.txt", "one lighthouse")
    kb.add(load_documents(tmp_path / "a"), show_progress=False)
    monkeypatch.chdir(tmp_path / "a")
    report = kb.add(load_documents("."), show_progress=False)
    assert report["unchanged_documents"] == 1 and list(texts(kb)) == ["x.txt"]


def test_a_kb_written_with_relative_ids_and_sources_is_updated_in_place(tmp_path, emb, monkeypatch):
    """What `index docs/` wrote before ids knew their folder: the id relative to docs/, the
    source as given on the command line, relative to where it ran."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "docs", "x.txt", "one lighthouse")
    write(tmp_path / "docs", "sub/y.md", "# Y\n\nthe keeper's log")
    old = KnowledgeBase.create(tmp_path / "kb", emb)
    old.add([as_written_before(d, "docs/") for d in load_documents("docs/")], show_progress=False)
    assert sources(old) == {"x.txt": "docs/x.txt", "sub/y.md": "docs/sub/y.md"}
    write(tmp_path / "docs", "x.txt", "one lighthouse, repainted")
    kb = KnowledgeBase.open(tmp_path / "kb", emb)
    report = kb.add(load_documents("docs/"), show_progress=False)
    assert sorted(kb.doc_ids) == ["sub/y.md", "x.txt"]
    assert report["added_chunks"] == 1 and report["removed_chunks"] == 1 and report["unchanged_chunks"] == 1
    assert texts(kb)["x.txt"] == "one lighthouse, repainted"
    assert sources(kb)["x.txt"] == str(tmp_path / "docs" / "x.txt")  # recorded absolute from now on


def test_an_old_kb_reindexed_from_another_working_directory_is_still_updated_in_place(tmp_path, emb, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "docs", "x.txt", "one lighthouse")
    old = KnowledgeBase.create(tmp_path / "kb", emb)
    old.add([as_written_before(d, "docs/") for d in load_documents("docs/")], show_progress=False)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # docs/x.txt read from here names no file: taken as moved
    kb = KnowledgeBase.open(tmp_path / "kb", emb)
    report = kb.add(load_documents(tmp_path / "docs"), show_progress=False)
    assert kb.doc_ids == ["x.txt"] and report["added_chunks"] == 0 and report["unchanged_chunks"] == 1


def test_a_moved_folder_takes_over_its_documents_ids_and_says_so(tmp_path, kb, caplog):
    write(tmp_path / "old", "x.txt", "one lighthouse")
    kb.add(load_documents(tmp_path / "old"), show_progress=False)
    (tmp_path / "old").rename(tmp_path / "new")
    with caplog.at_level("INFO", logger="logicroute.kb"):
        report = kb.add(load_documents(tmp_path / "new"), show_progress=False)
    assert kb.doc_ids == ["x.txt"] and report["added_chunks"] == 0
    assert sources(kb) == {"x.txt": str(tmp_path / "new" / "x.txt")}
    assert "1 documents whose files are gone taken as moved: x.txt" in caplog.text


def test_files_that_took_their_folders_name_are_listed_in_one_line(tmp_path, kb, caplog):
    write(tmp_path / "a", "x.txt", "one lighthouse")
    write(tmp_path / "more_docs", "x.txt", "two rivers")
    kb.add(load_documents(tmp_path / "a"), show_progress=False)
    with caplog.at_level("INFO", logger="logicroute.kb"):
        kb.add(load_documents(tmp_path / "more_docs"), show_progress=False)
    assert "1 documents indexed with their folder's name in the id" in caplog.text
    assert caplog.text.count("more_docs/x.txt") == 1


def test_two_folders_indexed_in_one_run_both_land(tmp_path, emb):
    write(tmp_path / "a", "x.txt", "one lighthouse")
    write(tmp_path / "b", "x.txt", "two rivers")
    result = index_sources(
        tmp_path / "kb", [tmp_path / "a", tmp_path / "b"], summaries="none", embedder=emb, show_progress=False
    )
    assert texts(result.kb) == {"x.txt": "one lighthouse", "b/x.txt": "two rivers"}


def test_two_existing_files_claiming_one_id_are_refused_naming_both(tmp_path, kb):
    write(tmp_path / "a", "x.txt", "one lighthouse")
    holder = write(tmp_path / "a", "b/x.txt", "a keeper's log")
    claimer = write(tmp_path / "b", "x.txt", "two rivers")
    kb.add(load_documents(tmp_path / "a"), show_progress=False)  # holds x.txt and b/x.txt
    before = texts(kb)
    with pytest.raises(DocumentIdConflictError) as e:
        kb.add(load_documents(tmp_path / "b"), show_progress=False)
    message = str(e.value)
    assert "\n" not in message and str(holder) in message and str(claimer) in message and "'b/x.txt'" in message
    assert texts(KnowledgeBase.open(kb.path, kb.embedder)) == before


def test_a_document_with_an_id_of_its_own_still_replaces_the_one_of_that_id(kb):
    kb.add([Document("note", "Note", "first version")], show_progress=False)
    kb.add([Document("note", "Note", "second version")], show_progress=False)
    assert texts(kb) == {"note": "second version"}


def test_a_file_never_takes_the_id_of_a_document_given_its_own(tmp_path, kb):
    kb.add([Document("x.txt", "x", "from a JSONL")], show_progress=False)
    write(tmp_path / "a", "x.txt", "one lighthouse")
    kb.add(load_documents(tmp_path / "a"), show_progress=False)
    assert texts(kb) == {"x.txt": "from a JSONL", "a/x.txt": "one lighthouse"}


@pytest.mark.parametrize(
    "text",
    [
        *("", "   ", "\n\t \n", "\u00a0\u2003", "\u200b", "\u2060\ufeff", "\x00", "\x00\u200b \u200d\n", "\u3164"),
        *("\ufe0f\ufe0f", "\u034f", "\u180b\u180c\u180d", "\u0301 \u20dd", "\ud800"),
    ],
    ids=[
        *("empty", "spaces", "newlines", "nbsp-emspace", "zero-width", "word-joiner-bom", "nul", "mixed", "filler"),
        *("variation-selectors", "grapheme-joiner", "mongolian-selectors", "lone-marks", "lone-surrogate"),
    ],
)
def test_a_document_without_text_is_refused_and_nothing_is_written(kb, text):
    with pytest.raises(DataFormatError, match=r"'blank'.*no text \(empty, or only whitespace, zero-width or control"):
        kb.add([Document("fine", "Fine", "some text"), Document("blank", "Blank", text)], show_progress=False)
    assert len(KnowledgeBase.open(kb.path, kb.embedder)) == 0


def test_lone_surrogates_in_a_documents_id_title_or_text_become_replacement_characters_and_are_named(kb, caplog):
    """A JSON "\\ud800" escape gives a str no UTF-8 file or tokenizer carries: repaired, not fatal."""
    kb.add([Document("s\ud800", "T\udfff", "Ada built the lighthouse \ud800 in 1850."), Document("ok", "Ok", "Fine.")])
    assert texts(kb) == {"s\ufffd": "Ada built the lighthouse \ufffd in 1850.", "ok": "Fine."}
    assert kb.chunks_of("s\ufffd")[0].title == "T\ufffd"
    assert "1 document held lone surrogates (text that is no Unicode" in caplog.text and "s\ufffd" in caplog.text


def test_a_text_with_one_visible_character_among_zero_width_ones_is_taken(kb):
    kb.add([Document("mark", "Mark", "\u200b\u200bX\ufeff")], show_progress=False)
    assert texts(kb) == {"mark": "\u200b\u200bX\ufeff"}
