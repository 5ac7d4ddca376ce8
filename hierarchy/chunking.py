"""Passage-aware chunking by words, and structure-aware chunking of Markdown.

Plain text: a document of at most `chunk_words` words stays whole (QA passages are already good
units). Longer documents are cut at paragraph and sentence boundaries into windows of about
`chunk_words` words; consecutive windows share about `overlap_words` words of whole sentences
so a fact split across a boundary is still retrievable from one chunk.

Markdown (Document.meta["format"] == "markdown"): markdown-it-py parses the blocks, chunks follow
the headings (a chunk never spans two sections) and carry their heading path ("Title > Section >
Subsection"); a section's blocks are packed whole into chunks of about `chunk_words` words, so a
fenced code block, a list or a table is not cut, and only one block longer than a chunk is split.
A converted PDF's text marks where each page starts (PAGE_MARK): its chunks carry their pages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.floor.base.errors import LogicRouteError
from engine.floor.base.files import content_hash
from engine.floor.base.types import HEADING_SEP
from hierarchy.documents import Chunk, Document

DEFAULT_CHUNK_WORDS = 200
DEFAULT_OVERLAP_WORDS = 40
MARKDOWN = "markdown"  # Document.meta["format"] of a document chunked along its headings
# A code block up to this many chunks long stays whole: cutting code loses more than a long
# chunk costs. Past it, the block would crowd every other passage out of a prompt.
CODE_WHOLE_FACTOR = 2
# A page's start in a converted PDF's text (hierarchy.converters): a CommonMark HTML block of its
# own line, never inside a paragraph; paged_pieces reads it into Chunk.pages and drops it.
PAGE_MARK = "<!--page:{}-->"
PAGE_MARK_RE = re.compile(r"<!--page:(\d+)-->")

_PARA_RE = re.compile(r"\n\s*\n")
# End of sentence: . ! ? (optionally followed by closing quotes/brackets), then whitespace.
_SENT_RE = re.compile(r"(?<=[.!?])(?:[\"'\u201d\u2019)\]]*)\s+")


def chunk_id(title: str, text: str) -> str:
    """Stable content hash: same title + text -> same id (16 hex chars). The NUL separator
    (passage ids use \\x1f) makes a whole-passage chunk's id differ from its passage id; both
    are persisted, so neither may change."""
    return content_hash(f"{title}\x00{text}")[:16]


def chunk_embed_text(chunk: Chunk) -> str:
    """The text that is embedded for a chunk: the title carries the entity name that
    multi-hop questions mention, so it goes in front of the text (unless already there); a
    chunk cut along headings puts its heading path there instead, which starts with the title."""
    title = (chunk.heading_path or chunk.title).strip()
    if not title or chunk.text.lstrip().startswith(title):
        return chunk.text
    return f"{title}\n{chunk.text}"


def check_params(chunk_words: int, overlap_words: int) -> None:
    if int(chunk_words) < 1:
        raise LogicRouteError(f"chunk_words must be >= 1 (got {chunk_words})")
    if not 0 <= int(overlap_words) < int(chunk_words):
        raise LogicRouteError(
            f"overlap_words must be >= 0 and < chunk_words (got {overlap_words}, chunk_words={chunk_words})"
        )


def _sentences(text: str) -> list[str]:
    """Split one paragraph into sentences; the closing quote stays with its sentence."""
    out: list[str] = []
    pos = 0
    for m in _SENT_RE.finditer(text):
        # keep trailing quotes/brackets with the sentence, drop the whitespace
        end = m.start() + len(m.group(0).rstrip())
        s = text[pos:end].strip()
        if s:
            out.append(s)
        pos = m.end()
    tail = text[pos:].strip()
    if tail:
        out.append(tail)
    return out


def _units(text: str, max_words: int) -> list[tuple[int, list[str]]]:
    """(paragraph index, words) per sentence; sentences longer than max_words are cut."""
    units: list[tuple[int, list[str]]] = []
    for p, para in enumerate(_PARA_RE.split(text)):
        for sent in _sentences(para):
            words = sent.split()
            for i in range(0, len(words), max_words):
                units.append((p, words[i : i + max_words]))
    return units


def _join(units: list[tuple[int, list[str]]]) -> str:
    parts: list[str] = []
    prev_p = None
    for p, words in units:
        if prev_p is not None:
            parts.append("\n\n" if p != prev_p else " ")
        parts.append(" ".join(words))
        prev_p = p
    return "".join(parts)


def split_text(
    text: str, chunk_words: int = DEFAULT_CHUNK_WORDS, overlap_words: int = DEFAULT_OVERLAP_WORDS
) -> list[str]:
    """The chunk texts of one document text (empty list for blank text)."""
    check_params(chunk_words, overlap_words)
    text = text.strip()
    if not text:
        return []
    if len(text.split()) <= chunk_words:
        return [text]

    # Over-long sentences are cut to leave room for the overlap in front of each piece.
    units = _units(text, chunk_words - overlap_words)
    chunks: list[str] = []
    cur: list[tuple[int, list[str]]] = []
    cur_words = 0
    n_overlap = 0  # how many leading units of `cur` are overlap carried from the previous chunk

    for u in units:
        uw = len(u[1])
        if cur_words + uw > chunk_words and len(cur) > n_overlap:
            chunks.append(_join(cur))
            # Carry whole trailing sentences up to overlap_words; if even the last sentence is
            # longer, carry its last overlap_words words.
            carry: list[tuple[int, list[str]]] = []
            cw = 0
            for p, w in reversed(cur):
                if cw + len(w) > overlap_words:
                    break
                carry.insert(0, (p, w))
                cw += len(w)
            if not carry and overlap_words > 0:
                p, w = cur[-1]
                carry = [(p, w[-overlap_words:])]
                cw = len(carry[0][1])
            cur, cur_words, n_overlap = carry, cw, len(carry)
        if cur_words + uw > chunk_words and len(cur) == n_overlap:
            # Only overlap so far and the next sentence doesn't fit: trim the overlap's front.
            excess = cur_words + uw - chunk_words
            while excess > 0 and cur:
                p, w = cur[0]
                if len(w) <= excess:
                    cur.pop(0)
                    excess -= len(w)
                    cur_words -= len(w)
                else:
                    cur[0] = (p, w[excess:])
                    cur_words -= excess
                    excess = 0
            n_overlap = len(cur)
        cur.append(u)
        cur_words += uw
    if len(cur) > n_overlap:
        chunks.append(_join(cur))
    return chunks


def chunk_document(
    doc: Document, chunk_words: int = DEFAULT_CHUNK_WORDS, overlap_words: int = DEFAULT_OVERLAP_WORDS
) -> list[Chunk]:
    """Chunks of one document; a chunk repeated inside the document is kept once. Markdown
    documents are cut along their headings (markdown_pieces), others by split_text."""
    if doc.meta.get("format") == MARKDOWN:
        pieces = markdown_pieces(doc.text, doc.title, chunk_words, overlap_words)
    else:
        pieces = [("", text) for text in split_text(doc.text, chunk_words, overlap_words)]
    paged = paged_pieces(pieces) if doc.meta.get("pages") else [(h, t, "") for h, t in pieces]
    source = doc.meta.get("source") or doc.meta.get("url") or ""
    out: list[Chunk] = []
    seen: set[str] = set()
    for heading_path, text, pages in paged:
        cid = chunk_id(doc.title, text)
        if cid in seen:
            continue
        seen.add(cid)
        out.append(Chunk(cid, doc.id, doc.title, text, len(out), heading_path, str(source), pages))
    return out


def paged_pieces(pieces: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """(heading path, text, pages) of the pieces of a text with page marks (a PDF converted by
    hierarchy.converters): each piece's pages ("14", "14-15") and its text without the marks;
    a piece that held only marks is dropped. Pieces come in the text's order, so the page in
    force at a piece's start is the last mark read before it."""
    out: list[tuple[str, str, str]] = []
    page = 1
    for heading_path, text in pieces:
        first = last = None
        for i, part in enumerate(PAGE_MARK_RE.split(text)):
            if i % 2:  # the split keeps each mark's number at the odd places
                page = int(part)
            elif part.strip():
                first, last = first or page, page
        clean = re.sub(r"\n{3,}", "\n\n", PAGE_MARK_RE.sub("", text)).strip()
        if clean:
            out.append((heading_path, clean, str(first) if first == last else f"{first}-{last}"))
    return out


