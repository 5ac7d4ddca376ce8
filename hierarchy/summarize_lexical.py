"""Extractive summaries chosen without embedding a sentence: the default extractive layer.

Embedding every sentence of every chunk a second time costs three quarters of `index`'s time on a
book-sized folder (issue 57: 7,727 sentences, 396 CPU-seconds, against ~140 for chunking and
embedding the chunks). Here a sentence's relevance to its cluster is read from what is known
already:

- its *source vector*, the embedding of the passage it comes from (the chunk's vector at level 1,
  the child summary's vector above), against the cluster's centroid: where in the cluster's
  meaning the sentence sits;
- how much of the cluster's vocabulary its words carry (tf-idf, the idf taken over the cluster's
  own passages): which sentences of a passage say what the cluster is about, the part a source
  vector cannot tell apart.

Redundancy between sentences is their words' overlap (cosine of the same tf-idf vectors), and the
selection is the embedded summarizer's MMR (hierarchy.summarize.mmr_pick) within the same word
budget. Only the finished summary is embedded, once per node (by hierarchy.layers.tree), so a
level costs one encode per node instead of one per sentence.

A node's summary depends on its children's text and vectors alone (the idf is the cluster's, not
the KB's), so an incremental update still equals a rebuild over the same tree.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from engine.floor.words import tokens
from hierarchy.summarize import Passage, Unit, candidates, mmr_pick

# relevance = cos(source vector, centroid) + LEXICAL_WEIGHT * the words' share, scaled to the range
# of a cosine; MMR's weight of relevance against redundancy. Both chosen on GraphRAG-Bench Medical
# questions outside the reported ones (offset 144 of Fact Retrieval and Complex Reasoning):
# docs/results/global/summary_layer_cost.md.
LEXICAL_WEIGHT = 1.0
LEXICAL_LAMBDA = 0.6
# Word-overlap cosine from which a candidate repeats a chosen sentence (the embedded summarizer's
# 0.9 is on sentence embeddings, which sit closer together than bags of words).
LEXICAL_DUP = 0.8

Job = tuple[Sequence[Passage], np.ndarray, np.ndarray]  # passages, source vectors (a row each), centroid


def lexical_batch(jobs: Sequence[Job], max_words: int, lam: float = LEXICAL_LAMBDA) -> list[list[Unit]]:
    """One summary per cluster: jobs are (passages, their source vectors, L2-normalized centroid)."""
    return [lexical_select(p, v, c, max_words, lam) for p, v, c in jobs]


def lexical_select(
    passages: Sequence[Passage],
    source_vecs: np.ndarray,
    centroid: np.ndarray,
    max_words: int,
    lam: float = LEXICAL_LAMBDA,
) -> list[Unit]:
    """The units of one cluster's summary, in passage order, within max_words words."""
    units, source = candidates(passages)
    if not units:
        return []
    x = word_vectors([u[1] for u in units], [text for _, text in passages])
    lexical = carried_words(x, [len(set(tokens(u[1]))) for u in units])
    semantic = np.asarray(source_vecs, dtype=np.float32)[source] @ np.asarray(centroid, dtype=np.float32)
    rel = semantic + LEXICAL_WEIGHT * lexical
    return mmr_pick(units, rel, lambda i: x @ x[i], max_words, lam, LEXICAL_DUP)


def carried_words(x: np.ndarray, terms: Sequence[int]) -> np.ndarray:
    """How much of the cluster's vocabulary each sentence carries: its words' cosine to the
    cluster's words times its number of distinct terms, scaled back to the cosine's range. The
    cosine alone rewards short sentences (15.6 words against the embedded summaries' 18.8 on
    Medical), and they held less of the gold answers."""
    cos = x @ _unit(x.sum(axis=0))
    carried = cos * np.asarray(terms, dtype=np.float32)
    top = float(carried.max()) if len(carried) else 0.0
    return carried * (float(cos.max()) / top) if top > 0 else cos


def word_vectors(sentences: Sequence[str], passages: Sequence[str]) -> np.ndarray:
    """L2-normalized tf-idf rows, one per sentence: a term counts once per sentence, weighted by
    its smoothed idf over `passages` (sklearn's: ln((1+n)/(1+df)) + 1, so no term weighs zero).
    Terms are the lexical index's (hierarchy.lexical.tokens: stop words out, plurals folded)."""
    terms = [set(tokens(s)) for s in sentences]
    df = Counter(t for text in passages for t in set(tokens(text)))
    vocab = {t: i for i, t in enumerate(sorted(set().union(*terms)))}
    n = len(passages)
    idf = np.ones(len(vocab), dtype=np.float32)
    for t, i in vocab.items():
        idf[i] = math.log((1 + n) / (1 + df.get(t, 0))) + 1
    x = np.zeros((len(sentences), len(vocab)), dtype=np.float32)
    for r, ts in enumerate(terms):
        cols = [vocab[t] for t in ts]
        x[r, cols] = idf[cols]
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v
