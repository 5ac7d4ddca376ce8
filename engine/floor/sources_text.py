"""An answer's sources as people read them: one line per passage, "[1] npm-uninstall.md > Examples"."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from engine.floor.base.types import HEADING_SEP, Answer, Source

UNNUMBERED = "[-]"  # a logic-route chunk the final prompt did not show (its sub-answers saw it)


def source_name(source: Source) -> str:
    """The file name of the source's path or URL, else its title, else its document id."""
    path = source.path.strip()
    if "://" in path:
        parts = urlsplit(path)
        name = parts.path.rstrip("/").rsplit("/", 1)[-1] or parts.netloc
    else:
        name = re.split(r"[\\/]", path.rstrip("/\\"))[-1]
    return name or source.title or source.doc_id


def format_source(source: Source) -> str:
    """The line "[n] name p. 14 > heading path": the page(s) of a PDF passage, the heading path
    without its first part when that is the title (the name already says which document), then
    the logic route's sub-question ids."""
    crumbs = [c for c in source.heading_path.split(HEADING_SEP) if c]
    if crumbs and crumbs[0] == source.title:
        crumbs = crumbs[1:]
    number = UNNUMBERED if source.n is None else f"[{source.n}]"
    name = source_name(source) + (f" {page_label(source.pages)}" if source.pages else "")
    line = " ".join([number, HEADING_SEP.join([name, *crumbs])])
    if source.used_by:
        line += f" (used by {', '.join(source.used_by)})"
    return line


def page_label(pages: str) -> str:
    """The pages of a source as people cite them: "p. 14", or "pp. 14-15" for a range."""
    return f"pp. {pages}" if "-" in pages else f"p. {pages}"


def format_sources(answer: Answer) -> list[str]:
    """One line per source of the answer, in its order (numbered ones as the prompt showed them)."""
    return [format_source(s) for s in answer.sources]
