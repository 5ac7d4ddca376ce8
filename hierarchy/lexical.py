"""Lexical (BM25) retrieval over a knowledge base's chunks, kept in the KB's segments.

Why not a library's index: bm25s precomputes every (chunk, term) score with the corpus' idf and
average length baked in, so an add or a delete re-scores the whole corpus, and its index is one
file set no segment can own; tantivy keeps its own segment files and commit point beside the
KB's (a second commit protocol, as Milvus needs a journal). Lucene's layout fits the KB instead:
each segment holds the postings of the chunks it added (term -> rows, term counts, chunk
lengths), written once with the segment; the collection statistics BM25 needs are taken over the
live rows (chunks and mean length when the first search of a committed state builds the index,
document frequencies when a query is scored), so an add tokenizes only its chunks and a delete
writes only its ids (hierarchy.kb_segments).

Text indexed: a chunk's heading path (or its document title), weighted, and its text, so a
question naming a document's title or a section's heading finds its chunks. Tokens: lowercased
runs of letters and digits, a short English stop list (Lucene's, plus question words) left out,
plurals made singular (an S-stemmer); each term is kept as its crc32 (no vocabulary to merge
across segments; collisions at ~1e5 distinct terms touch a handful of rare terms). Scoring:
Lucene's BM25 (k1 1.2, b 0.4).
"""

from __future__ import annotations

import io
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from engine.floor.base.errors import KBCorruptError

if TYPE_CHECKING:  # pragma: no cover
    from hierarchy.documents import Chunk

# Fitted with the fusion (docs/results/retrieval/retrieval_hybrid.md): a chunk's heading path (or
# title) is indexed TITLE_WEIGHT times before its text (BM25F's field weight folded into the counts).
K1 = 1.2
B = 0.4
TITLE_WEIGHT = 3
# What the postings of a segment were made with (tokens, title weight): a segment of another
# version is not read, and the KB is indexed again on its next write (hierarchy.kb_segments).
ANALYSIS = 2
_TOKEN = re.compile(r"[^\W_]+")
# Lucene's English stop set, with the question words and auxiliaries every question carries: a
# question's "what" or "does" matched on them would only add noise to the ranking.
_LUCENE_STOP = "a an and are as at be but by for if in into is it no not of on or such that the their then there these"
_QUESTION = "they this to was will with what which who whom whose when where why how do does did can could would should"
STOPWORDS = frozenset(f"{_LUCENE_STOP} {_QUESTION} i".split())
_TF_MAX = np.iinfo(np.uint16).max


def _stem(w: str) -> str:
    """Plural forms to their singular (queries -> query, classes -> class, files -> file): Harman's
    S-stemmer, with -es dropped whole after s, x, z, ch and sh as English forms those plurals."""
    if len(w) <= 3 or not w.endswith("s") or w.endswith(("us", "ss", "is")):
        return w
    if w.endswith("ies") and not w.endswith(("eies", "aies")):
        return w[:-3] + "y"
    if w.endswith(("sses", "xes", "zes", "ches", "shes")):
        return w[:-2]
    if w.endswith(("aes", "ees", "oes")):
        return w
    return w[:-1]


def tokens(text: str) -> list[str]:
    """The terms BM25 sees in a text, in order."""
    return [_stem(w) for w in _TOKEN.findall(text.lower()) if w not in STOPWORDS]


def lexical_text(chunk: "Chunk") -> str:
    """What the lexical index reads of a chunk: its heading path (or document title), TITLE_WEIGHT
    times, then its text."""
    title = (chunk.heading_path or chunk.title).strip()
    return "\n".join([title] * TITLE_WEIGHT + [chunk.text]) if title else chunk.text


def term_ids(text: str) -> list[int]:
    return [zlib.crc32(t.encode("utf-8")) for t in tokens(text)]


