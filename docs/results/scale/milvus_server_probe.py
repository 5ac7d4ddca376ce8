"""What a Milvus server's search latency and recall are made of (milvus_server_scale.md): the same
vectors and queries as `logicroute bench scale --index-vectors cache`, on a server the bench's
helper starts, searched three ways: through the store (Strong consistency, rows still in growing
segments), at Bounded consistency, and at Strong again after a flush and a reload (sealed segments
under their FLAT index).

    PYTHONPATH=. .venv/bin/python docs/results/scale/milvus_server_probe.py [N] [QUERIES]

One JSON line per way. It calls pymilvus' client through the store's own, which the product
never does outside hierarchy/vector_store: a probe, not a benchmark mode.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


def main(n: int = 100_000, n_q: int = 200) -> None:
    from engine.floor.embedder import get_embedder
    from hierarchy.vector_store.open import new_store
    from training.scale.bench_index_only import cache_base
    from training.scale.bench_server import milvus_server
    from training.scale.bench_store import bench_spec, grow, questions, recall_at, row_ids, timed_queries, truth_ids

    emb = get_embedder()
    texts = questions(n_q)
    q = np.asarray(emb.encode(texts, show_progress=False), np.float32)
    v = grow(cache_base(emb.id, texts), n)
    truth = truth_ids(q, v)
    ids = row_ids(n)
    with milvus_server() as srv:
        store = new_store(bench_spec(srv.store), srv.data, v.shape[1], ids, v)
        col, client = store.spec.collection, store.client()

        def raw(row: np.ndarray, level: str) -> list[str]:
            hits = client.search(
                col, data=[row[0].tolist()], limit=10, output_fields=["id"], anns_field="vec",
                search_params={"metric_type": "IP"}, consistency_level=level,
            )  # fmt: skip
            return [str(h["id"]) for h in hits[0]]

        out = [{"way": "store (Strong), growing segments", **timed_queries(lambda r: _ids(store, r), q, truth)}]
        out.append({"way": "Bounded, growing segments", **timed_queries(lambda r: raw(r, "Bounded"), q, truth)})
        t0 = time.perf_counter()
        client.flush(col)
        client.release_collection(col)
        client.load_collection(col)
        sealed = time.perf_counter() - t0
        row = {"way": "store (Strong), after flush + reload", **timed_queries(lambda r: _ids(store, r), q, truth)}
        out.append({**row, "flush_reload_s": round(sealed, 1)})
        got = [raw(r[None, :], "Bounded") for r in q]
        out.append({"way": "Bounded, after flush + reload", "recall_at_10": round(recall_at(got, truth), 4)})
        store.close()
    for r in out:
        print(json.dumps({"n": n, "queries": len(q), **r}), flush=True)


def _ids(store, row: np.ndarray) -> list[str]:
    return [c for c, _ in store.search(row, 10)[0]]


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
