"""A documentation page's HTML as Markdown, for the folder corpus of `logicroute bench scale`
(training.scale.corpus_fetch writes the pages of Debian's documentation packages this way, so the KB's
own reader, hierarchy.sources, reads them as it reads any folder of Markdown: cut along their
headings, code blocks whole).

Only the page's main content is kept: the first element with role="main" (Sphinx's themes),
<main> or Django's content column, else the whole page; scripts, styles, navigation, headers,
footers, forms, heading permalinks and prev/next links are left out. Headings become ATX
headings, <pre> a fenced code block, list items "- " lines, table cells " | "-joined lines,
inline <code> `code`; every other element that makes a block (<p>, <div>, <dd>...) is a
paragraph break, and text outside <pre> has its whitespace collapsed. Prose that would read as a
heading at a line's start ("# ", "===") is escaped. Standard library only.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

SKIP = frozenset({"script", "style", "nav", "header", "footer", "form", "noscript", "template", "button", "svg"})
# Permalinks and page navigation of the Sphinx themes, pydata's and DocBook's (PostgreSQL's manual).
SKIP_CLASSES = frozenset(
    {"headerlink", "sphinxsidebar", "related", "wy-breadcrumbs", "rst-footer-buttons", "footer", "prev-next-area"}
    | {"navheader", "navfooter"}
)
MAIN_IDS = frozenset({"yui-main"})  # the content column of Django's documentation theme
SKIP_ROLES = frozenset({"navigation", "search", "banner", "contentinfo"})
HEADINGS = {f"h{i}": i for i in range(1, 7)}
# Void elements never get an end tag: they open nothing on the stack.
VOID = frozenset({"br", "img", "hr", "meta", "link", "input", "col", "area", "base", "wbr", "source", "track", "embed"})
# Elements that break the text into blocks; any other element (<a>, <em>, <acronym>...) is inline.
BLOCKS = frozenset(
    {"p", "div", "section", "article", "aside", "blockquote", "dl", "dt", "dd", "ul", "ol", "table", "caption"}
    | {"thead", "tbody", "tfoot", "figure", "figcaption", "address", "details", "summary", "main", "center", "body"}
    | {"fieldset", "hgroup", "menu", "dir", "legend", "tr", "li", "pre", *HEADINGS}
)
CELLS = frozenset({"td", "th"})
_WS = re.compile(r"\s+")
_BLANKS = re.compile(r"\n{3,}")
_MARKUP = re.compile(r"#{1,6}(\s|$)|[=-]+\s*$")  # a heading, or a setext heading's underline


class _Converter(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.stack: list[tuple[str, bool, int]] = []  # (tag, opened a skipped region, len(out) at its start)
        self.title: list[str] = []
        self.main: tuple[int, int] | None = None  # out[start:end] of the main element, once seen
        self.main_depth = 0  # its depth on the stack while open (0: not open)
        self.skipping = 0
        self.pre = 0
        self.code = 0  # open <code> elements (nested ones write no backticks of their own)
        self.cell = 0  # open table cells: their blocks are spaces, so a row stays one line
        self.in_title = False
        self.redirect = False  # <meta http-equiv="refresh">: a page that only sends the reader elsewhere
        self.line_start = True  # nothing written on the current output line yet
        self.strip = True  # the next text's leading whitespace is dropped (after a break or a marker)
        self.after_marker = False  # a marker is the last thing written

    def _emit(self, text: str) -> None:
        if not self.skipping:
            self.out.append(text)

    def _block(self, sep: str = "\n\n") -> None:
        if self.after_marker:  # <li><p>: the paragraph goes on the marker's line
            return
        if self.cell and not self.pre:
            if self.out and not self.out[-1].endswith(" "):
                self._emit(" ")
            self.strip = True
            return
        self._emit(sep)
        self.line_start = self.strip = True

    def _marker(self, text: str) -> None:
        """A heading's or list item's marker: what follows it is not escaped."""
        self._emit(text)
        self.line_start, self.strip, self.after_marker = False, True, True

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "title":
            self.in_title = True
        if tag == "meta" and (a.get("http-equiv") or "").lower() == "refresh":
            self.redirect = True
        if tag in VOID:
            if tag in ("br", "hr"):
                self._block("\n" if tag == "br" else "\n\n")
            return
        skip = tag in SKIP or bool(set((a.get("class") or "").split()) & SKIP_CLASSES) or a.get("role") in SKIP_ROLES
        self.stack.append((tag, skip, len(self.out)))
        self.skipping += skip
        if (
            self.main is None
            and not self.main_depth
            and (a.get("role") == "main" or tag == "main" or a.get("id") in MAIN_IDS)
        ):
            self.main_depth, self.main = len(self.stack), (len(self.out), -1)
        if tag in HEADINGS:
            self._block()
            self._marker("#" * HEADINGS[tag] + " ")
        elif tag == "pre":
            self._block()
            self._emit("```\n")
            self.pre += 1
        elif tag in ("code", "tt") and not self.pre:
            self.code += 1
            if self.code == 1:
                self._emit("`")
                self.line_start = self.after_marker = False
        elif tag == "li":
            self._block("\n")
            self._marker("- ")
        elif tag in CELLS:
            self._emit("| " if self.line_start else " | ")
            self.line_start = self.after_marker = False
            self.strip = True
            self.cell += 1
        elif tag == "tr":
            self._block("\n")
        elif tag in BLOCKS:
            self._block()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        if tag in VOID or all(t != tag for t, _, _ in self.stack):
            return  # a stray end tag
        while self.stack:
            t, skip, start = self.stack.pop()
            self._close(t, start)
            self.skipping -= skip
            if self.main_depth and len(self.stack) < self.main_depth:
                self.main_depth, self.main = 0, (self.main[0], len(self.out))
            if t == tag:
                break

    def _close(self, tag: str, start: int) -> None:
        empty = all(not s.strip("`\n ") for s in self.out[start:])
        if tag == "pre":
            self.pre -= 1
            if empty:
                del self.out[start:]
            else:
                self._emit("\n```")
            self._block()
        elif tag in ("code", "tt") and not self.pre:
            self.code -= 1
            if self.code == 0 and empty:
                del self.out[start:]
            elif self.code == 0:
                self._emit("`")
        elif tag in CELLS:
            self.cell -= 1
        elif tag in BLOCKS and tag not in ("li", "tr"):
            self._block()

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
            return
        if self.pre:
            self._emit(data)
            return
        text = _WS.sub(" ", data)
        if self.strip:
            text = text.lstrip()
            if not text:
                return
            self.strip = False
        if self.line_start and _MARKUP.match(text):
            text = "\\" + text  # prose that would read as a heading
        self.line_start = self.after_marker = False
        self._emit(text)


def html_to_markdown(html: str) -> tuple[str, str]:
    """(the page's <title>, its main content as Markdown); the Markdown is "" when the page has
    no text or is a redirect (pandas' moved pages: "The page has been moved to this page")."""
    conv = _Converter()
    conv.feed(html)
    conv.close()
    if conv.redirect:
        return " ".join("".join(conv.title).split()), ""
    parts = conv.out
    if conv.main is not None:
        start, end = conv.main
        parts = parts[start : None if end < 0 else end]
    lines = [line.rstrip() for line in "".join(parts).split("\n")]
    md = _BLANKS.sub("\n\n", "\n".join(lines)).strip()
    return " ".join("".join(conv.title).split()), md