# ---------------------------------------------------------------- Markdown


@dataclass
class MarkdownBlock:
    """One top-level block of a Markdown text: its kind (heading, code, paragraph, other), the
    heading level (0 unless a heading), the heading's plain text, and its source lines."""

    kind: str
    level: int
    heading: str
    text: str


def markdown_blocks(text: str) -> list[MarkdownBlock]:
    """The top-level blocks in order. Each takes its source lines up to the next block, so lines
    that make no block of their own (link reference definitions) stay with the one before."""
    from markdown_it import MarkdownIt

    # markdown-it counts lines at \n only (str.splitlines also breaks at form feeds and more)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    lines = [line + "\n" for line in text.split("\n")]
    starts: list[tuple[int, int]] = []  # (token index, first line)
    for i, t in enumerate(tokens):
        if t.level == 0 and t.nesting >= 0 and t.map is not None:
            starts.append((i, t.map[0]))
    blocks: list[MarkdownBlock] = []
    for j, (i, first) in enumerate(starts):
        end = starts[j + 1][1] if j + 1 < len(starts) else len(lines)
        raw = "".join(lines[0 if j == 0 else first : end]).strip("\n").rstrip()
        t = tokens[i]
        if t.type == "heading_open":
            blocks.append(MarkdownBlock("heading", int(t.tag[1:]), _plain(tokens[i + 1]), raw))
        elif t.type in ("fence", "code_block"):
            blocks.append(MarkdownBlock("code", 0, "", raw))
        else:
            blocks.append(MarkdownBlock("paragraph" if t.type == "paragraph_open" else "other", 0, "", raw))
    return blocks