@dataclass(frozen=True)
class Postings:
    """The lexical index of one segment's rows: for each term (`vocab`, sorted crc32 ids) the rows
    holding it (`rows[start[t]:start[t+1]]`, ascending) and how often (`tfs`); `lengths[r]` is row
    r's number of terms; `ids[r]` its chunk id (so the rows a later segment replaced are known)."""

    ids: np.ndarray  # str, one per row
    vocab: np.ndarray  # uint32, sorted
    start: np.ndarray  # int64, len(vocab) + 1
    rows: np.ndarray  # uint32
    tfs: np.ndarray  # uint16
    lengths: np.ndarray  # uint32, one per row

    @classmethod
    def of_texts(cls, ids: Sequence[str], texts: Sequence[str]) -> Postings:
        flat: list[int] = []
        lengths = np.zeros(len(texts), np.uint32)
        for r, text in enumerate(texts):
            t = term_ids(text)
            flat += t
            lengths[r] = len(t)
        rows = np.repeat(np.arange(len(texts), dtype=np.uint64), lengths.astype(np.int64))
        return cls._of_pairs(ids, np.array(flat, np.uint64), rows, None, lengths)

    @classmethod
    def _of_pairs(
        cls, ids: Sequence[str], terms: np.ndarray, rows: np.ndarray, tfs: np.ndarray | None, lengths: np.ndarray
    ) -> Postings:
        """Postings of (term, row[, count]) pairs in any order; pairs repeated are counted."""
        key = (terms.astype(np.uint64) << np.uint64(32)) | rows.astype(np.uint64)
        if tfs is None:
            key, counts = np.unique(key, return_counts=True)
        else:
            order = np.argsort(key, kind="stable")
            key, counts = key[order], tfs[order]
        term = (key >> np.uint64(32)).astype(np.uint32)
        vocab, first = np.unique(term, return_index=True)
        return cls(
            ids=np.array(list(ids), dtype=str),
            vocab=vocab,
            start=np.append(first, len(term)).astype(np.int64),
            rows=(key & np.uint64(0xFFFFFFFF)).astype(np.uint32),
            tfs=np.minimum(counts, _TF_MAX).astype(np.uint16),
            lengths=np.asarray(lengths, np.uint32),
        )

    @classmethod
    def merged(cls, parts: Sequence[Postings], live: Sequence[np.ndarray], ids: Sequence[str]) -> Postings:
        """One segment's postings of the chunks `ids`, taken from `parts`: live[p][r] is the row
        that part p's row r gets (-1: not kept). What compaction writes, without tokenizing again."""
        terms, rows, tfs = [], [], []
        lengths = np.zeros(len(ids), np.uint32)
        for part, to in zip(parts, live):
            new = to[part.rows]
            keep = new >= 0
            terms.append(np.repeat(part.vocab, np.diff(part.start))[keep])
            rows.append(new[keep])
            tfs.append(part.tfs[keep])
            kept = to >= 0
            lengths[to[kept]] = part.lengths[kept]
        terms.append(np.zeros(0, np.uint32))  # so that no part at all concatenates too
        rows.append(np.zeros(0, np.int64))
        tfs.append(np.zeros(0, np.uint16))
        return cls._of_pairs(ids, np.concatenate(terms), np.concatenate(rows), np.concatenate(tfs), lengths)

    # -- the segment file -------------------------------------------------------------------
    def encode(self) -> bytes:
        buf = io.BytesIO()
        np.savez(buf, **{f: getattr(self, f) for f in _FIELDS})
        return buf.getvalue()

    @classmethod
    def decode(cls, data: bytes, rows: int) -> Postings:
        """KBCorruptError "is unreadable (...)" when the file does not read or does not hold
        `rows` rows (the caller names the file and the repair)."""
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                p = cls(**{f: z[f] for f in _FIELDS})
        except (ValueError, OSError, EOFError, KeyError, TypeError) as e:
            raise KBCorruptError(f"is unreadable ({e})") from e
        n = len(p.rows)
        ok = (
            len(p.ids) == len(p.lengths) == rows
            and len(p.start) == len(p.vocab) + 1
            and len(p.tfs) == n
            and (not len(p.start) or (p.start[0] == 0 and p.start[-1] == n))
            and (not n or int(p.rows.max()) < rows)
        )
        if not ok:
            raise KBCorruptError(f"is unreadable (its arrays do not describe {rows} rows)")
        return p


