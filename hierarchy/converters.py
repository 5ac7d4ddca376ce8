"""Documents that are not plain text: PDF, HTML, DOCX and PPTX, converted to the Markdown that
hierarchy.chunking cuts along its headings, so their chunks carry a heading path too.

The readers are small, well-kept libraries of the `docs` extra, each doing one format:
  PDF   pypdf: the text of each page, so a chunk knows its page(s); the outline (bookmarks)
        becomes the headings, placed where each title's line is found on its page
  HTML  BeautifulSoup + markdownify: headings, lists, tables and code blocks as Markdown;
        the main content only (no scripts, styles, navigation, footers or permalinks)
  DOCX  mammoth (Word's heading styles become <h1>..<h6>), then the HTML path
  PPTX  python-pptx: one section per slide ("Slide 3: Results"), its text, tables and notes
(markitdown does all four, but it loads an ONNX model for file-type sniffing, ~45 MB of wheels,
and reads a PDF as one text with no pages.)

Each converter reads the whole file, so none is called directly: hierarchy.conversion runs it
in a worker process, after the size checks of hierarchy.intake_limits and under a time and a
memory limit. A PDF's pages are marked in the Markdown by a comment line of their own
(PAGE_MARK), which the chunker reads into Chunk.pages and takes out of the text. A PDF that is
encrypted (and opens with no empty password) or has no text layer (a scan) gives no document:
one warning line each, and the run goes on. Without the extra, reading such a file raises
MissingExtraError, whose message is the command that installs it (hierarchy.conversion).
"""

from __future__ import annotations

import importlib.util
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from hierarchy.chunking import PAGE_MARK

DOCS_EXTRA = "pip install 'logicroute[docs]'"
KINDS = {".pdf": "pdf", ".html": "html", ".htm": "html", ".xhtml": "html", ".docx": "docx", ".pptx": "pptx"}
NEEDS = {  # the modules each kind imports
    "pdf": ("pypdf",),
    "html": ("bs4", "markdownify"),
    "docx": ("mammoth", "bs4", "markdownify"),
    "pptx": ("pptx",),
}
# HTML that holds no document text: code, styling, a site's navigation and footer, and the
# heading permalinks ("¶") and prev/next bars of the documentation generators (Sphinx, DocBook)
DROPPED_TAGS = ("script", "style", "noscript", "template", "nav", "svg", "iframe", "head", "footer", "form", "button")
DROPPED_ROLES = ("navigation", "search", "banner", "contentinfo")
DROPPED_CLASSES = ("headerlink", "sphinxsidebar", "related", "navheader", "navfooter", "footer", "prev-next-area")
# a PDF line that Markdown would read as structure (a heading, a code fence): escaped
_MARKDOWN_LEAD = re.compile(r"^(#{1,6}(?=\s|$)|```|~~~)")
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_RULE = re.compile(r"^\s*(=+|-+)\s*$")  # a setext underline would turn the line above into a heading
log = logging.getLogger("logicroute.sources")


@dataclass
class Converted:
    """A file as Markdown: its title ("" when the file names none) and its text; `pages`: the
    page count of a PDF, whose text holds PAGE_MARK lines (0 for other kinds)."""

    title: str
    text: str
    pages: int = 0
    link_share: float = 0.0  # of an HTML page's words, the share in links (hierarchy.site_pages)


def kind_of(path: Path) -> str | None:
    """pdf, html, docx or pptx for a file this module converts, else None."""
    return KINDS.get(path.suffix.lower())


def available(kind: str) -> bool:
    """Whether the libraries that read `kind` are installed."""
    return all(importlib.util.find_spec(m) is not None for m in NEEDS[kind])


class Unreadable(Exception):
    """A file the run skips, with the reason as its message."""


# ---------------------------------------------------------------- PDF


