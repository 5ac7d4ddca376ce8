"""Summaries of one cluster of texts: a zero-token extractive summarizer (the default) and an
abstractive one through the LLM interface.

A summary is kept as *units*: a list of [title, sentence] pairs. The extractive summarizer
selects units from its inputs; the LLM summarizer returns one unit ["", summary]. Keeping
units (not only the rendered text) lets an upper level summarize its children's selected
sentences again without re-splitting rendered text, and lets the summary route drop
sentences already present in the chunks it shows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from engine.floor.base.trace import Trace
from engine.floor.base.types import Usage
from engine.floor.llm.base import LLM, call_llm

Unit = list[str]  # [title, sentence]; JSON-friendly (lists, not tuples)
Passage = tuple[str, str]  # (title, text) given to a summarizer
Encode = Callable[[list[str]], np.ndarray]

SUMMARIZERS = ("extractive", "llm")
MMR_LAMBDA = 0.7  # weight of centrality against redundancy (Carbonell & Goldstein's MMR)
DUP_COSINE = 0.9  # a candidate this close to a chosen sentence is a repeat (overlapping chunks)
LLM_INPUT_WORDS = 1200  # ~1,600 prompt tokens: inside the 4,096-token window

# Abbreviations after which a period does not end a sentence.
_ABBREV = {
    "mr",
    "mrs",
    "ms",
    "dr",
    "st",
    "jr",
    "sr",
    "prof",
    "inc",
    "ltd",
    "co",
    "corp",
    "vs",
    "etc",
    "no",
    "vol",
    "gen",
    "col",
    "lt",
    "sgt",
    "capt",
    "rev",
    "ft",
    "mt",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "u.s",
    "u.k",
    "e.g",
    "i.e",
}
_SPLIT = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[\"'(\[]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """Split on sentence-final punctuation before a capital or digit, not after a known
    abbreviation or a single initial ("J. R. R. Tolkien")."""
    text = " ".join((text or "").split())
    if not text:
        return []
    out: list[str] = []
    start = 0
    for m in _SPLIT.finditer(text):
        piece = text[start : m.start()].rstrip()
        last = piece.rsplit(" ", 1)[-1].rstrip(".!?\"')]").lower()
        if last in _ABBREV or (len(last) == 1 and last.isalpha()):
            continue
        out.append(text[start : m.end()].strip())
        start = m.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def unit_words(unit: Sequence[str]) -> int:
    return len(unit[1].split())


def render_units(units: Sequence[Sequence[str]]) -> str:
    """One line per title, sentences in their order: 'Title: s1 s2'. Untitled units stand alone."""
    lines: list[tuple[str, list[str]]] = []
    index: dict[str, int] = {}
    for title, sentence in units:
        if not title:
            lines.append(("", [sentence]))
            continue
        if title not in index:
            index[title] = len(lines)
            lines.append((title, []))
        lines[index[title]][1].append(sentence)
    return "\n".join(f"{t}: {' '.join(s)}" if t else " ".join(s) for t, s in lines)


def candidates(passages: Sequence[Passage]) -> tuple[list[Unit], list[int]]:
    """Sentences of the passages, first occurrence only (overlapping chunks repeat text), and the
    passage each came from. With no usable sentence (all fragments or very short): the first
    non-empty passage whole, cut to budget by the selection."""
    seen: set[str] = set()
    out: list[Unit] = []
    source: list[int] = []
    for j, (title, text) in enumerate(passages):
        for s in split_sentences(text):
            key = " ".join(s.lower().split())
            # A chunk that starts mid-sentence (chunk overlap) yields a lowercase fragment.
            if key in seen or len(s.split()) < 3 or s[0].islower():
                continue
            seen.add(key)
            out.append([title or "", s])
            source.append(j)
    if not out:
        for j, (title, text) in enumerate(passages):
            if text.strip():
                return [[title or "", " ".join(text.split())]], [j]
    return out, source


def embed_key(unit: Sequence[str]) -> str:
    """What gets embedded for a sentence: its title gives pronoun sentences their subject."""
    return f"{unit[0]}: {unit[1]}" if unit[0] else unit[1]


def mmr_select(
    units: list[Unit], vecs: np.ndarray, centroid: np.ndarray, max_words: int, lam: float = MMR_LAMBDA
) -> list[Unit]:
    """Greedy maximal marginal relevance over sentence embeddings within a word budget; returns
    units in input order (mmr_pick, relevance = cosine to the centroid)."""
    if not units:
        return []
    return mmr_pick(units, vecs @ centroid, lambda i: vecs @ vecs[i], max_words, lam, DUP_COSINE)


def mmr_pick(
    units: list[Unit],
    rel: np.ndarray,
    similar_to: Callable[[int], np.ndarray],
    max_words: int,
    lam: float = MMR_LAMBDA,
    dup: float = DUP_COSINE,
) -> list[Unit]:
    """Greedy maximal marginal relevance within a word budget; returns units in input order.

    Each step takes the candidate with the best lam*rel - (1-lam)*max sim(chosen) among those that
    still fit; `similar_to(i)` gives every candidate's similarity to candidate i. A candidate at
    least `dup` similar to a chosen one is a repeat and never taken."""
    if not units:
        return []
    rel = np.asarray(rel, dtype=np.float32)
    chosen: list[int] = []
    max_sim = np.full(len(units), -1.0, dtype=np.float32)
    alive = np.ones(len(units), dtype=bool)
    titles: set[str] = set()
    used = 0
    while True:
        cost = np.array([unit_words(u) + (len(u[0].split()) if u[0] and u[0] not in titles else 0) for u in units])
        ok = alive & (used + cost <= max_words) & (max_sim < dup)
        if not ok.any():
            break
        score = lam * rel - (1 - lam) * max_sim if chosen else rel.copy()
        score = np.where(ok, score, -np.inf)
        i = int(np.argmax(score))
        chosen.append(i)
        alive[i] = False
        used += int(cost[i])
        if units[i][0]:
            titles.add(units[i][0])
        max_sim = np.maximum(max_sim, similar_to(i))
    if not chosen:
        # Even the most central sentence is over budget: keep its first max_words words.
        i = int(np.argmax(rel))
        title, s = units[i]
        room = max(1, max_words - (len(title.split()) if title else 0))
        return [[title, " ".join(s.split()[:room])]]
    return [units[i] for i in sorted(chosen)]


def extractive_batch(
    jobs: Sequence[tuple[Sequence[Passage], np.ndarray]],
    encode: Encode,
    max_words: int,
    cache: dict[str, np.ndarray] | None = None,
) -> list[list[Unit]]:
    """Summarize many clusters with one batched encode of all their new sentences.

    jobs: (passages, centroid) per cluster; centroid is L2-normalized. cache maps an
    embed_key to its vector so sentences met again at upper levels are not re-embedded."""
    cache = {} if cache is None else cache
    cands = [candidates(p)[0] for p, _ in jobs]
    todo = sorted({embed_key(u) for c in cands for u in c} - cache.keys())
    if todo:
        vecs = encode(todo)
        cache.update(zip(todo, np.asarray(vecs, dtype=np.float32)))
    out = []
    for c, (_, centroid) in zip(cands, jobs):
        v = np.stack([cache[embed_key(u)] for u in c]) if c else np.zeros((0, len(centroid)), np.float32)
        out.append(mmr_select(c, v, np.asarray(centroid, dtype=np.float32), max_words))
    return out


def llm_summary(passages: Sequence[Passage], llm: LLM, max_words: int, *, usage: Usage, trace: Trace) -> list[Unit]:
    """Abstractive summary (temperature 0, through call_llm so it is cached and booked),
    cut to max_words words."""
    from engine.floor.prompts.summary import summary_messages

    texts = [f"{t}: {x}" if t else x for t, x in passages]
    total = sum(len(x.split()) for x in texts) or 1
    if total > LLM_INPUT_WORDS:  # trim every passage in proportion, so each keeps a voice
        texts = [" ".join(x.split()[: max(20, len(x.split()) * LLM_INPUT_WORDS // total)]) for x in texts]
    c = call_llm(
        llm,
        summary_messages(texts, max_words),
        purpose="summary",
        usage=usage,
        trace=trace,
        max_tokens=int(max_words * 1.6) + 16,
    )
    words = " ".join(c.text.split()).split()
    return [["", " ".join(words[:max_words])]] if words else [["", ""]]
