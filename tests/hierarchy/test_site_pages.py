"""A documentation site as its generator ships it is read one page once: the generator's
aggregate and navigation pages and the copies of pages are skipped and named in one line each;
intake.keep_aggregates reads them all. The sites are written at test time (tests.doc_sites)."""

from __future__ import annotations

import logging

import pytest

from engine.floor.base.errors import ConfigError
from hierarchy import site_pages
from hierarchy.intake_limits import IntakeLimits
from hierarchy.sources import load_documents
from tests import doc_sites

pytest.importorskip("bs4")
pytest.importorskip("markdownify")
KEEP = IntakeLimits(keep_aggregates=True)


def read(folder, caplog, limits=None, level=logging.WARNING):
    with caplog.at_level(level, logger="logicroute"):
        docs = load_documents(folder, limits)
    return [d.id for d in docs]


def site_lines(caplog) -> list[str]:
    return [m for m in caplog.messages if " aggregate page" in m or " duplicate page" in m]


def test_an_mdbook_book_is_read_chapter_by_chapter_once(tmp_path, caplog):
    book = doc_sites.mdbook_site(tmp_path / "book")
    assert read(book, caplog) == ["harbour.html", "lighthouse.html", "orchard.html", "river.html"]
    assert site_lines(caplog) == [
        f"{book}: skipped 2 aggregate pages (--keep-aggregates reads them): "
        "print.html (the whole book), toc.html (links)",
        f"{book}: skipped 1 duplicate page (--keep-aggregates reads them): index.html (a copy of lighthouse.html)",
    ]


def test_verbose_lists_each_skipped_page_on_a_line_of_its_own(tmp_path, caplog):
    book = doc_sites.mdbook_site(tmp_path / "book")
    read(book, caplog, level=logging.DEBUG)
    assert f"{book}: skipped print.html (the whole book): aggregate page" in caplog.messages
    assert f"{book}: skipped toc.html (links): aggregate page" in caplog.messages
    assert f"{book}: skipped index.html (a copy of lighthouse.html): duplicate page" in caplog.messages


def test_a_sphinx_site_leaves_out_its_indexes_search_page_and_source_copies(tmp_path, caplog):
    site = doc_sites.sphinx_site(tmp_path / "html")
    assert read(site, caplog) == ["harbour.html", "river.html"]
    assert site_lines(caplog) == [
        f"{site}: skipped 5 aggregate pages (--keep-aggregates reads them): "
        "_sources/harbour.txt (a copy of a page's source), _sources/river.rst.txt (a copy of a page's source), "
        "_static/fonts/ReadMe.html (the theme's files), genindex.html (an index of terms), "
        "search.html (the search page)"
    ]


def test_pages_no_generator_marks_are_judged_by_their_text(tmp_path, caplog):
    """An all-in-one page holds three chapters; a menu is all links; orchard/index.html is
    orchard.html again: the page a user would cite is kept, the path without index."""
    site = doc_sites.unmarked_site(tmp_path / "site")
    assert read(site, caplog) == ["harbour.html", "lighthouse.html", "orchard.html", "river.html"]
    assert site_lines(caplog) == [
        f"{site}: skipped 2 aggregate pages (--keep-aggregates reads them): "
        "everything.html (the text of 3 other pages), menu.html (links)",
        f"{site}: skipped 1 duplicate page (--keep-aggregates reads them): orchard/index.html (a copy of orchard.html)",
    ]


def test_a_text_copy_of_a_page_gives_way_to_the_html_page_without_any_generator_marker(tmp_path, caplog):
    site = doc_sites.sphinx_site(tmp_path / "html")
    for name in ("searchindex.js", "genindex.html", "search.html", "_static/fonts/ReadMe.html"):
        (site / name).unlink()
    for page in ("river.html", "harbour.html"):  # no documentation_options script either
        (site / page).write_text((site / page).read_text().replace(doc_sites.SPHINX, ""))
    assert read(site, caplog) == ["harbour.html", "river.html"]
    assert site_lines(caplog) == [
        f"{site}: skipped 2 duplicate pages (--keep-aggregates reads them): "
        "_sources/harbour.txt (a copy of harbour.html), _sources/river.rst.txt (a copy of river.html)"
    ]


def test_a_page_named_print_html_on_a_site_no_generator_marks_is_a_chapter(tmp_path, caplog):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "print.html").write_text(doc_sites.page("Printing", doc_sites.chapter("observatory")))
    (tmp_path / "docs" / "toc.html").write_text(doc_sites.page("Table of tides", doc_sites.chapter("harbour")))
    assert read(tmp_path / "docs", caplog) == ["print.html", "toc.html"]
    assert site_lines(caplog) == []


def test_keep_aggregates_reads_every_page(tmp_path, caplog):
    book = doc_sites.mdbook_site(tmp_path / "book")
    got = read(book, caplog, KEEP)
    assert got == [
        "harbour.html", "index.html", "lighthouse.html", "orchard.html", "print.html", "river.html", "toc.html"
    ]  # fmt: skip
    assert site_lines(caplog) == []
    assert IntakeLimits.from_sets(["intake.keep_aggregates=true"]) == KEEP