_FIELDS = ("ids", "vocab", "start", "rows", "tfs", "lengths")


class LexicalIndex:
    """BM25 over the live rows of a KB's segments' postings. `chunk_ids`: the KB's chunks in
    order; a query's hits are rows of that order. Each chunk's postings are its latest copy (a
    chunk id seen in a later segment replaced the earlier one). Built once per committed state
    (~0.1 s a 10^6 postings): every posting is mapped to its KB row and weighted by the length
    part of BM25 here, so a query only sums the weights of its terms' postings."""

    def __init__(self, parts: Sequence[Postings], chunk_ids: Sequence[str]):
        self.n = len(chunk_ids)
        latest: dict[str, tuple[int, int]] = {}
        for p, part in enumerate(parts):
            latest.update((cid, (p, r)) for r, cid in enumerate(part.ids.tolist()))
        live = [np.full(len(part.ids), -1, np.int64) for part in parts]  # part row -> KB row; -1: gone
        lengths = np.zeros(self.n, np.float64)
        for row, cid in enumerate(chunk_ids):
            where = latest.get(cid)
            if where is None:
                raise KBCorruptError(f"is unreadable (no postings for chunk {cid})")
            live[where[0]][where[1]] = row
            lengths[row] = parts[where[0]].lengths[where[1]]
        self.live = live  # what compaction merges by (Postings.merged)
        self.parts = list(parts)
        norm = K1 * (1 - B + B * lengths / max(float(lengths.mean()) if self.n else 0.0, 1e-9))
        # per part: its vocabulary, the live postings' KB rows and BM25 weights without idf, by term
        self._terms: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        for part, to in zip(parts, live):
            rows = to[part.rows]
            keep = rows >= 0
            tfs = part.tfs[keep].astype(np.float64)
            kept = np.concatenate([[0], np.cumsum(keep)])[part.start]
            weights = (tfs * (K1 + 1) / (tfs + norm[rows[keep]])).astype(np.float32)
            self._terms.append((part.vocab, kept, rows[keep].astype(np.int32), weights))

    def scores(self, text: str) -> np.ndarray:
        """BM25 score of every row (0 where no query term occurs)."""
        rows, weights = [], []
        for term in np.unique(np.array(term_ids(text), np.uint32)):
            found = [(r, w) for r, w in self._postings(term)]
            df = sum(len(r) for r, _ in found)
            if not df:
                continue
            idf = np.float32(np.log(1 + (self.n - df + 0.5) / (df + 0.5)))
            rows += [r for r, _ in found]
            weights += [w * idf for _, w in found]
        if not rows:
            return np.zeros(self.n)
        return np.bincount(np.concatenate(rows), weights=np.concatenate(weights), minlength=self.n)

    def document_frequency(self, term: str) -> int:
        """How many live rows hold `term`, a token as `tokens` returns it (0: no chunk has it)."""
        tid = np.uint32(zlib.crc32(term.encode("utf-8")))
        return sum(len(rows) for rows, _ in self._postings(tid))

    def _postings(self, term: np.uint32):
        """(KB rows, weights) of the live postings of `term`, part by part."""
        for vocab, start, rows, weights in self._terms:
            i = int(np.searchsorted(vocab, term))
            if i < len(vocab) and vocab[i] == term and start[i + 1] > start[i]:
                yield rows[start[i] : start[i + 1]], weights[start[i] : start[i + 1]]


def top(scores: np.ndarray, n: int, exclude: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(rows, scores) of the n best positive scores, best first (ties: the earlier row); rows in
    `exclude` never (`scores` is changed there)."""
    if exclude is not None and len(exclude):
        scores[exclude] = 0.0
    hit = np.flatnonzero(scores > 0)
    if len(hit) > n:
        hit = hit[np.argpartition(-scores[hit], n - 1)[:n]]
    order = np.lexsort((hit, -scores[hit]))
    return hit[order], scores[hit[order]]
