"""Extractive summaries chosen without embedding a sentence: the default extractive layer.

Embedding every sentence of every chunk a second time was three quarters of `index`'s time on a
book-sized folder (issue 57: 7,727 sentences, 396 CPU-seconds, against ~140 for chunking and
embedding the chunks). Here a sentence's relevance to its cluster is read from what is known
already:

- its *source vector*, the embedding of the passage it comes from (the chunk's vector at level 1,
  the child summary's vector above), against the cluster's centroid: where in the cluster's
  meaning the sentence sits;
- its words against the cluster's words (tf-idf, the idf taken over the cluster's own passages):
  which sentences of a passage carry the cluster's vocabulary, the part a source vector cannot
  tell apart.

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

from hierarchy.lexical import tokens
from hierarchy.summarize import MMR_LAMBDA, Passage, Unit, candidates, mmr_pick

# relevance = cos(source vector, centroid) + LEXICAL_WEIGHT * cos(sentence words, cluster words):
# the two cosines spread over similar ranges within a cluster (~0.1-0.3), so equal weight.
LEXICAL_WEIGHT = 1.0
# Word-overlap cosine from which a candidate repeats a chosen sentence (the embedded summarizer's
# 0.9 is on sentence embeddings, which sit closer together than bags of words).
LEXICAL_DUP = 0.8

Job = tuple[Sequence[Passage], np.ndarray, np.ndarray]  # passages, source vectors (a row each), centroid


def lexical_batch(jobs: Sequence[Job], max_words: int, lam: float = MMR_LAMBDA) -> list[list[Unit]]:
    """One summary per cluster: jobs are (passages, their source vectors, L2-normalized centroid)."""
    return [lexical_select(p, v, c, max_words, lam) for p, v, c in jobs]


def lexical_select(
    passages: Sequence[Passage],
    source_vecs: np.ndarray,
    centroid: np.ndarray,
    max_words: int,
    lam: float = MMR_LAMBDA,
) -> list[Unit]:
    """The units of one cluster's summary, in passage order, within max_words words."""
    units, source = candidates(passages)
    if not units:
        return []
    x = word_vectors([u[1] for u in units], [text for _, text in passages])
    words = _unit(x.sum(axis=0))
    lexical = x @ words
    semantic = np.asarray(source_vecs, dtype=np.float32)[source] @ np.asarray(centroid, dtype=np.float32)
    rel = semantic + LEXICAL_WEIGHT * lexical
    return mmr_pick(units, rel, lambda i: x @ x[i], max_words, lam, LEXICAL_DUP)


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
