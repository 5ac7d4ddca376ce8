"""Passage-aware chunking by words.

A document of at most `chunk_words` words stays whole (QA passages are already good units).
Longer documents are cut at paragraph and sentence boundaries into windows of about
`chunk_words` words; consecutive windows share about `overlap_words` words of whole sentences
so a fact split across a boundary is still retrievable from one chunk.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from engine.base.errors import LogicRouteError
from engine.base.files import content_hash
from hierarchy.documents import Chunk, Document

DEFAULT_CHUNK_WORDS = 200
DEFAULT_OVERLAP_WORDS = 40

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
    multi-hop questions mention, so it goes in front of the text (unless already there)."""
    title = chunk.title.strip()
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
    """Chunks of one document; a chunk repeated inside the document is kept once."""
    out: list[Chunk] = []
    seen: set[str] = set()
    for text in split_text(doc.text, chunk_words, overlap_words):
        cid = chunk_id(doc.title, text)
        if cid in seen:
            continue
        seen.add(cid)
        out.append(Chunk(id=cid, doc_id=doc.id, title=doc.title, text=text, position=len(out)))
    return out


def chunk_documents(
    docs: Iterable[Document], chunk_words: int = DEFAULT_CHUNK_WORDS, overlap_words: int = DEFAULT_OVERLAP_WORDS
) -> list[Chunk]:
    """Chunks of many documents; identical chunks (same title + text) are kept once, first wins."""
    out: list[Chunk] = []
    seen: set[str] = set()
    for doc in docs:
        for c in chunk_document(doc, chunk_words, overlap_words):
            if c.id not in seen:
                seen.add(c.id)
                out.append(c)
    return out
