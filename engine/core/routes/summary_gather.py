"""The summary route's global mode, its breadth step (no LLM call): many short passages from many
documents, for a question whose answer is a set spread over the corpus ("Which commands take
`--otp`?").

Top-k retrieval sees 3 passages; a list answer needs dozens. Three rankings are fused
(reciprocal rank, as the KB's hybrid search fuses two):
- lexical: BM25 on the question's words, which finds every page naming a rare term (`otp`);
- dense: the chunks nearest the question;
- clusters: the level-1 summary nodes nearest the question, and the best chunks under each, taken
  in turn, so that several topics of the corpus are represented (the summary layer used for
  breadth, GraphRAG's communities in spirit, not for an overview text).

Each chunk is then cut to its lines that carry the question's rare words, plus its structure
lines (headings, list items, definition terms: where documentation names its items), so ~10x more
passages fit the prompt than whole chunks would.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from engine.floor.base.types import RetrievedChunk

if TYPE_CHECKING:  # pragma: no cover
    from hierarchy.kb import KnowledgeBase
    from hierarchy.layers.tree import Layers

RRF_K = 60  # the usual reciprocal-rank constant: a rank's weight halves by rank ~60
LEXICAL_HITS = 40
DENSE_HITS = 20
CLUSTERS = 6
PER_CLUSTER = 4
# A rare word of the question is what finds a list's pages; dense and cluster rankings add the
# pages that say it in other words, at half the weight.
WEIGHTS = {"lexical": 1.0, "dense": 0.5, "clusters": 0.5, "pages": 1.0, "anchors": 1.5}
# What a question quotes (`--before`, 'close', "See Also") is what it is about: searched on its
# own, since the question's frame words ("listed in the section of their docs page") are rarer
# in a manual than a common word such as "before" and would rank the frame, not the thing.
_QUOTED = re.compile(r"`([^`]+)`|'([^']{2,})'|\"([^\"]{2,})\"")
PAGE_DOCS = 2  # a rare word in more page titles than this is a topic, not a page's name
PAGE_CHUNKS = 16
PAGE_MIN_IDF = 1.0
EXPAND_FROM = 4  # the best candidates whose section is spelled out
SIBLINGS = 16  # at most this many chunks of one section
RARE_SHARE = 0.5  # a question word is rare when its idf is at least this share of the rarest's
STRUCTURE_BONUS = 1.5  # a heading or term line is kept before a prose line with one rare word
MAX_LINE_WORDS = 30  # a longer line is cut: a paragraph is evidence, not an item's name

# Lines where documentation names its items: headings, list items, definition terms (a line that
# opens with inline code), table rows.
_STRUCTURE = re.compile(r"^\s*(#{1,6}\s|[*+-]\s|\d+[.)]\s|`|\|)")


@dataclass(frozen=True)
class Gathered:
    """The candidates in fused order (whole chunks) and where each ranking found them."""

    chunks: list[RetrievedChunk]
    found_by: dict[str, int]  # ranking name -> candidates it contributed
    flags: list[str]


def anchors(question: str) -> list[str]:
    """The spans the question quotes (backticks, single or double quotes)."""
    return [next(g for g in m.groups() if g) for m in _QUOTED.finditer(question)]


def key_terms(question: str, kb: "KnowledgeBase") -> dict[str, float]:
    """The question's terms with their rarity in the KB (BM25's idf; 0 when no chunk has it):
    rare terms say which lines of a chunk matter. A quoted term counts as the rarest."""
    from engine.floor.words import tokens

    out = _idf_terms(question, kb)
    quoted = {t for a in anchors(question) for t in tokens(a)}
    best = max(out.values(), default=1.0)
    return {t: (best if t in quoted and w > 0 else w) for t, w in out.items()}


def _idf_terms(question: str, kb: "KnowledgeBase") -> dict[str, float]:
    from engine.floor.words import tokens

    terms = dict.fromkeys(tokens(question))
    n = max(len(kb), 1)
    try:
        index = kb.lexical_index()
    except Exception:  # a KB without a lexical index: every term counts the same
        return {t: 1.0 for t in terms}
    out = {}
    for t in terms:
        df = index.document_frequency(t)
        out[t] = math.log(1 + (n - df + 0.5) / (df + 0.5)) if df else 0.0
    return out


def gather(
    question: str,
    kb: "KnowledgeBase",
    layers: "Layers",
    qv: np.ndarray,
    pool: int,
    *,
    rare: set[str] | None = None,
    terms: dict[str, float] | None = None,
    lexical: bool = True,
) -> Gathered:
    """The `pool` best chunks by the fused lexical, dense and cluster rankings, with the sections
    the question names (`rare`: its rarest words) spelled out (_with_siblings)."""
    flags: list[str] = []
    rankings: dict[str, list[str]] = {}
    if lexical and kb.postings is not None:
        from hierarchy.lexical import top

        rows, _ = top(kb.lexical_index().scores(question), LEXICAL_HITS)
        rankings["lexical"] = [kb.chunk_ids[r] for r in rows.tolist()]
        named = " ".join(anchors(question))
        if named:
            rows, _ = top(kb.lexical_index().scores(named), LEXICAL_HITS)
            rankings["anchors"] = [kb.chunk_ids[r] for r in rows.tolist()]
    elif lexical:
        flags.append("the KB has no lexical index: breadth from the summary layers and dense search only")
    rankings["dense"] = [c.chunk_id for c in kb.search(qv, k=DENSE_HITS, retrieval="dense")]
    rankings["clusters"] = _cluster_ranking(kb, layers, question, qv)
    rankings["pages"] = _page_ranking(kb, question, qv, terms or {})
    score: dict[str, float] = {}
    for name, ids in rankings.items():
        for rank, cid in enumerate(ids):
            score[cid] = score.get(cid, 0.0) + WEIGHTS[name] / (RRF_K + rank + 1)
    order = [c for c in sorted(score, key=lambda c: -score[c]) if c in kb.chunks][:pool]
    order, siblings = _with_siblings(kb, order, rare or set())
    found_by = {name: len(set(ids) & set(order)) for name, ids in rankings.items()}
    found_by["siblings"] = siblings
    chunks = [RetrievedChunk.of(kb.chunks[c], score.get(c, 0.0)) for c in order]
    return Gathered(chunks, found_by, flags)


def _page_ranking(kb: "KnowledgeBase", question: str, qv: np.ndarray, terms: dict[str, float]) -> list[str]:
    """The best chunks of the pages the question names ("the Callgrind chapter", "the docs page of
    `npm audit`"): a question word, not among the KB's commonest (idf >= PAGE_MIN_IDF), found in
    the titles of 1 to PAGE_DOCS documents (in more, it is a topic, not a page's name). The items
    such a question asks for are that page's parts, spread over chunks that no ranking of the
    whole KB keeps together."""
    from engine.floor.words import tokens

    titles = {d: set(tokens(_doc_title(kb, d))) for d in kb.doc_ids}
    docs: list[str] = []
    for t, w in terms.items():
        named = [d for d, words in titles.items() if t in words]
        if w >= PAGE_MIN_IDF and 0 < len(named) <= PAGE_DOCS:
            docs += [d for d in named if d not in docs]
    if not docs:
        return []
    ids = [c.id for d in docs for c in kb.chunks_of(d)]
    return [c.chunk_id for c in kb.rank_within(qv, ids, PAGE_CHUNKS, text=question)]


def _doc_title(kb: "KnowledgeBase", doc_id: str) -> str:
    first = kb.chunks_of(doc_id)[:1]
    return first[0].title if first else ""


def _path(chunk) -> list[str]:
    return [p.strip() for p in (chunk.heading_path or chunk.title or "").split(">") if p.strip()]


def _with_siblings(kb: "KnowledgeBase", order: list[str], rare: set[str]) -> tuple[list[str], int]:
    """`order` with, after each of its first EXPAND_FROM chunks whose heading path holds a rare
    question word, the other chunks of the section it names: the question
    names a page or section ("the Configuration section of `npm audit`") and the items it asks
    for are that section's parts, which no ranking ranks together. Returns (order, chunks added)."""
    from engine.floor.words import tokens

    out: list[str] = []
    added = 0
    seen = set(order)
    for i, cid in enumerate(order):
        out.append(cid)
        if i >= EXPAND_FROM or not rare:
            continue
        c = kb.chunks[cid]
        path = _path(c)
        # The leaf heading names the list ("Activity options"): its continuation chunks share
        # the whole path. A parent names it ("npm-audit > Configuration"): its subsections.
        if path and rare & set(tokens(path[-1])):
            section = path
        elif len(path) >= 3 and rare & set(tokens(" ".join(path[:-1]))):
            section = path[:-1]
        else:
            continue
        for sib in kb.chunks_of(c.doc_id):
            if len(out) - i > SIBLINGS:
                break
            if sib.id not in seen and _path(sib)[: len(section)] == section:
                out.append(sib.id)
                seen.add(sib.id)
                added += 1
    return out, added


def _cluster_ranking(kb: "KnowledgeBase", layers: "Layers", question: str, qv: np.ndarray) -> list[str]:
    """The best chunks under the CLUSTERS level-1 nodes nearest the question, taken in turns (the
    best of each cluster, then the second of each...), so no one cluster fills the list."""
    if layers.top == 0 or not layers.levels:
        return []
    ids = layers.levels[0]
    near = np.argsort(-(layers.vectors[0] @ qv), kind="stable")[:CLUSTERS]
    per: list[list[str]] = []
    for i in near.tolist():
        kids = [c for c in layers.nodes[ids[i]].children if c in kb.chunks]
        if kids:
            per.append([c.chunk_id for c in kb.rank_within(qv, kids, PER_CLUSTER, text=question)])
    out: list[str] = []
    for j in range(PER_CLUSTER):
        out += [p[j] for p in per if j < len(p) and p[j] not in out]
    return out


def rare_terms(terms: dict[str, float]) -> set[str]:
    """The question's rarest words (idf within RARE_SHARE of the highest)."""
    best = max(terms.values(), default=0.0)
    return {t for t, w in terms.items() if best and w >= RARE_SHARE * best}


def _lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        words = line.split()
        if words:
            out.append(" ".join(words[:MAX_LINE_WORDS]) + (" ..." if len(words) > MAX_LINE_WORDS else ""))
    return out


def compress(chunk: RetrievedChunk, terms: dict[str, float], words: int) -> RetrievedChunk:
    """The chunk cut to `words` words of its lines, best first by the rare question terms they
    hold (plus STRUCTURE_BONUS for a structure line), shown in their own order; titled by its
    heading path, which often names the item itself (a command's page, an option's section)."""
    from engine.floor.words import tokens

    lines = _lines(chunk.text)
    best = max(terms.values(), default=0.0) or 1.0

    def weight(line: str) -> float:
        own = set(tokens(line))
        rare = sum(w for t, w in terms.items() if t in own) / best
        return rare + (STRUCTURE_BONUS if _STRUCTURE.match(line) else 0.0)

    ranked = sorted(range(len(lines)), key=lambda i: (-weight(lines[i]), i))
    keep, used = [], 0
    for i in ranked:
        n = len(lines[i].split())
        if used + n > words and keep:
            continue
        keep.append(i)
        used += n
        if used >= words:
            break
    text = " | ".join(lines[i] for i in sorted(keep))
    title = chunk.heading_path or chunk.title
    return replace(chunk, title=title, text=text)
