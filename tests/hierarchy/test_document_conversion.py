"""PDF, HTML, DOCX and PPTX files, as specs: each is read into the Markdown path and cut along
its headings; a PDF's chunks carry their pages and its outline's headings, and its sources read
"report.pdf p. 2 > Results"; a locked or scanned PDF is one line and the run goes on; a folder
counts what no reader takes; a missing extra names its install command. Every file is written
at test time (tests/doc_files.py)."""

from __future__ import annotations

import logging
from collections import Counter

import pytest

from engine.floor.base.errors import MissingExtraError
from engine.floor.base.types import RetrievedChunk, Source
from engine.floor.sources_text import format_source
from hierarchy import converters
from hierarchy.chunking import chunk_document
from hierarchy.documents import Chunk
from hierarchy.kb import KnowledgeBase
from hierarchy.sources import load_documents, skipped_line
from tests import doc_files
from tests.fakes import HashedBowEmbedder


def chunks_of(path):
    (doc,) = load_documents(path)
    return doc, chunk_document(doc)


def test_a_pdf_chunk_carries_its_pages_and_the_outline_heading_it_sits_under(tmp_path):
    doc, chunks = chunks_of(doc_files.report_pdf(tmp_path / "report.pdf"))
    assert doc.title == "Annual report" and doc.meta["pages"] == 2
    by_heading = {c.heading_path: c for c in chunks}
    history, results = by_heading["Annual report > History"], by_heading["Annual report > Results"]
    # History runs onto page 2 until the line "Results" there, where the outline's entry begins
    assert history.pages == "1-2" and doc_files.LIGHTHOUSE in history.text and "painted red" in history.text
    assert results.pages == "2" and doc_files.SHIPS in results.text
    assert not any("<!--page" in c.text for c in chunks)  # the page marks are read, not indexed
    # a line that reads as Markdown stays a line of text: no heading, no setext underline
    assert "\\# of keepers: 3" in history.text and set(by_heading) == {history.heading_path, results.heading_path}


def test_running_headers_and_page_numbers_of_a_pdf_are_left_out(tmp_path):
    _, chunks = chunks_of(doc_files.manual_pdf(tmp_path / "manual.pdf", pages=4))
    text = "\n".join(c.text for c in chunks)
    assert all(f"Rule {n}: the keeper logs the weather at {n} o'clock." in text for n in range(1, 5))
    assert "lighthouse manual" not in text and not any(line.strip().isdigit() for line in text.splitlines())


def test_a_pdf_source_reads_name_page_and_heading(tmp_path):
    _, chunks = chunks_of(doc_files.report_pdf(tmp_path / "report.pdf"))
    results = next(c for c in chunks if c.heading_path.endswith("Results"))
    assert format_source(Source.of(2, RetrievedChunk.of(results, 0.9))) == "[2] report.pdf p. 2 > Results"
    history = next(c for c in chunks if c.heading_path.endswith("History"))
    assert format_source(Source.of(1, RetrievedChunk.of(history, 0.8))) == "[1] report.pdf pp. 1-2 > History"


