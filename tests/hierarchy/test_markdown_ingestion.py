"""Markdown ingestion, as specs: the front matter's title names the document and is not indexed,
chunks follow the headings and carry their heading path, code blocks stay whole, the file name is
the last resort for a title, plain text keeps its word windows and chunk ids, and the source path
and heading path survive the KB; then the same on real documentation shipped inside installed
packages (collected at test time, skipped when there is none)."""

from __future__ import annotations

import logging
import sysconfig
from pathlib import Path

import pytest

from hierarchy.chunking import chunk_document, chunk_id, markdown_blocks, split_text
from hierarchy.documents import Chunk
from hierarchy.kb import KnowledgeBase
from hierarchy.sources import load_documents, split_front_matter
from tests.fakes import HashedBowEmbedder

NPM_UNINSTALL = """---
title: npm-uninstall
section: 1
description: Remove a package
---

### Synopsis

```bash
npm uninstall [<@scope>/]<pkg>...

aliases: unlink, remove, rm, r, un
```

### Description

This uninstalls a package, completely removing everything npm installed on its behalf.

### Examples

```bash
npm uninstall sax
```
"""

GUIDE = """Intro before any heading.

# Guide

Welcome.

## Install

### From source

Clone the repository and build it.

## Use

Run it.
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def only_doc(path: Path):
    (doc,) = load_documents(path)
    return doc


def fence(words: int, lang: str = "python") -> str:
    body = "\n".join(f"value_{i} = compute({i}) + offset" for i in range(words // 4))
    return f"```{lang}\n{body}\n```"


# ---------------------------------------------------------------- titles and front matter


def test_front_matter_title_names_the_document_and_the_front_matter_is_not_indexed(tmp_path):
    doc = only_doc(write(tmp_path, "npm-uninstall.md", NPM_UNINSTALL))
    assert doc.title == "npm-uninstall"
    assert not doc.text.startswith("---") and "description: Remove a package" not in doc.text
    chunks = chunk_document(doc)
    assert chunks and not any("section: 1" in c.text for c in chunks)


def test_the_first_level_one_heading_is_the_title_when_front_matter_has_none(tmp_path):
    doc = only_doc(write(tmp_path, "guide.md", "---\nname: guide\n---\n" + GUIDE))
    assert doc.title == "Guide"


def test_the_file_name_is_the_title_without_front_matter_title_or_top_heading(tmp_path):
    doc = only_doc(write(tmp_path, "release-notes.md", "## Fixed\n\nA crash on start.\n"))
    assert doc.title == "release-notes"
    assert [c.heading_path for c in chunk_document(doc)] == ["release-notes > Fixed"]


def test_front_matter_that_is_not_yaml_is_left_out_with_a_warning(tmp_path, caplog):
    text = "---\n{{ card_data }}\n---\n\n# Model Card\n\nSummary.\n"
    with caplog.at_level(logging.WARNING, logger="logicroute"):
        doc = only_doc(write(tmp_path, "card.md", text))
    assert doc.title == "Model Card" and "card_data" not in doc.text
    assert "front matter is not YAML" in caplog.text


def test_prose_between_two_rules_at_the_top_is_text_not_front_matter():
    text = "---\nJust a sentence between rules.\n---\n\nMore."
    assert split_front_matter(text) == ({}, text)


# ---------------------------------------------------------------- chunks along headings


def test_chunks_follow_headings_and_carry_their_heading_path(tmp_path):
    doc = only_doc(write(tmp_path, "npm-uninstall.md", NPM_UNINSTALL))
    chunks = chunk_document(doc)
    assert [c.heading_path for c in chunks] == [
        "npm-uninstall > Synopsis",
        "npm-uninstall > Description",
        "npm-uninstall > Examples",
    ]
    assert [c.text.splitlines()[0] for c in chunks] == ["### Synopsis", "### Description", "### Examples"]


def test_heading_paths_nest_and_a_title_heading_is_not_repeated(tmp_path):
    chunks = chunk_document(only_doc(write(tmp_path, "guide.md", GUIDE)))
    assert [c.heading_path for c in chunks] == [
        "Guide",
        "Guide",
        "Guide > Install > From source",
        "Guide > Use",
    ]
    assert chunks[0].text == "Intro before any heading."
    # "## Install" has nothing of its own: no chunk, but its child's path names it
    assert not any(c.text.startswith("## Install") for c in chunks)


def test_a_fenced_code_block_is_kept_whole_in_one_chunk(tmp_path):
    code = fence(150)
    text = "# Api\n\n" + " ".join(["word"] * 60) + "\n\n" + code + "\n\nAfter the code.\n"
    chunks = chunk_document(only_doc(write(tmp_path, "api.md", text)), chunk_words=100, overlap_words=10)
    holding = [c for c in chunks if "```python" in c.text]
    assert len(holding) == 1 and code in holding[0].text
    assert all(c.text.count("```") % 2 == 0 for c in chunks)


def test_a_code_block_in_a_list_item_is_kept_whole_too(tmp_path):
    code = "  ```sh\n" + "\n".join(f"  run step {i} now" for i in range(30)) + "\n  ```"
    items = "\n".join(f"- item {i} with a few more words" for i in range(20))
    text = f"# Steps\n\n{items}\n- and then:\n\n{code}\n"
    chunks = chunk_document(only_doc(write(tmp_path, "steps.md", text)), chunk_words=100, overlap_words=10)
    assert len(chunks) > 1  # the list is longer than a chunk, so it was cut between lines
    assert sum(code in c.text for c in chunks) == 1


def test_a_code_block_far_past_the_chunk_size_is_split_into_fenced_pieces(tmp_path):
    code = fence(600)
    chunks = chunk_document(only_doc(write(tmp_path, "big.md", "# Big\n\n" + code)), chunk_words=100, overlap_words=10)
    assert len(chunks) > 2
    for c in chunks:
        body = c.text.removeprefix("# Big\n\n")
        assert body.startswith("```python\n") and body.endswith("\n```")
    lines = [ln for c in chunks for ln in c.text.splitlines() if ln.startswith("value_")]
    assert lines == [ln for ln in code.splitlines() if ln.startswith("value_")]


def test_blocks_are_the_top_level_markdown_blocks_with_nothing_lost():
    text = "[ref]: https://example.org\n\nSee [the docs][ref].\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    blocks = markdown_blocks(text)
    assert [b.kind for b in blocks] == ["paragraph", "other"]
    assert "https://example.org" in blocks[0].text and "| 1 | 2 |" in blocks[1].text


# ---------------------------------------------------------------- plain text, storage


def test_plain_text_keeps_its_word_windows_and_chunk_ids(tmp_path):
    text = "# Not a section\n\n" + " ".join(f"Sentence number {i} is here." for i in range(80))
    doc = only_doc(write(tmp_path, "notes.txt", text))
    chunks = chunk_document(doc, chunk_words=100, overlap_words=20)
    assert [c.text for c in chunks] == split_text(doc.text, 100, 20)
    assert [c.id for c in chunks] == [chunk_id(doc.title, c.text) for c in chunks]
    assert {c.heading_path for c in chunks} == {""} and {c.source for c in chunks} == {str(tmp_path / "notes.txt")}


def test_chunks_without_the_new_fields_read_and_write_as_before():
    old_line = {"id": "abc", "doc_id": "d", "title": "T", "text": "x", "position": 0}
    chunk = Chunk.from_dict(old_line)
    assert (chunk.heading_path, chunk.source) == ("", "")
    assert chunk.to_dict() == old_line


def test_source_and_heading_path_survive_the_kb_and_come_back_with_search(tmp_path):
    docs_dir = tmp_path / "docs"
    docs_dir.mkdir()
    path = write(docs_dir, "npm-uninstall.md", NPM_UNINSTALL)
    kb = KnowledgeBase.create(tmp_path / "kb", HashedBowEmbedder())
    kb.add(load_documents(docs_dir), show_progress=False)
    (hit,) = KnowledgeBase.open(tmp_path / "kb", HashedBowEmbedder()).search("completely removing everything", k=1)
    assert (hit.source, hit.heading_path) == (str(path), "npm-uninstall > Description")


def test_a_moved_document_gets_its_new_source_without_being_embedded_again(tmp_path):
    embedder = HashedBowEmbedder()
    kb = KnowledgeBase.create(tmp_path / "kb", embedder)
    (tmp_path / "old").mkdir()
    write(tmp_path / "old", "guide.md", GUIDE)
    kb.add(load_documents(tmp_path / "old"), show_progress=False)
    embedded = len(embedder.encoded)
    (tmp_path / "old").rename(tmp_path / "new")  # the old file is gone: the new one is the same document
    report = kb.add(load_documents(tmp_path / "new"), show_progress=False)
    assert report["added_chunks"] == 0 and len(embedder.encoded) == embedded
    reopened = KnowledgeBase.open(tmp_path / "kb", HashedBowEmbedder())
    assert {c.source for c in reopened.chunks.values()} == {str(tmp_path / "new" / "guide.md")}


# ---------------------------------------------------------------- documentation nobody here wrote


def package_markdown(limit: int = 12) -> list[Path]:
    """Markdown files shipped inside installed packages, licences left out, small ones first."""
    site = Path(sysconfig.get_paths()["purelib"])
    found = [
        p
        for p in site.rglob("*.md")
        if "licen" not in p.name.lower() and "authors" not in p.name.lower() and 0 < p.stat().st_size < 300_000
    ]
    return sorted(found, key=lambda p: (p.stat().st_size, str(p)))[-limit:]


def top_level_fences(text: str) -> list[str]:
    from markdown_it import MarkdownIt

    return [t.content.strip() for t in MarkdownIt("commonmark").parse(text) if t.type == "fence" and t.level == 0]


def test_real_package_docs_get_titles_heading_paths_and_whole_code_blocks():
    files = package_markdown()
    if not files:
        pytest.skip("no Markdown documentation inside the installed packages")
    checked_fences = 0
    for path in files:
        docs = load_documents(path)
        if not docs:
            continue
        (doc,) = docs
        raw = path.read_text(encoding="utf-8", errors="replace")
        front, _ = split_front_matter(raw)
        blocks = markdown_blocks(doc.text)
        # the title comes from the front matter, else the first level-1 heading, else the file name
        level_one = [b.heading for b in blocks if b.kind == "heading" and b.level == 1]
        assert doc.title == (str(front.get("title") or "") or (level_one[0] if level_one else path.stem)), path
        if front:
            assert not doc.text.startswith("---") and doc.text in raw, path
        chunks = chunk_document(doc)
        assert chunks and all(c.heading_path.startswith(doc.title) for c in chunks), path
        if any(b.kind == "heading" and b.heading != doc.title for b in blocks):
            assert any(" > " in c.heading_path for c in chunks), path
        for code in top_level_fences(doc.text):
            if len(code.split()) <= 2 * 200 and code:
                assert any(code in c.text for c in chunks), (path, code[:60])
                checked_fences += 1
    assert checked_fences or not any("```" in p.read_text(errors="replace") for p in files)
