"""Tiny documentation sites as their generators ship them, written at test time: an mdBook book
(chapters, index.html a copy of the first, print.html the whole book, toc.html its links), a
Sphinx site (pages, genindex.html, search.html, `_sources/` text copies, searchindex.js), and a
site no generator marks (an all-in-one page, a page of links, page.html and page/index.html)."""

from __future__ import annotations

import random
from pathlib import Path

TOPICS = ("lighthouse", "river", "harbour", "orchard", "observatory")
_WORDS = str.split(
    "the keeper logged each ship that passed the rocks and every storm that broke over the bay while "
    "the lamp burned oil through long winter nights and the tower stood against wind salt and tide "
    "engineers measured the current near the weir and farmers planted pears beside the old wall "
    "astronomers charted comets above the ridge clerks filed reports on tonnage fees and repairs"
)


def prose(topic: str, sentences: int = 12) -> str:
    """Sentences of their own for each topic: no 8 words in a row shared with another topic."""
    rng = random.Random(topic)
    return " ".join(
        f"The {topic} {' '.join(rng.choice(_WORDS) for _ in range(rng.randint(9, 14)))}." for _ in range(sentences)
    )


def page(title: str, body: str, head: str = "") -> str:
    return (
        f"<!DOCTYPE html>\n<html><head>{head}<title>{title}</title></head><body>"
        f'<nav><a href="index.html">Home</a></nav><div role="main">{body}</div></body></html>'
    )


def chapter(topic: str) -> str:
    return f"<h1>The {topic}</h1><p>{prose(topic)}</p>"


def links(topics) -> str:
    return "<ul>" + "".join(f'<li><a href="{t}.html">The {t} chapter</a></li>' for t in topics) + "</ul>"


MDBOOK = "<!-- Book generated using mdBook -->"


def mdbook_site(root: Path) -> Path:
    """Chapters TOPICS[:4]; index.html is the first chapter again, as mdBook writes it."""
    root.mkdir(parents=True)
    topics = TOPICS[:4]
    for t in topics:
        (root / f"{t}.html").write_text(page(t, chapter(t), MDBOOK))
    (root / "index.html").write_text(page(topics[0], chapter(topics[0]), MDBOOK))
    (root / "print.html").write_text(page("Book", "".join(chapter(t) for t in topics), MDBOOK))
    (root / "toc.html").write_text(page("Contents", links(topics), MDBOOK))
    (root / "searchindex.json").write_text("{}")
    return root


SPHINX = '<script id="documentation_options" src="_static/documentation_options.js"></script>'


def sphinx_site(root: Path) -> Path:
    """Pages river.html and harbour.html, with the indexes and text copies Sphinx ships."""
    (root / "_sources").mkdir(parents=True)
    for t, source in (("river", "river.rst.txt"), ("harbour", "harbour.txt")):
        (root / f"{t}.html").write_text(page(t, chapter(t), SPHINX))
        (root / "_sources" / source).write_text(f"The {t}\n{'=' * (len(t) + 4)}\n\n{prose(t)}\n")
    (root / "genindex.html").write_text(page("Index", "<h1>Index</h1>" + links(["river", "harbour"]), SPHINX))
    (root / "search.html").write_text(page("Search", "<h1>Search</h1><p>Please activate JavaScript.</p>", SPHINX))
    (root / "searchindex.js").write_text("Search.setIndex({})")
    return root


def unmarked_site(root: Path) -> Path:
    """No generator's marker: everything.html holds three chapters, menu.html is links, and
    orchard.html has a copy at orchard/index.html."""
    (root / "orchard").mkdir(parents=True)
    topics = TOPICS[:3]
    for t in (*topics, "orchard"):
        (root / f"{t}.html").write_text(page(t, chapter(t)))
    (root / "orchard" / "index.html").write_text(page("orchard", chapter("orchard")))
    (root / "everything.html").write_text(page("All", "".join(chapter(t) for t in topics)))
    (root / "menu.html").write_text(page("Menu", "<h1>Menu</h1>" + links(TOPICS)))
    return root
