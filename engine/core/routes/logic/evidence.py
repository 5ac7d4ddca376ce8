"""Zero-token context compression for the logic route's step calls: of the chunks retrieved for
a rank, keep the sentences that matter to its sub-questions, within a token budget.

Why: the passages are most of a step prompt (3 chunks of ~130 tokens per sub-question), and a
sub-question asks one fact, which one or two sentences state. The ranking costs no LLM call:
each sentence is embedded with the embedder the KB already holds, prefixed by its passage's
title, because a Wikipedia-style sentence names its subject only through the title ("He died in
1976."). A sentence's score is its best cosine to any sub-question, plus half of its neighbours'
best, so that a sentence continuing a relevant one ("He later moved to Paris.") is kept with it.
The kept sentences stay in passage order, under their passage's title and number.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from engine.floor.base.types import RetrievedChunk
from hierarchy.summarize import split_sentences

NEIGHBOUR_WEIGHT = 0.5


def estimate_tokens(text: str) -> int:
    """~0.75 words a token for English prose, names and numbers included."""
    return int(len(text.split()) / 0.75) + 1


def compress_chunks(
    chunks: list[RetrievedChunk], queries: list[str], embedder, budget_tokens: int
) -> tuple[list[RetrievedChunk], dict]:
    """The chunks cut to their best sentences for `queries`, at most `budget_tokens` in all
    (the best sentence is always kept, even alone over budget), and a record for the trace:
    tokens before and after, sentences kept of how many. A chunk with no sentence kept is
    dropped. budget_tokens <= 0 returns the chunks unchanged."""
    before = sum(estimate_tokens(c.text) for c in chunks)
    if budget_tokens <= 0 or not chunks or before <= budget_tokens:
        return chunks, {"tokens_before": before, "tokens_after": before, "compressed": False}
    sentences: list[tuple[int, int, str]] = []  # (chunk index, position in chunk, sentence)
    for ci, c in enumerate(chunks):
        for si, s in enumerate(split_sentences(c.text)):
            sentences.append((ci, si, s))
    # the Embedder contract: L2-normalized rows, so a dot product is the cosine
    vecs = embedder.encode([f"{chunks[ci].title}: {s}" if chunks[ci].title else s for ci, _, s in sentences])
    best = (vecs @ embedder.encode(list(queries)).T).max(axis=1)
    scores = best.copy()
    for j, (ci, _, _) in enumerate(sentences):
        near = [best[k] for k in (j - 1, j + 1) if 0 <= k < len(sentences) and sentences[k][0] == ci]
        if near:
            scores[j] += NEIGHBOUR_WEIGHT * max(near)
    kept: set[int] = set()
    used = 0
    for j in np.argsort(-scores, kind="stable"):
        cost = estimate_tokens(sentences[j][2])
        if kept and used + cost > budget_tokens:
            continue
        kept.add(int(j))
        used += cost
    out: list[RetrievedChunk] = []
    for ci, c in enumerate(chunks):
        mine = [s for j, (cj, _, s) in enumerate(sentences) if cj == ci and j in kept]
        if mine:
            out.append(replace(c, text=" ".join(mine)))
    return out, {
        "tokens_before": before,
        "tokens_after": sum(estimate_tokens(c.text) for c in out),
        "sentences_kept": len(kept),
        "sentences": len(sentences),
        "compressed": True,
    }