def pdf_to_markdown(path: Path) -> Converted:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError

    quiet = logging.getLogger("pypdf")
    if quiet.level == logging.NOTSET:  # it warns of each cross-reference it repairs in a PDF that reads fine
        quiet.setLevel(logging.ERROR)
    reader = PdfReader(path)
    if reader.is_encrypted:
        try:
            opened = reader.decrypt("")  # a PDF locked only against editing opens with the empty password
        except DependencyError as e:
            raise Unreadable(f"encrypted with a cipher this install cannot read ({e})") from None
        if not opened:
            raise Unreadable("encrypted: it needs a password (save an unlocked copy to index it)")
    headings = _outline_by_page(reader)
    pages = [[_pdf_line(line) for line in (page.extract_text() or "").splitlines()] for page in reader.pages]
    has_text = any(line.strip() for lines in pages for line in lines)
    running = _running_lines(pages)
    parts: list[str] = []
    for i, lines in enumerate(pages):
        lines = [line for j, line in enumerate(lines) if not _is_running(line, j, len(lines), running)]
        parts.append(PAGE_MARK.format(i + 1))
        parts.append("\n".join(_place_headings(lines, headings.get(i, []))))
    if not has_text:
        raise Unreadable("no text layer (a scanned PDF?): run OCR on it first, e.g. ocrmypdf, then index the copy")
    meta_title = (reader.metadata.title if reader.metadata else None) or ""
    return Converted(" ".join(str(meta_title).split()), "\n\n".join(parts), len(reader.pages))


def _outline_by_page(reader) -> dict[int, list[tuple[int, str]]]:
    """(level, title) of the outline entries, by the 0-based page each points at."""
    out: dict[int, list[tuple[int, str]]] = {}

    def walk(items, level: int) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item, level + 1)
                continue
            try:
                page = reader.get_destination_page_number(item)
            except Exception:  # an entry pointing nowhere (an external link, a broken reference)
                continue
            title = " ".join(str(getattr(item, "title", "") or "").split())
            if title and page is not None and page >= 0:
                out.setdefault(page, []).append((min(level, 6), title))

    try:
        walk(reader.outline, 1)
    except Exception:  # a damaged outline: the text is still worth indexing, without headings
        log.debug("outline unreadable", exc_info=True)
    return out


EDGE_LINES = 1  # the lines at a page's top and bottom where running headers and footers stand
_DIGITS = re.compile(r"\d+")


