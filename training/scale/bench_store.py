"""How the vector stores behind hierarchy.vector_store compare on real MiniLM vectors: search
latency (one query at a time, one thread) and recall@10 against exact search, per size. It is
the measurement behind EXACT_MAX and the HNSW parameters (docs/vector_stores.md).

    python -m training.scale.bench_store [--sizes 10000,37000,100000] [--queries 1000] [--milvus 10000]
    python -m training.scale.bench_store --sizes 100000,1000000 --milvus 0 --ef-sweep 64,128,192,256,384,512

Corpus: the MiniLM vectors already in the embedding cache ($LOGICROUTE_CACHE_DIR or
~/.cache/logicroute/embeddings.sqlite: chunks and questions of the shared data sets indexed
before), read-only, so no passage is embedded again. Past the cache's size the corpus is its
vectors again with Gaussian noise (sigma 0.03 per dimension, then renormalized): near-duplicates,
the hard case for an approximate index. Queries: questions of the shared data sets, embedded now
(a few seconds), none of them in the corpus."""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from engine.floor.base.files import cache_dir, content_hash
from engine.floor.base.stats import percentile
from hierarchy.vector_store.base import FAISS, FAISS_HNSW, StoreSpec, parse_store
from hierarchy.vector_store.open import new_store, with_collection


def cached_vectors(model: str = "all-MiniLM-L6-v2") -> tuple[list[bytes], np.ndarray]:
    """(keys, vectors) of the embedding cache, read-only."""
    con = sqlite3.connect(f"file:{cache_dir() / 'embeddings.sqlite'}?mode=ro", uri=True)
    rows = con.execute("SELECT key, vec FROM emb WHERE model = ?", (model,)).fetchall()
    con.close()
    return [bytes(k) for k, _ in rows], np.stack([np.frombuffer(v, np.float32) for _, v in rows])


def questions(n: int, seed: int = 0) -> list[str]:
    from hierarchy.datasets import load_dataset
    from training.common.shared_data import SHARED_FILES, shared_data_dir

    qs = []
    for name in ("hotpotqa", "2wiki", "musique", "nq"):
        qs += [q.text for q in load_dataset(shared_data_dir() / SHARED_FILES[name]).questions]
    rng = np.random.default_rng(seed)
    return [qs[i] for i in rng.choice(len(qs), size=min(n, len(qs)), replace=False)]


def bench_spec(name: str) -> StoreSpec:
    """The spec a benchmark measures store `name` (a --store value) with: faiss-hnsw forced to its
    graph from the first row (at benchmark sizes its default would stay exact, measuring nothing
    new), Milvus with a collection of its own."""
    return StoreSpec(FAISS_HNSW, exact_max=0) if name == FAISS_HNSW else with_collection(parse_store(name))


