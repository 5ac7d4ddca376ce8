"""`logicroute index` over documentation sites as their generators ship them (a fake embedder
injected): each chapter is indexed once, the aggregate pages and copies are named in one line
each, --keep-aggregates indexes them, and `check` names the copies a KB holds."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from engine.face.cli import main
from hierarchy.kb import KnowledgeBase
from tests import doc_sites
from tests.fakes import HashedBowEmbedder

pytest.importorskip("bs4")
pytest.importorskip("markdownify")
CHAPTERS = ["harbour.html", "lighthouse.html", "orchard.html", "river.html"]


@pytest.fixture
def emb() -> HashedBowEmbedder:
    return HashedBowEmbedder(dim=128)


def run(emb, *args: str):
    return CliRunner().invoke(main, list(args), obj={"embedder": emb})


def index(emb, folder, kb, *more: str):
    return run(emb, "index", str(folder), "--kb", str(kb), "--summaries", "none", *more)


def test_an_mdbook_book_is_indexed_one_chapter_once_and_the_rest_named(tmp_path, emb):
    book = doc_sites.mdbook_site(tmp_path / "book")
    r = index(emb, book, tmp_path / "kb")
    assert r.exit_code == 0, r.output
    aggregates = "print.html (the whole book), toc.html (links)"
    assert f"skipped 2 aggregate pages (--keep-aggregates reads them): {aggregates}" in r.stderr
    assert "skipped 1 duplicate page (--keep-aggregates reads them): index.html (a copy of lighthouse.html)" in r.stderr
    assert sorted(KnowledgeBase.open(tmp_path / "kb", emb).doc_ids) == CHAPTERS
    check = run(emb, "check", "--kb", str(tmp_path / "kb"), "--json")
    assert check.exit_code == 0 and json.loads(check.stdout)["near_duplicates"] == []


def test_keep_aggregates_indexes_every_page_and_check_names_the_copies(tmp_path, emb):
    """index.html is lighthouse.html with a line of its own (a copy whose every chunk were the
    same would give the KB no chunk to store twice)."""
    book = doc_sites.mdbook_site(tmp_path / "book")
    (book / "index.html").write_text((book / "index.html").read_text().replace("</h1>", "</h1><p>Start here.</p>"))
    r = index(emb, book, tmp_path / "kb", "--keep-aggregates")
    assert r.exit_code == 0, r.output
    assert "aggregate page" not in r.stderr and "duplicate page" not in r.stderr
    assert sorted(KnowledgeBase.open(tmp_path / "kb", emb).doc_ids) == sorted(
        [*CHAPTERS, "index.html", "print.html", "toc.html"]
    )
    check = run(emb, "check", "--kb", str(tmp_path / "kb"))
    assert check.exit_code == 0, check.output
    assert "near-duplicate documents: 1 pair: index.html ~ lighthouse.html\n" in check.stdout
    assert "consistent" in check.stdout  # a copy is no damage
    as_json = json.loads(run(emb, "check", "--kb", str(tmp_path / "kb"), "--json").stdout)
    assert as_json["ok"] and as_json["near_duplicates"] == [["index.html", "lighthouse.html"]]


def test_the_setting_does_what_the_flag_does(tmp_path, emb):
    site = doc_sites.sphinx_site(tmp_path / "html")
    r = index(emb, site, tmp_path / "kb", "--set", "intake.keep_aggregates=true")
    assert r.exit_code == 0, r.output
    assert "_sources/river.rst.txt" in KnowledgeBase.open(tmp_path / "kb", emb).doc_ids