def _plain(inline) -> str:
    """A heading's text without its markup (`code` and *emphasis* marks, inline HTML)."""
    parts = [
        " " if c.type in ("softbreak", "hardbreak") else c.content
        for c in inline.children or ()
        if c.type in ("text", "code_inline", "softbreak", "hardbreak")
    ]
    return " ".join("".join(parts).split()) or " ".join(inline.content.split())


def markdown_title(text: str) -> str:
    """The text of the first level-1 heading, or "" when there is none."""
    return next((b.heading for b in markdown_blocks(text) if b.kind == "heading" and b.level == 1), "")


def markdown_pieces(text: str, title: str, chunk_words: int, overlap_words: int) -> list[tuple[str, str]]:
    """(heading path, chunk text) of a Markdown text, section by section. The path starts with
    the title; a first heading that is the title is not repeated."""
    check_params(chunk_words, overlap_words)
    out: list[tuple[str, str]] = []
    for path, blocks in _sections(markdown_blocks(text)):
        crumbs = [h for h in (title, *path) if h]
        if len(crumbs) > 1 and crumbs[0] == crumbs[1]:
            crumbs.pop(1)
        heading_path = HEADING_SEP.join(crumbs)
        out += [(heading_path, t) for t in _pack(blocks, chunk_words, overlap_words)]
    if not out:  # headings and nothing else: still a document to find
        out = [(title, t) for t in split_text(text, chunk_words, overlap_words)]
    return out