def _running_lines(pages: list[list[str]]) -> set[str]:
    """The running headers and footers of a PDF ("Chapter 4: Function reference 21"): lines at the
    top or bottom of many pages, the same but for their numbers. They would open many chunks
    with the same words and pull unrelated passages together."""
    from collections import Counter

    seen: Counter[str] = Counter()
    for lines in pages:
        edges = {_edge_key(line) for line in lines[:EDGE_LINES] + lines[-EDGE_LINES:] if line.strip()}
        seen.update(edges)
    floor = max(3, len(pages) // 10)  # a chapter of a few pages has its own running header
    return {key for key, n in seen.items() if n >= floor}


def _edge_key(line: str) -> str:
    return _DIGITS.sub("#", " ".join(line.lower().split()))


def _is_running(line: str, at: int, count: int, running: set[str]) -> bool:
    """A running line at an edge of a page that has more than its edges (a page of one or two
    lines, a slide say, keeps them: they may be all it says)."""
    edge = at < EDGE_LINES or at >= count - EDGE_LINES
    return count > 2 * EDGE_LINES and edge and bool(line.strip()) and _edge_key(line) in running


def _place_headings(lines: list[str], headings: list[tuple[int, str]]) -> list[str]:
    """The page's lines with its outline headings as Markdown headings: each where a line of
    the page reads as its title (that line becomes the heading), else at the top of the page."""
    out = list(lines)
    top: list[str] = []
    for level, title in headings:
        mark = "#" * level + " " + title
        key = _norm(title)
        at = next((i for i, line in enumerate(out) if _norm(line) == key), None)
        if at is None:
            top.append(mark)
        else:
            out[at : at + 1] = ["", mark, ""]
    return [*(f"{h}\n" for h in top), *out]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _pdf_line(line: str) -> str:
    """A line of PDF text that Markdown reads as text: no indented code block, no heading or
    fence from a stray '#' or '```', no rule that would make the line above a heading."""
    line = line.strip()
    if _RULE.match(line):
        return ""
    return "\\" + line if _MARKDOWN_LEAD.match(line) else line


# ---------------------------------------------------------------- HTML and DOCX


def html_to_markdown(html: str | bytes) -> Converted:
    """HTML as Markdown: the main content (role="main", else <main>, else the body); the title
    from <title>, else "" (the caller falls back to the first heading)."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "lxml" if importlib.util.find_spec("lxml") else "html.parser")
    title = " ".join(soup.title.get_text().split()) if soup.title else ""
    dropped = [*soup(DROPPED_TAGS), *soup(role=DROPPED_ROLES), *soup(class_=DROPPED_CLASSES)]
    for tag in dropped:
        tag.decompose()
    root = soup.find(role="main") or soup.find("main") or soup.body or soup
    words = len(root.get_text(" ").split())
    # links to other pages: a heading's own anchor (mdBook, Sphinx) or a jump within the page is none
    away = [a for a in root.find_all("a", href=True) if not a["href"].startswith("#")]
    in_links = sum(len(a.get_text(" ").split()) for a in away if not a.find_parent(_HEADINGS))
    converter = MarkdownConverter(
        heading_style="ATX",
        bullets="-",
        strip=["a", "img"],  # a link keeps its text, an image its nothing: URLs are noise to retrieval
        escape_asterisks=False,
        escape_underscores=False,
        escape_misc=False,
    )
    text = re.sub(r"\n{3,}", "\n\n", converter.convert_soup(root)).strip()
    return Converted(title, text, link_share=in_links / words if words else 0.0)


def _html_file(path: Path) -> Converted:
    return html_to_markdown(path.read_bytes())  # bytes: the parser reads the page's own charset


def _docx_file(path: Path) -> Converted:
    import mammoth

    with path.open("rb") as f:
        result = mammoth.convert_to_html(f)
    return html_to_markdown(result.value)


# ---------------------------------------------------------------- PPTX


def _pptx_file(path: Path) -> Converted:
    from pptx import Presentation

    deck = Presentation(str(path))
    parts: list[str] = []
    first_title = ""
    for n, slide in enumerate(deck.slides, 1):
        title_shape = slide.shapes.title
        title = " ".join(title_shape.text_frame.text.split()) if title_shape is not None else ""
        first_title = first_title or title
        parts.append(f"## Slide {n}" + (f": {title}" if title else ""))
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            parts += _shape_text(shape)
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame.text.strip() if slide.notes_slide.notes_text_frame else ""
            if notes:
                parts.append(f"Notes: {notes}")
    title = (deck.core_properties.title or "").strip() or first_title
    return Converted(title, "\n\n".join(parts))


def _shape_text(shape) -> list[str]:
    """A shape's text as Markdown blocks: paragraphs (indented ones as list items), a table."""
    if getattr(shape, "has_table", False) and shape.has_table:
        rows = [[" ".join(c.text.split()) for c in row.cells] for row in shape.table.rows]
        if not rows:
            return []
        lines = ["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * len(rows[0])]
        return ["\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows[1:]])]
    if getattr(shape, "shapes", None) is not None:  # a group: its members in order
        return [block for member in shape.shapes for block in _shape_text(member)]
    if not getattr(shape, "has_text_frame", False) or not shape.has_text_frame:
        return []
    lines = []
    for p in shape.text_frame.paragraphs:
        text = " ".join("".join(r.text for r in p.runs).split())
        if text:
            lines.append(("  " * (p.level - 1) + "- " if p.level else "") + text)
    return ["\n".join(lines)] if lines else []


CONVERTERS = {  # the converter of each kind, run by hierarchy.conversion under its limits
    "pdf": pdf_to_markdown,
    "html": _html_file,
    "docx": _docx_file,
    "pptx": _pptx_file,
}
