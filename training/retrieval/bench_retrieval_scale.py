"""How fast lexical and hybrid retrieval are as a KB grows (`logicroute bench retrieval`, part d):
per size, one query at a time on one thread, `KnowledgeBase.search` with the query vector and its
words given (the embedding of a question is not timed: it is the same for every mode), p50/p95
for dense, lexical and hybrid; the lexical index's build time (tokenizing and the postings), its
first-search setup (hierarchy.lexical.LexicalIndex), its bytes on disk and in memory.

Text: the chunks of the bench-scale corpus (training.scale.bench_scale_corpus: debian-docs after
`make corpus`, else the shared sets' passages), as the KB chunks them. Vectors: embedding 100k
chunks takes an hour on two cores, so the KB is built with real MiniLM vectors (the QA sets'
passages, embedded by part a) and past them their noisy copies (training.scale.bench_store.grow), as
bench-scale's index-only part does: dense latency depends on the index, not on which text a
vector came from. Queries: a window of 8 words of a random chunk (words of the corpus, common and
rare as they come) with a real question's vector.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from engine.floor.base.stats import percentile
from hierarchy.retrieval import DENSE, HYBRID, LEXICAL

MODES = (DENSE, LEXICAL, HYBRID)
QUERY_WORDS = 8


class PoolEmbedder:
    """The Embedder interface over a pool of real vectors: each text gets the next row (the pool
    grown with noisy copies as far as needed), so building a 100k KB embeds nothing."""

    spec = None
    id = "all-MiniLM-L6-v2 (pool)"

    def __init__(self, pool: np.ndarray):
        self.real = self.pool = np.ascontiguousarray(pool, np.float32)
        self.dim = int(pool.shape[1])
        self.used = 0

    def encode(self, texts, show_progress=False):
        from training.scale.bench_store import grow

        texts = [texts] if isinstance(texts, str) else list(texts)
        end = self.used + len(texts)
        if end > len(self.pool):  # grow's copies come in a fixed order: the rows handed out stay the same
            self.pool = grow(self.real, max(end, 2 * len(self.pool)))
        rows, self.used = self.pool[self.used : end], end
        return rows


def queries(kb, vectors: np.ndarray, n: int, seed: int = 0) -> list[tuple[np.ndarray, str]]:
    """n (question vector, 8 words of a random chunk of the KB)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        words = kb.chunks[kb.chunk_ids[int(rng.integers(len(kb)))]].text.split()
        start = int(rng.integers(max(1, len(words) - QUERY_WORDS)))
        out.append((vectors[i % len(vectors)], " ".join(words[start : start + QUERY_WORDS])))
    return out


def lexical_bytes(kb) -> dict:
    """Bytes of the lexical index on disk (its segment files) and in memory (postings held, and
    the index a first search builds from them)."""
    disk = sum(f.stat().st_size for f in Path(kb.path).glob("seg-*.lexical.npz"))
    total = sum(f.stat().st_size for f in Path(kb.path).iterdir() if f.is_file())
    held = sum(a.nbytes for p in (kb.postings or {}).values() for a in vars(p).values())
    index = kb.lexical_index()
    built = sum(a.nbytes for part in index._terms for a in part) + sum(a.nbytes for a in index.live)
    return {"disk": disk, "kb_disk": total, "postings_memory": held, "index_memory": built}


def measure_size(corpus, n: int, pool: np.ndarray, qvecs: np.ndarray, n_queries: int, work: Path) -> dict:
    """Build a KB of about n chunks of the corpus, then time its lexical parts and every mode."""
    from hierarchy.kb import KnowledgeBase
    from hierarchy.kb_retrieval import lexical_text
    from hierarchy.lexical import Postings
    from training.scale.bench_store import one_thread

    docs, _ = corpus.take(n)
    path = work / f"kb-{n}"
    t0 = time.perf_counter()
    kb = KnowledgeBase.create(path, PoolEmbedder(pool), overwrite=True)
    kb.add(docs, show_progress=False)
    build = time.perf_counter() - t0
    chunks = [kb.chunks[c] for c in kb.chunk_ids]
    t0 = time.perf_counter()
    Postings.of_texts(kb.chunk_ids, [lexical_text(c) for c in chunks])
    tokenize = time.perf_counter() - t0
    kb = KnowledgeBase.open(path, kb.embedder)  # a fresh process' view: postings read, no index yet
    t0 = time.perf_counter()
    sizes = lexical_bytes(kb)
    setup = time.perf_counter() - t0
    qs = queries(kb, qvecs, n_queries)
    row: dict = {"chunks": len(kb), "documents": len(kb.doc_ids), "build_seconds": round(build, 1)}
    row |= {"lexical_build_seconds": round(tokenize, 2), "lexical_setup_seconds": round(setup, 3), **sizes}
    with one_thread():
        for mode in MODES:
            for qv, text in qs[:20]:  # warm-up: caches, the first HNSW pages
                kb.search(qv, k=3, text=text, retrieval=mode)
            lat = []
            for qv, text in qs:
                t = time.perf_counter()
                kb.search(qv, k=3, text=text, retrieval=mode)
                lat.append(1000 * (time.perf_counter() - t))
            row[mode] = {"p50_ms": round(percentile(lat, 0.5), 2), "p95_ms": round(percentile(lat, 0.95), 2)}
    row["store"] = kb.manifest["index"]["type"]
    shutil.rmtree(path, ignore_errors=True)
    return row


def run_scale(
    sizes: tuple[int, ...], corpus_name: str, pool: np.ndarray, qvecs: np.ndarray, n_queries: int, echo: Callable
) -> dict:
    """Part d: every size of `sizes` (cut to the corpus) measured in turn."""
    from training.scale.bench_scale_corpus import load_corpus, plan_sizes

    t0 = time.perf_counter()
    corpus = load_corpus(corpus_name)
    echo(f"corpus {corpus.about}: {corpus.chunks:,} distinct chunks ({time.perf_counter() - t0:.0f} s)")
    plan, notes = plan_sizes(sizes, corpus)
    out: dict = {"corpus": corpus.about, "pool_vectors": len(pool), "queries": n_queries, "notes": notes, "sizes": []}
    with tempfile.TemporaryDirectory(prefix="bench-retrieval-") as tmp:
        for _, n in plan:
            row = measure_size(corpus, n, pool, qvecs, n_queries, Path(tmp))
            out["sizes"].append(row)
            echo(
                f"{row['chunks']:,} chunks: "
                + ", ".join(f"{m} p50 {row[m]['p50_ms']} ms" for m in MODES)
                + f"; lexical build {row['lexical_build_seconds']} s, disk {row['disk'] / 1e6:.1f} MB"
            )
    return out
