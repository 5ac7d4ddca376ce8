"""The index-only part of `logicroute bench scale` (training.scale.bench_scale): vectors only, no KB,
per store, at sizes past what the corpus holds (its real vectors, past them noisy copies), and
where those real vectors come from."""

from __future__ import annotations

import tempfile

import numpy as np

from engine.floor.base.errors import LogicRouteError
from hierarchy.vector_store.base import MILVUS
from training.scale.bench_memory import peak_rss_mb, reset_peak_rss
from training.scale.bench_server import SERVER

MILVUS_QUERIES = 200  # Milvus Lite is tens of ms a query (pure Python), a server's Strong search ~200 ms: a sample
# The index-only part's real vectors: the corpus' chunks (embedded first: minutes to an hour on a
# busy CPU), or the MiniLM vectors already in the embedding cache (nothing embedded).
INDEX_VECTORS = ("corpus", "cache")


def cache_base(model: str, asked: list[str]) -> np.ndarray:
    """Every vector of `model` in the embedding cache (read-only), the questions `asked` left out."""
    from engine.floor.base.files import content_hash
    from training.scale.bench_store import cached_vectors

    keys, vectors = cached_vectors(model)
    asked_keys = {bytes.fromhex(content_hash(t)) for t in asked}
    keep = [i for i, k in enumerate(keys) if k not in asked_keys]
    if not keep:
        raise LogicRouteError(f"--index-vectors cache: the embedding cache holds no {model} vector besides the queries")
    return np.ascontiguousarray(vectors[keep])


def index_only(
    base: np.ndarray, n: int, q: np.ndarray, stores: tuple[str, ...], milvus_max: int = 0, done: frozenset = frozenset()
) -> list[dict]:
    """Vectors only (training.scale.bench_store.measure): the corpus' real vectors, past them noisy copies.
    Milvus Lite holds at most `milvus_max` of them (0: all); (store, rows) pairs in `done` are skipped.
    A Milvus server (SERVER) is started for each size, new, and stopped after it."""
    from training.scale.bench_server import measure_on_server
    from training.scale.bench_store import bench_spec, grow, measure, truth_ids

    v = grow(base, n)
    truth = truth_ids(q, v)
    rows = []
    for store in stores:
        rows_n, m = n, len(q)
        if store in (MILVUS, SERVER):  # Milvus answers in tens to hundreds of ms: a sample of the queries
            rows_n, m = min(n, milvus_max or n) if store == MILVUS else n, min(len(q), MILVUS_QUERIES)
        if (store, rows_n) in done:
            continue
        t = truth[:m] if rows_n == n else truth_ids(q[:m], v[:rows_n])
        with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
            rss0 = reset_peak_rss()
            if store == SERVER:
                row = measure_on_server(v, q[:m], t)
            else:
                row = measure(bench_spec(store), v[:rows_n], q[:m], t, tmp)
            row["rss_start_mb"], row["peak_rss_mb"] = rss0, peak_rss_mb()
        row["store"], row["real_vectors"] = store, min(rows_n, len(base))
        rows.append(row)
    return rows