def _sections(blocks: list[MarkdownBlock]) -> list[tuple[tuple[str, ...], list[MarkdownBlock]]]:
    """(headings above, blocks) per section; a heading with nothing under it before the next
    heading makes no chunk of its own (the next section's path names it)."""
    out: list[tuple[tuple[str, ...], list[MarkdownBlock]]] = []
    stack: list[tuple[int, str]] = []
    current: list[MarkdownBlock] = []
    for b in blocks:
        if b.kind == "heading":
            if any(x.kind != "heading" for x in current):
                out.append((tuple(h for _, h in stack), current))
            current = []
            while stack and stack[-1][0] >= b.level:
                stack.pop()
            stack.append((b.level, b.heading))
        current.append(b)
    if any(x.kind != "heading" for x in current):
        out.append((tuple(h for _, h in stack), current))
    return out


def _pack(blocks: list[MarkdownBlock], chunk_words: int, overlap_words: int) -> list[str]:
    """Chunk texts of one section: whole blocks while they fit in `chunk_words`."""
    units: list[str] = []
    for b in blocks:
        n = len(b.text.split())
        if n <= chunk_words or (b.kind == "code" and n <= CODE_WHOLE_FACTOR * chunk_words):
            units.append(b.text)
        elif b.kind == "paragraph":
            units += split_text(b.text, chunk_words, overlap_words)
        else:  # a long list, table, quote or code block: cut between lines, code fences whole
            units += _split_lines(b.text.splitlines(), chunk_words)
    if blocks[0].kind == "heading" and len(units) > 1:  # a heading line never makes a chunk alone
        units[:2] = [units[0] + "\n\n" + units[1]]
    return _greedy(units, chunk_words, "\n\n")


def _greedy(units: list[str], max_words: int, sep: str) -> list[str]:
    """Consecutive units joined with `sep` while they fit in `max_words` (a longer unit alone)."""
    out: list[str] = []
    cur: list[str] = []
    cur_words = 0
    for u in units:
        n = len(u.split())
        if cur and cur_words + n > max_words:
            out.append(sep.join(cur))
            cur, cur_words = [], 0
        cur.append(u)
        cur_words += n
    if cur:
        out.append(sep.join(cur))
    return [t for t in out if t.strip()]


def _is_fence(line: str) -> bool:
    return line.lstrip()[:3] in ("```", "~~~")


def _split_lines(lines: list[str], max_words: int) -> list[str]:
    """Lines joined while they fit in `max_words`. A fenced code region (say, inside a list
    item) is one unit, kept whole up to CODE_WHOLE_FACTOR chunks and past that cut by
    _split_code; any other line longer than `max_words` is cut by words."""
    units: list[str] = []
    i = 0
    while i < len(lines):
        j = i + 1
        if _is_fence(lines[i]):
            fence = lines[i].lstrip()[:3]
            while j < len(lines) and not lines[j].lstrip().startswith(fence):
                j += 1
            j = min(j + 1, len(lines))
        unit = "\n".join(lines[i:j])
        words = unit.split()
        if len(words) <= max_words or (j - i > 1 and len(words) <= CODE_WHOLE_FACTOR * max_words):
            units.append(unit)
        elif j - i > 1:
            units += _split_code(lines[i:j], max_words)
        else:
            units += [" ".join(words[k : k + max_words]) for k in range(0, len(words), max_words)]
        i = j
    return _greedy(units, max_words, "\n")


def _split_code(lines: list[str], max_words: int) -> list[str]:
    """A fenced code region too long to keep whole, cut at line boundaries; each piece is
    fenced again (same opening line, so the language stays), so every piece still reads as code."""
    opening = lines[0]
    fence = opening.lstrip()[:3]
    closing = lines[-1] if len(lines) > 1 and lines[-1].lstrip().startswith(fence) else ""
    indent = opening[: len(opening) - len(opening.lstrip())]
    body = lines[1 : len(lines) - 1 if closing else len(lines)]
    room = max(1, max_words - len(opening.split()) - 1)
    return [f"{opening}\n{piece}\n{closing or indent + fence}" for piece in _greedy(body, room, "\n")]
