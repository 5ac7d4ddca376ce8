"""The corpus of `logicroute bench-scale` (training.bench_scale): real text only.

The distinct passages of the shared data sets (hierarchy.datasets, via
training.bench_commits.distinct_passages), shuffled once with a fixed seed so every size mixes
every set, chunked as the KB chunks them. Each size takes the first documents whose distinct
chunks reach it; the documents after them are the 1% add. A size past the corpus is cut to what
it holds, minus the 1% kept back for the add, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SCALE_SETS = ("hotpotqa", "2wiki", "musique", "nq", "squad", "medical")
ADD_SHARE = 0.01  # the add and the delete: 1% of the documents


@dataclass
class ScaleCorpus:
    """Documents in benchmark order and the distinct chunks each adds (the KB dedupes chunks by
    content, so a document repeating a chunk seen before adds fewer)."""

    sets: tuple[str, ...]
    docs: list = field(default_factory=list)  # hierarchy.documents.Document
    adds: list[int] = field(default_factory=list)  # new distinct chunks per document
    texts: list[str] = field(default_factory=list)  # the embedded text of every distinct chunk, in order

    @property
    def chunks(self) -> int:
        return len(self.texts)

    @property
    def max_kb(self) -> int:
        """The largest KB that leaves 1% of the corpus for the add."""
        return int(self.chunks / (1 + ADD_SHARE))

    def take(self, n: int) -> tuple[list, list]:
        """(the first documents whose chunks reach n, the documents after them whose chunks reach
        1% of n: the add)."""
        cum = np.cumsum(self.adds)
        end = int(np.searchsorted(cum, n)) + 1  # cum[end - 1] is the first running total >= n
        rest = cum[end:] - cum[end - 1]
        stop = end + int(np.searchsorted(rest, max(1.0, n * ADD_SHARE))) + 1
        return self.docs[:end], self.docs[end:stop]

    def chunks_for(self, n: int) -> int:
        """Distinct chunks of the documents take(n) returns: the part of the corpus a size embeds."""
        docs, extra = self.take(n)
        return int(sum(self.adds[: len(docs) + len(extra)]))


def scale_corpus(sets: tuple[str, ...] = SCALE_SETS, seed: int = 0) -> ScaleCorpus:
    """The shared data sets' distinct passages, shuffled with `seed`, and their distinct chunks."""
    from hierarchy.chunking import chunk_document, chunk_embed_text
    from hierarchy.datasets import SHARED_FILES
    from training.bench_commits import distinct_passages

    docs = distinct_passages([SHARED_FILES[s] for s in sets])
    corpus = ScaleCorpus(sets=tuple(sets))
    seen: set[str] = set()
    for i in np.random.default_rng(seed).permutation(len(docs)):
        new = [c for c in chunk_document(docs[i]) if c.id not in seen]
        seen.update(c.id for c in new)
        corpus.docs.append(docs[i])
        corpus.adds.append(len(new))
        corpus.texts += [chunk_embed_text(c) for c in new]
    return corpus


def plan_sizes(sizes: tuple[int, ...], corpus: ScaleCorpus) -> tuple[list[tuple[int, int]], list[str]]:
    """(requested, measured) chunk counts, each cut to the corpus, without repeats; and notes."""
    plan: list[tuple[int, int]] = []
    notes = []
    for asked in sizes:
        n = min(asked, corpus.max_kb)
        if n < asked:
            notes.append(
                f"{asked:,} chunks asked: the shared data sets ({', '.join(corpus.sets)}) hold {corpus.chunks:,} "
                f"distinct real chunks, so the largest KB has {n:,} (1% kept back for the add)"
            )
        if n not in [m for _, m in plan]:
            plan.append((asked, n))
    return plan, notes