def grow(corpus: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """The first n real vectors, then noisy copies up to n."""
    if n <= len(corpus):
        return corpus[:n]
    rng = np.random.default_rng(seed)
    parts = [corpus]
    while sum(len(p) for p in parts) < n:
        v = corpus + rng.normal(0, 0.03, corpus.shape).astype(np.float32)
        parts.append(v / np.linalg.norm(v, axis=1, keepdims=True))
    return np.ascontiguousarray(np.concatenate(parts)[:n])


@contextmanager
def one_thread() -> Iterator[None]:
    """faiss on one thread inside: one query at a time on one core is what a request costs."""
    import faiss

    n = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(n)


def recall_at(got: list[list[str]], truth: list[list[str]], k: int = 10) -> float:
    """Mean share of the exact top-k that a search returned."""
    return float(np.mean([len(set(a[:k]) & set(b[:k])) / k for a, b in zip(got, truth)])) if truth else 0.0


def row_id(i: int) -> str:
    """Row i's id (16 hex digits), as every store and the exact oracle name it here."""
    return f"{i:016x}"


def row_ids(n: int) -> list[str]:
    return [row_id(i) for i in range(n)]


def timed_queries(search: Callable[[np.ndarray], list[str]], q: np.ndarray, truth: list[list[str]]) -> dict:
    """p50/p95 latency (one query at a time, one thread) and recall@10 of `search`, which gives
    the ids of one query row's top 10."""
    lat, got = [], []
    with one_thread():
        for row in q:
            t = time.perf_counter()
            got.append(search(row[None, :]))
            lat.append(time.perf_counter() - t)
    return {
        "p50_ms": round(percentile(lat, 0.5) * 1e3, 3),
        "p95_ms": round(percentile(lat, 0.95) * 1e3, 3),
        "recall_at_10": round(recall_at(got, truth), 4),
    }


def measure(spec: StoreSpec, vectors: np.ndarray, q: np.ndarray, truth: list[list[str]], tmp: str) -> dict:
    t0 = time.perf_counter()
    store = new_store(spec, Path(tmp), vectors.shape[1], row_ids(len(vectors)), vectors)
    build = time.perf_counter() - t0
    timed = timed_queries(lambda row: [c for c, _ in store.search(row, 10)[0]], q, truth)
    store.close()
    return {
        "store": spec.label(),
        "index": store.describe()["type"],
        "n": len(vectors),
        "queries": len(q),
        "build_s": round(build, 3),
        **timed,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,37000,100000")
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--milvus", type=int, default=10000, help="rows for Milvus Lite (0: skip)")
    ap.add_argument("--ef-sweep", default="", help="HNSW efSearch values: one graph per size, searched at each")
    args = ap.parse_args()
    import tempfile

    import faiss

    from engine.floor.embedder import get_embedder

    faiss.omp_set_num_threads(1)  # one query at a time on one core: what a request costs
    keys, cached = cached_vectors()
    qtexts = questions(args.queries)
    q = np.asarray(get_embedder().encode(qtexts, show_progress=False), np.float32)
    qkeys = {bytes.fromhex(content_hash(t)) for t in qtexts}
    corpus = np.ascontiguousarray(cached[[i for i, k in enumerate(keys) if k not in qkeys]])
    print(json.dumps({"cached_vectors": len(corpus), "queries": len(q)}), flush=True)
    for n in [int(x) for x in args.sizes.split(",")]:
        v = grow(corpus, n)
        truth = truth_ids(q, v)
        if args.ef_sweep:
            for row in ef_sweep(v, q, truth, [int(x) for x in args.ef_sweep.split(",")]):
                print(json.dumps(row), flush=True)
            continue
        for spec in (bench_spec(FAISS), bench_spec(FAISS_HNSW)):
            with tempfile.TemporaryDirectory() as tmp:
                print(json.dumps(measure(spec, v, q, truth, tmp)), flush=True)
        if args.milvus and n == min(int(x) for x in args.sizes.split(",")):
            m, mq = min(n, args.milvus), q[:100]  # Milvus Lite is tens of ms a query: 100 queries
            with tempfile.TemporaryDirectory() as tmp:
                row = measure(bench_spec("milvus"), v[:m], mq, truth_ids(mq, v[:m]), tmp)
                print(json.dumps(row), flush=True)


def ef_sweep(vectors: np.ndarray, q: np.ndarray, truth: list[list[str]], widths: list[int]) -> list[dict]:
    """The faiss-hnsw store's own HNSW graph over `vectors`, its index searched at each efSearch
    width: the measurement behind hierarchy.vector_store.base.ef_search."""
    import faiss

    ids = row_ids(len(vectors))
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:  # the store is built in memory; it is never saved here
        index = new_store(bench_spec(FAISS_HNSW), Path(tmp), vectors.shape[1], ids, vectors).index
    build = time.perf_counter() - t0

    def search(row: np.ndarray, params) -> list[str]:
        found = index.search(row, 10, params=params)[1][0]
        return [ids[i] for i in found if i >= 0]  # faiss pads a short result with -1

    rows = []
    for ef in widths:
        params = faiss.SearchParametersHNSW(efSearch=ef)
        timed = timed_queries(lambda row, p=params: search(row, p), q, truth)
        rows.append({"n": len(vectors), "ef_search": ef, "build_s": round(build, 1), **timed})
    return rows


def exact_top(q: np.ndarray, v: np.ndarray, k: int = 10, batch: int = 16) -> np.ndarray:
    """Rows of v with the k highest inner products per query, best first: the oracle. Queries go
    in small batches and only each row's top k is sorted: at 1M vectors a full product of 1,000
    queries would be 4 GB and its argsort minutes."""
    k = min(k, len(v))
    out = np.empty((len(q), k), dtype=np.int64)
    for s in range(0, len(q), batch):
        scores = q[s : s + batch] @ v.T
        part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(scores, part, axis=1), axis=1, kind="stable")
        out[s : s + batch] = np.take_along_axis(part, order, axis=1)
    return out


def truth_ids(q: np.ndarray, v: np.ndarray) -> list[list[str]]:
    """Exact top-10 ids (measure's ids: the row number in 16 hex digits)."""
    return [[row_id(i) for i in row] for row in exact_top(q, v)]


if __name__ == "__main__":
    main()