def test_pages_survive_the_kb_and_come_back_with_search(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    doc_files.report_pdf(folder / "report.pdf")
    kb = KnowledgeBase.create(tmp_path / "kb", HashedBowEmbedder())
    kb.add(load_documents(folder), show_progress=False)
    (hit,) = KnowledgeBase.open(tmp_path / "kb", HashedBowEmbedder()).search("keeper counted ships winter", k=1)
    assert (hit.pages, hit.heading_path, hit.source) == ("2", "Annual report > Results", str(folder / "report.pdf"))


def test_chunks_without_pages_read_and_write_as_before():
    plain = Chunk("c1", "d", "T", "text", 0)
    assert "pages" not in plain.to_dict()
    assert Chunk.from_dict({**plain.to_dict(), "pages": "3-4"}).pages == "3-4"


def test_a_locked_pdf_and_a_scanned_pdf_get_one_line_each_and_the_run_goes_on(tmp_path, caplog):
    doc_files.locked_pdf(tmp_path / "locked.pdf")
    doc_files.scanned_pdf(tmp_path / "scan.pdf")
    (tmp_path / "damaged.pdf").write_bytes(b"%PDF-1.4 cut short")
    doc_files.report_pdf(tmp_path / "report.pdf")
    with caplog.at_level(logging.WARNING, logger="logicroute"):
        docs = load_documents(tmp_path)
    assert [d.id for d in docs] == ["report.pdf"]
    lines = {r.getMessage().split(":")[0].rsplit("/", 1)[-1]: r.getMessage() for r in caplog.records}
    assert set(lines) == {"locked.pdf", "scan.pdf", "damaged.pdf"} and len(caplog.records) == 3
    assert "encrypted" in lines["locked.pdf"] and "password" in lines["locked.pdf"]
    assert "no text layer" in lines["scan.pdf"] and "OCR" in lines["scan.pdf"]
    assert "not a readable PDF" in lines["damaged.pdf"]


def test_an_html_page_is_cut_along_its_headings_without_scripts_styles_or_navigation(tmp_path):
    doc, chunks = chunks_of(doc_files.guide_html(tmp_path / "guide.html"))
    assert doc.title == "Keeper's guide" and doc.meta["converted_from"] == "html"
    paths = [c.heading_path for c in chunks]
    assert paths == ["Keeper's guide", "Keeper's guide > The lamp", "Keeper's guide > The lamp > Cleaning"]
    cleaning = chunks[-1].text
    assert "Clean the lens daily." in cleaning and "lens.html" not in cleaning  # a link keeps its text only
    assert "```\npolish --lens --gentle\n```" in cleaning  # <pre> stays a code block
    text = "\n".join(c.text for c in chunks)
    assert "tracking" not in text and "color" not in text and "Next" not in text


def test_a_docx_keeps_its_heading_styles_as_the_heading_path(tmp_path):
    doc, chunks = chunks_of(doc_files.storms_docx(tmp_path / "log.docx"))
    assert doc.title == "Storm log"
    (winter,) = [c for c in chunks if doc_files.STORMS in c.text]
    assert winter.heading_path == "Storm log > Winter 1880" and winter.pages == ""


def test_a_pptx_gives_one_section_per_slide_with_its_notes(tmp_path):
    doc, chunks = chunks_of(doc_files.budget_pptx(tmp_path / "budget.pptx"))
    assert doc.title == "Lighthouse budget"
    (costs,) = chunks
    assert costs.heading_path == "Lighthouse budget > Slide 1: Costs"
    assert doc_files.BUDGET in costs.text and "Notes: Prices of 1875." in costs.text


def test_a_folder_counts_the_files_no_reader_takes_in_one_line(tmp_path, caplog):
    doc_files.guide_html(tmp_path / "guide.html")
    for name in ("intro.rst", "usage.rst", "logo.png"):
        (tmp_path / name).write_text("not read")
    with caplog.at_level(logging.WARNING, logger="logicroute"):
        docs = load_documents(tmp_path)
    assert [d.id for d in docs] == ["guide.html"]
    assert caplog.messages == [f"{tmp_path}: skipped 3 files: 2 .rst, 1 .png (no reader; -v lists them)"]


def test_without_the_docs_extra_a_folder_says_which_command_reads_its_pdfs(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(converters, "available", lambda kind: False)
    doc_files.report_pdf(tmp_path / "report.pdf")
    (tmp_path / "notes.md").write_text("# Notes\n\nKept.")
    with caplog.at_level(logging.WARNING, logger="logicroute"):
        assert [d.id for d in load_documents(tmp_path)] == ["notes.md"]
    (line,) = caplog.messages
    assert line.endswith("skipped 1 files: 1 .pdf (no reader; -v lists them); .pdf files are read with the "
                         "docs extra: pip install 'logicroute[docs]'")  # fmt: skip


def test_without_the_docs_extra_a_pdf_named_alone_is_refused_with_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setattr(converters, "available", lambda kind: False)
    with pytest.raises(MissingExtraError, match=r"report\.pdf: .*pip install 'logicroute\[docs\]'"):
        load_documents(doc_files.report_pdf(tmp_path / "report.pdf"))


def test_the_skipped_line_names_the_extra_only_for_kinds_it_reads():
    assert "docs extra" not in skipped_line(Counter({".rst": 2}))
    assert skipped_line(Counter({".rst": 1, ".docx": 1, ".htm": 1})).endswith(
        "; .docx, .htm files are read with the docs extra: pip install 'logicroute[docs]'"
    )
