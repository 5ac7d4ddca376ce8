"""Document sources: folders of text files, documents JSONL, QA data files."""

from __future__ import annotations

import json
import logging

import pytest

from engine.floor.base.errors import DataFormatError, LogicRouteError, UnknownFormatError
from hierarchy.datasets import passage_id
from hierarchy.sources import load_documents


def test_sources_folder(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.md").write_text("intro\n# The Title\nbody text")
    (tmp_path / "sub" / "b.txt").write_text("plain text file")
    (tmp_path / "empty.txt").write_text("   ")
    (tmp_path / "skip.pdf").write_bytes(b"%PDF")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "c.md").write_text("hidden")
    docs = load_documents(tmp_path)
    assert [(d.id, d.title) for d in docs] == [("a.md", "The Title"), ("sub/b.txt", "b")]
    assert docs[1].text == "plain text file"


def test_sources_jsonl(tmp_path):
    p = tmp_path / "docs.jsonl"
    p.write_text('{"id": "1", "title": "One", "text": "first"}\n\n{"id": 2, "text": "second"}\n')
    docs = load_documents(p)
    assert [(d.id, d.title, d.text) for d in docs] == [("1", "One", "first"), ("2", "", "second")]


def test_sources_malformed_jsonl_line(tmp_path):
    p = tmp_path / "docs.jsonl"
    p.write_text('{"id": "1", "title": "One", "text": "first"}\n{"id": "2", "text": \n')
    with pytest.raises(DataFormatError, match=r"docs.jsonl:2"):
        load_documents(p)
    p.write_text('{"id": "1", "text": "first"}\n{"id": "2", "text": 5}\n')
    with pytest.raises(DataFormatError, match=r"docs.jsonl:2: field 'text'"):
        load_documents(p)


def test_sources_unknown_format_and_missing_path(tmp_path):
    p = tmp_path / "thing.csv"
    p.write_text("a,b\n1,2\n")
    with pytest.raises(UnknownFormatError, match="Supported"):
        load_documents(p)
    with pytest.raises(LogicRouteError, match="no such file or folder"):
        load_documents(tmp_path / "missing")


def test_sources_qa_file_gives_passages(tmp_path):
    p = tmp_path / "qa.jsonl"
    rec = {
        "question_id": "q1",
        "question_text": "Who?",
        "answers_objects": [{"spans": ["A"]}],
        "contexts": [
            {"id": "0", "title": "T1", "paragraph_text": "Text one.", "is_supporting": True},
            {"id": "1", "title": "T2", "paragraph_text": "Text two.", "is_supporting": False},
        ],
    }
    p.write_text(json.dumps(rec) + "\n")
    docs = load_documents(p)
    assert [(d.title, d.text) for d in docs] == [("T1", "Text one."), ("T2", "Text two.")]


def test_documents_without_id_get_their_passage_id(tmp_path):
    p = tmp_path / "docs.jsonl"
    p.write_text('{"title": "One", "text": "first"}\n{"text": "second"}\n')
    docs = load_documents(p)
    assert [d.id for d in docs] == [passage_id("One", "first"), passage_id("", "second")]
    # Persisted ids: the value for a given passage never changes.
    assert docs[0].id == "8029a61981d5eda5"


def test_a_file_that_is_not_utf8_is_read_as_cp1252_and_says_so(tmp_path, caplog):
    (tmp_path / "latin.txt").write_bytes("Café crème at the Ardmere Lighthouse.".encode("cp1252"))
    with caplog.at_level(logging.WARNING, logger="logicroute"):
        (doc,) = load_documents(tmp_path)
    assert doc.text == "Café crème at the Ardmere Lighthouse."
    assert doc.meta["encoding"] == "cp1252"
    assert "not UTF-8" in caplog.text and "latin.txt" in caplog.text


def test_a_binary_file_with_a_text_name_is_skipped_with_a_warning(tmp_path, caplog):
    (tmp_path / "image.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (tmp_path / "notes.md").write_text("# Notes\nThe Tamsk river is 143 km long.")
    with caplog.at_level(logging.WARNING, logger="logicroute"):
        docs = load_documents(tmp_path)
    assert [d.id for d in docs] == ["notes.md"]
    assert "image.md" in caplog.text and "binary" in caplog.text


@pytest.mark.parametrize("files", [{}, {"empty.txt": "", "blank.md": "  \n\t"}])
def test_a_source_with_nothing_to_index_is_refused(tmp_path, files):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(DataFormatError, match="no document with text to index"):
        load_documents(tmp_path)


def test_a_text_file_of_only_zero_width_characters_is_skipped_with_a_warning(tmp_path, caplog):
    (tmp_path / "blank.txt").write_text("\u200b\u2060\ufeff\n\u200d")
    (tmp_path / "notes.md").write_text("# Notes\nThe Tamsk river is 143 km long.")
    with caplog.at_level(logging.WARNING, logger="logicroute"):
        docs = load_documents(tmp_path)
    assert [d.id for d in docs] == ["notes.md"]
    assert caplog.messages == [
        f"{tmp_path / 'blank.txt'}: skipped, no text in it (empty, or only whitespace or zero-width characters)"
    ]


def test_a_jsonl_document_of_only_invisible_characters_is_left_out_as_a_blank_one_is(tmp_path):
    p = tmp_path / "docs.jsonl"
    lines = [{"id": "zw", "text": "\u200b"}, {"id": "nul", "text": "\u0000"}, {"id": "ok", "text": "The Olm river."}]
    p.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert [d.id for d in load_documents(p)] == ["ok"]
