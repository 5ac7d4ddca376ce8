"""Benchmark of the chunk-level index (`logicroute bench index`): build throughput vs bare
SentenceTransformer.encode, and search latency.

(a) Build: KnowledgeBase.create + add on the passages of a QA file (default: the ~5,000
    passages of the shared HotpotQA dev500 file) with a COLD embedding cache (a temporary
    LOGICROUTE_CACHE_DIR), timed end to end (chunking, hashing, cache lookups and writes,
    embedding, faiss, atomic file writes). The baseline is bare
    `SentenceTransformer.encode(texts)` (library defaults) on exactly the texts the KB embeds,
    with the same loaded model, in the same run. It runs before AND after the build and the
    mean is used, so drift of a shared machine's load hits both sides alike.
    ratio = baseline seconds / build seconds (1.0 = no overhead; target >= 0.9), reported for
    wall time and for process CPU time (robust when other jobs share the cores).
(b) Search: faiss latency per single query (precomputed query vector, k=3), end-to-end
    `kb.search(question)` latency (embedding included), and batched search throughput; plus
    supporting-passage recall@k of the questions as a sanity check of the index.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from engine.floor.base.stats import percentile
from training.common.shared_data import SHARED_FILES, shared_data_dir

if TYPE_CHECKING:
    from hierarchy.documents import Chunk, Document


def _load(path: Path) -> tuple[list, list[tuple[str, list[str]]]]:
    """(documents, [(question text, supporting passage ids)])."""
    from hierarchy.datasets import load_dataset
    from hierarchy.documents import Document

    ds = load_dataset(path)
    docs = [Document(p.id, p.title, p.text) for p in ds.passages]
    return docs, [(q.text, list(q.supporting)) for q in ds.questions]


@dataclass
class _Build:
    kb: object
    report: dict  # KnowledgeBase.add's
    seconds: float
    cpu_seconds: float


def _build(kb_path: Path, emb, docs: list, log, rate: bool) -> _Build:
    """KnowledgeBase.create + add, timed (wall and process CPU)."""
    from hierarchy.kb import KnowledgeBase

    t0, c0 = time.perf_counter(), time.process_time()
    kb = KnowledgeBase.create(kb_path, emb)
    r = kb.add(docs, show_progress=False)
    b = _Build(kb, r, time.perf_counter() - t0, time.process_time() - c0)
    speed = f" ({len(kb) / b.seconds:.1f} chunks/s)" if rate else ""
    log(
        f"KB build (cold cache): {b.seconds:.1f}s wall, {b.cpu_seconds:.1f}s CPU{speed}, "
        f"embedding {r['embed_seconds']:.1f}s"
    )
    return b


def _build_vs_bare(
    model, texts: list[str], kb_path: Path, emb, docs: list, sandwich: bool, log
) -> tuple[_Build, list[float], list[float]]:
    """The KB build and the bare encode baseline: bare, build, bare (sandwich) or bare, build."""

    def bare() -> tuple[float, float]:
        t0, c0 = time.perf_counter(), time.process_time()
        model.encode(texts)  # library defaults: batch_size=32, no normalization
        return time.perf_counter() - t0, time.process_time() - c0

    bare_s, bare_cpu = [], []
    build = None
    for _ in range(2 if sandwich else 1):
        if bare_s:  # the second baseline runs after the build
            build = _build(kb_path, emb, docs, log, rate=True)
        w, c = bare()
        bare_s.append(w)
        bare_cpu.append(c)
        log(f"bare SentenceTransformer.encode: {w:.1f}s wall, {c:.1f}s CPU ({len(texts) / w:.1f} texts/s)")
    if not sandwich:
        build = _build(kb_path, emb, docs, log, rate=False)
    return build, bare_s, bare_cpu


def _search_stats(kb, emb, questions: list[tuple[str, list[str]]], n_queries: int, k: int) -> dict:
    """Latency of faiss, of end-to-end search and of excluding searches; batch throughput;
    supporting-passage recall@k."""
    qs = [q for q, _ in questions][: max(1, n_queries)]
    qv = emb.encode(qs)
    lat = []
    for i in range(len(qs)):
        t0 = time.perf_counter()
        kb.index.search(qv[i : i + 1], k)
        lat.append(time.perf_counter() - t0)
    e2e = []
    for q in qs[:50]:  # embedding a question dominates: 50 are enough
        t0 = time.perf_counter()
        kb.search(q + " ?", k)  # a variant, so the query embedding is not a cache hit
        e2e.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    kb.search_batch(qv, k)
    batch_s = time.perf_counter() - t0
    excl_lat = []
    for i in range(min(len(qs), 100)):
        first = [h.chunk_id for h in kb.search(qv[i], k)]
        t0 = time.perf_counter()
        kb.search(qv[i], k, exclude=first)
        excl_lat.append(time.perf_counter() - t0)
    recall = _support_recall(kb, emb, questions, k)
    return {
        "queries": len(qs),
        "k": k,
        "faiss_ms_median": round(statistics.median(lat) * 1e3, 3),
        "faiss_ms_p95": round(percentile(lat, 0.95) * 1e3, 3),
        "exclude_search_ms_median": round(statistics.median(excl_lat) * 1e3, 3) if excl_lat else None,
        "end_to_end_ms_median": round(statistics.median(e2e) * 1e3, 2),
        "end_to_end_ms_p95": round(percentile(e2e, 0.95) * 1e3, 2),
        "batch_queries_per_s": round(len(qs) / batch_s, 1),
        f"supporting_recall_at_{k}": round(recall, 3) if recall is not None else None,
    }


def _support_recall(kb, emb, questions: list[tuple[str, list[str]]], k: int) -> float | None:
    """Mean recall@k of supporting passages (doc ids are passage ids); None when none are marked."""
    if not (questions and questions[0][1]):
        return None
    hits = kb.search_batch(emb.encode([q for q, _ in questions]), k)
    rs = []
    for (_, sup), hs in zip(questions, hits):
        if sup:
            got = {h.doc_id for h in hs}
            rs.append(len(got & set(sup)) / len(set(sup)))
    return statistics.mean(rs) if rs else None


def run_bench(
    data: str | Path | None = None,
    *,
    limit: int | None = None,
    n_queries: int = 200,
    k: int = 3,
    batch_size: int = 64,
    sandwich: bool = True,
    log=print,
) -> dict:
    """Run both parts on `data` (default: the shared HotpotQA file) and return the result."""
    data = Path(data) if data else shared_data_dir() / SHARED_FILES["hotpotqa"]
    tmp = Path(tempfile.mkdtemp(prefix="logicroute-bench-"))
    old_env = os.environ.get("LOGICROUTE_CACHE_DIR")
    os.environ["LOGICROUTE_CACHE_DIR"] = str(tmp / "cache")  # cold cache, never the user's
    try:
        return _run(data, tmp, limit, n_queries, k, batch_size, sandwich, log)
    finally:
        if old_env is None:
            os.environ.pop("LOGICROUTE_CACHE_DIR", None)
        else:
            os.environ["LOGICROUTE_CACHE_DIR"] = old_env
        shutil.rmtree(tmp, ignore_errors=True)


def _run(
    data: Path, tmp: Path, limit: int | None, n_queries: int, k: int, batch_size: int, sandwich: bool, log
) -> dict:
    from engine.floor.embedder import Embedder
    from hierarchy.chunking import chunk_embed_text
    from hierarchy.kb import KnowledgeBase

    docs, questions = _load(data)
    if limit:
        docs = docs[:limit]
    emb = Embedder(batch_size=batch_size, cache=True)
    # Exactly the texts the KB will embed (same chunking as KnowledgeBase.create defaults).
    texts = [chunk_embed_text(c) for c in chunk_documents(docs)]
    words = sum(len(t.split()) for t in texts)
    log(f"{len(docs)} passages -> {len(texts)} chunks ({words / max(1, len(texts)):.0f} words avg) from {data}")

    t = time.perf_counter()
    model = emb.model
    model.encode(["warm up the model"] * 8)
    load_s = time.perf_counter() - t
    log(f"model loaded + warm in {load_s:.1f}s; torch threads: {_torch_threads()}")
    build, bare_s, bare_cpu = _build_vs_bare(model, texts, tmp / "kb", emb, docs, sandwich, log)
    bare_mean, bare_cpu_mean = statistics.mean(bare_s), statistics.mean(bare_cpu)

    # Warm rebuild: every vector comes from the cache.
    t0 = time.perf_counter()
    kb_w = KnowledgeBase.create(tmp / "kb-warm", emb)
    kb_w.add(docs, show_progress=False)
    warm_s = time.perf_counter() - t0
    log(f"KB rebuild (warm cache): {warm_s:.2f}s")

    kb = build.kb
    result = {
        "data": str(data),
        "passages": len(docs),
        "chunks": len(kb),
        "avg_words_per_chunk": round(words / max(1, len(texts)), 1),
        "model": emb.id,
        "batch_size": batch_size,
        "torch_threads": _torch_threads(),
        "cpu_count": os.cpu_count(),
        "model_load_seconds": round(load_s, 2),
        "bare_encode_seconds": [round(x, 2) for x in bare_s],
        "bare_encode_cpu_seconds": [round(x, 2) for x in bare_cpu],
        "bare_texts_per_s": round(len(texts) / bare_mean, 1),
        "build_seconds": round(build.seconds, 2),
        "build_cpu_seconds": round(build.cpu_seconds, 2),
        "build_embed_seconds": build.report["embed_seconds"],
        "build_overhead_seconds": round(build.seconds - build.report["embed_seconds"], 2),
        "build_chunks_per_s": round(len(kb) / build.seconds, 1),
        # wall ratio: what a user sees; CPU ratio: the same work measured robustly on a
        # machine shared with other jobs (wall time there mostly measures the neighbours).
        "throughput_ratio": round(bare_mean / build.seconds, 3),
        "throughput_ratio_cpu": round(bare_cpu_mean / build.cpu_seconds, 3),
        "warm_rebuild_seconds": round(warm_s, 2),
        "search": _search_stats(kb, emb, questions, n_queries, k),
    }
    log(json.dumps(result, indent=2))
    return result


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def chunk_documents(docs: Iterable[Document]) -> list[Chunk]:
    """Chunks of many documents at the KB's default sizes; identical chunks (same title + text) are
    kept once, first wins."""
    from hierarchy.chunking import chunk_document

    out: list[Chunk] = []
    seen: set[str] = set()
    for doc in docs:
        for c in chunk_document(doc):
            if c.id not in seen:
                seen.add(c.id)
                out.append(c)
    return out