def test_keep_aggregates_takes_true_or_false_only(tmp_path):
    with pytest.raises(ConfigError, match=r"^intake.keep_aggregates must be true or false, got 1$"):
        IntakeLimits.from_sets(["intake.keep_aggregates=1"])


def test_near_duplicates_pairs_copies_only_and_ignores_short_texts():
    river, harbour = doc_sites.prose("river"), doc_sites.prose("harbour")
    texts = [river, harbour, "Markup aside: " + river.replace(".", ""), "a few words", "a few words"]
    assert site_pages.near_duplicates(texts) == [(0, 2)]


def test_the_shingle_index_is_linear_in_the_pages_not_a_comparison_of_every_pair():
    """2,000 distinct pages: no pair, and each page's sharing counts only the pages that share."""
    texts = [doc_sites.prose(f"topic{i}", sentences=4) for i in range(2_000)]
    ov = site_pages.overlap(texts)
    assert site_pages.near_duplicates(texts) == []
    assert sum(len(s) for s in ov.shared) < len(texts)  # a stray common 8-gram at most, never n x n


def test_a_chapter_named_print_html_below_an_mdbook_books_root_is_read(tmp_path, caplog):
    """Rust by Example's hello/print.html is a chapter; the book's print.html sits beside book.js."""
    book = doc_sites.mdbook_site(tmp_path / "book")
    (book / "hello").mkdir()
    (book / "hello" / "print.html").write_text(
        doc_sites.page("Print", doc_sites.chapter("observatory"), doc_sites.MDBOOK)
    )
    assert "hello/print.html" in read(book, caplog)
    assert "print.html" not in read(book, caplog)


def test_a_short_page_of_headings_is_no_navigation_though_its_headings_are_anchors(tmp_path, caplog):
    """mdBook wraps every heading in a link to itself: a retired error code's page is a title
    and one heading, all anchor text, and still a page of its own."""
    (tmp_path / "docs").mkdir()
    body = '<h1><a class="header" href="#e0231">Error code E0231</a></h1><h4><a href="#note">Note: retired</a></h4>'
    (tmp_path / "docs" / "E0231.html").write_text(doc_sites.page("E0231", body))
    assert read(tmp_path / "docs", caplog) == ["E0231.html"]


def test_a_page_beside_its_partial_translations_is_no_aggregate(tmp_path, caplog):
    """A translated book keeps a page's code and its untranslated lines: the original holds
    most of each translation, but they are one text, not several pages gathered."""
    (tmp_path / "docs" / "es").mkdir(parents=True)
    (tmp_path / "docs" / "ja").mkdir()
    sentences = doc_sites.prose("orchard").split(". ")
    (tmp_path / "docs" / "orchard.html").write_text(doc_sites.page("Orchard", "<p>" + ". ".join(sentences) + "</p>"))
    for lang, kept in (("es", sentences[:-1]), ("ja", sentences[1:])):
        (tmp_path / "docs" / lang / "orchard.html").write_text(doc_sites.page("O", "<p>" + ". ".join(kept) + "</p>"))
    # nor copies: pages of other folders that share most of their text (translations, v1/ and v2/,
    # a policy and its revision) are all read; only one page written twice is left out
    assert read(tmp_path / "docs", caplog) == ["es/orchard.html", "ja/orchard.html", "orchard.html"]
    assert site_lines(caplog) == []


def test_a_revised_document_beside_its_first_version_is_read_too(tmp_path, caplog):
    """Two files that share most of their text but are not one page in two formats or layouts:
    skipping the newer one would answer from the old text."""
    sentences = doc_sites.prose("orchard").split(". ")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "policy_2023.html").write_text(doc_sites.page("Policy", "<p>" + ". ".join(sentences) + "</p>"))
    revised = [*sentences[:-1], "The orchard now opens at nine"]
    (tmp_path / "docs" / "policy_2024.html").write_text(doc_sites.page("Policy", "<p>" + ". ".join(revised) + "</p>"))
    assert read(tmp_path / "docs", caplog) == ["policy_2023.html", "policy_2024.html"] and site_lines(caplog) == []


def test_a_javadoc_site_leaves_out_each_packages_tree_and_uses_pages_below_its_root(tmp_path, caplog):
    site = doc_sites.javadoc_site(tmp_path / "api")
    assert read(site, caplog) == ["org/sea/Lighthouse.html", "org/sea/River.html"]
    assert site_lines(caplog) == [
        f"{site}: skipped 5 aggregate pages (--keep-aggregates reads them): "
        "help-doc.html (the generator's help on its pages), org/sea/class-use/Lighthouse.html (a list of uses), "
        "org/sea/class-use/River.html (a list of uses), org/sea/package-tree.html (a class tree), "
        "org/sea/package-use.html (a list of uses)"
    ]
