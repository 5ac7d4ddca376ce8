"""`logicroute bench scale`: what a knowledge base costs as it grows, per vector store.

Per KB size and store (faiss, faiss-hnsw forced to its graph, Milvus Lite): build wall time and
its embedding share, peak RSS, disk size, the chunk route's retrieval latency (query embedding
excluded, measured apart) and recall@10 against exact search, adding and deleting 1% of the
documents against a rebuild (training.scale.bench_commits); per size, the extractive summary layers'
build and the summary descent's latency. Then index only, without a KB: adding N vectors,
search latency and recall@10 (training.scale.bench_store). Reported by training.scale.bench_scale_report.

Corpus: real text only, training.scale.bench_scale_corpus: the shared data sets (17,613 distinct
chunks), or with --corpus debian-docs the manuals of seven Debian documentation packages (fetched
once by `make corpus`, training.scale.corpus_fetch), or a folder of .md/.txt files.

Embedding: every chunk goes through the cached embedder (engine.floor.embedder) before any KB is
built; the cache is written every few batches, so an interrupted run keeps what it embedded and
a rerun embeds nothing again. A KB build therefore reads its vectors from the cache: its fresh
cost is estimated as its measured time without embedding plus every chunk at the per-chunk time
of the 1% add, which is embedded without the cache (what a user pays), as bench_commits does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from engine.floor.base.errors import LogicRouteError
from engine.floor.base.stats import percentile
from hierarchy.vector_store.base import FAISS, FAISS_HNSW, MILVUS
from training.scale.bench_scale_corpus import SCALE_SETS, SHARED, check_corpus, corpus_lines, load_corpus, plan_sizes
from training.scale.bench_scale_report import DEFAULT_OUT, write_report

STORES = (FAISS, FAISS_HNSW, MILVUS)
ROUTE_K = 3  # the chunk route's (and the summary route's) default k
RECALL_K = 10
MILVUS_QUERIES = 200  # Milvus Lite is tens of ms a query (pure Python): a sample of the questions
# Milvus Lite (pure Python) measured ~9 KB of RSS and ~0.5 s a query per 60k vectors: 1M would take
# ~9 GB and ~8 s a query on a shared machine. The index-only part stops it here unless told otherwise.
MILVUS_INDEX_MAX = 100_000
QUERY_EMBED_SAMPLE = 50  # questions embedded one at a time, uncached, for the query-embedding latency


@dataclass
class ScaleConfig:
    """What `logicroute bench scale` measures; checked on construction (one-line errors)."""

    sizes: tuple[int, ...] = (1_000, 10_000, 100_000)
    stores: tuple[str, ...] = STORES
    index_only_sizes: tuple[int, ...] = (1_000_000,)
    queries: int = 1000
    milvus_index_max: int = MILVUS_INDEX_MAX  # 0: Milvus Lite takes every index-only size
    out: str = DEFAULT_OUT
    layers: bool = True
    sets: tuple[str, ...] = SCALE_SETS
    corpus: str = SHARED  # shared, debian-docs, or a folder (training.scale.bench_scale_corpus)

    def __post_init__(self) -> None:
        if not self.sizes and not self.index_only_sizes:
            raise LogicRouteError("nothing to measure: give --sizes or an --index-only-size above 0")
        if any(n < 1 for n in self.sizes):
            raise LogicRouteError(f"--sizes must be positive chunk counts, got {list(self.sizes)}")
        if any(n < RECALL_K for n in self.index_only_sizes):
            raise LogicRouteError(
                f"--index-only-size must be 0 or at least {RECALL_K}, got {list(self.index_only_sizes)}"
            )
        bad = [s for s in self.stores if s not in STORES]
        if bad or not self.stores:
            raise LogicRouteError(f"unknown --stores {', '.join(bad) or '(none)'}: choose from {', '.join(STORES)}")
        if self.milvus_index_max < 0:
            raise LogicRouteError(f"--milvus-index-max must be 0 (no cap) or more, got {self.milvus_index_max}")
        if self.queries < 1:
            raise LogicRouteError(f"--queries must be at least 1, got {self.queries}")
        from training.common.shared_data import SHARED_FILES

        unknown = [s for s in self.sets if s not in SHARED_FILES]
        if unknown:
            raise LogicRouteError(f"unknown data sets {', '.join(unknown)}: choose from {', '.join(SHARED_FILES)}")
        check_corpus(self.corpus)


# ---------------------------------------------------------------- memory and disk


def reset_peak_rss() -> float:
    """Start a new peak-RSS window (Linux resets VmHWM to the current RSS when 5 is written to
    /proc/self/clear_refs); returns the resident memory the step starts from."""
    with contextlib.suppress(OSError):  # elsewhere the peak is the process' since it started
        Path("/proc/self/clear_refs").write_text("5")
    return peak_rss_mb()


def peak_rss_mb() -> float:
    """The peak resident set since the last reset (VmHWM), else since the process started."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return round(peak / (2**20 if sys.platform == "darwin" else 1024), 1)


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file()) if Path(path).exists() else 0


# ---------------------------------------------------------------- measurements


def _timed(items, call: Callable, desc: str) -> list[float]:
    """Seconds of call(item) for each item, one at a time, faiss on one thread, with a progress bar."""
    from engine.floor.base.progress import progress_bar
    from training.scale.bench_store import one_thread

    out = []
    bar = progress_bar(len(items), desc, "query")
    with one_thread():
        for it in items:
            t = time.perf_counter()
            call(it)
            out.append(time.perf_counter() - t)
            bar.update(1)
    bar.close()
    return out


def _ms(lat: list[float]) -> dict:
    return {"p50_ms": round(percentile(lat, 0.5) * 1e3, 3), "p95_ms": round(percentile(lat, 0.95) * 1e3, 3)}


@dataclass
class Queries:
    texts: list[str]
    vectors: np.ndarray


def chunk_retrieval(kb, q: np.ndarray, label: str) -> dict:
    """The chunk route's retrieval (KnowledgeBase.search of a query vector, top ROUTE_K): latency,
    and recall@10 against exact inner-product search over the KB's vectors."""
    from training.scale.bench_store import exact_top, recall_at

    lat = _timed(list(q), lambda v: kb.search(v, k=ROUTE_K), f"retrieval {label}")
    truth = [[kb.chunk_ids[i] for i in row] for row in exact_top(q, np.asarray(kb.vectors), RECALL_K)]
    got = [[h.chunk_id for h in kb.search(v, k=RECALL_K)] for v in q]
    return {"queries": len(q), **_ms(lat), "recall_at_10": round(recall_at(got, truth, RECALL_K), 4)}


def summary_layers(kb, texts: list[str], q: np.ndarray) -> dict:
    """Build the extractive summary layers (hierarchy.layers' full build), then time the summary
    route's descent (engine.core.routes.summary.summary_context, query vector given: no embedding)."""
    from engine.core.routes.summary import summary_context
    from hierarchy.layers.search import require_layers
    from hierarchy.layers.update import build_layers

    encoded = getattr(kb.embedder, "encoded_texts", None)
    rss0 = reset_peak_rss()
    t0 = time.perf_counter()
    with kb.writing():
        cost = build_layers(kb, "extractive", show_progress=True, rebuild=True)
    seconds = time.perf_counter() - t0
    peak = peak_rss_mb()
    layers = require_layers(kb)
    lat = _timed(
        list(zip(texts, q)),
        lambda tv: summary_context(tv[0], kb, k=ROUTE_K, query_vector=tv[1], layers=layers),
        "summary descent",
    )
    return {
        "chunks": len(kb),
        "build_s": round(seconds, 3),
        "cluster_s": cost.get("cluster_seconds"),
        "cluster_method": layers.meta.get("cluster_method"),
        "nodes_per_level": cost.get("nodes_per_level"),
        "texts_embedded": cost.get("embedded_texts"),
        "texts_embedded_fresh": None if encoded is None else kb.embedder.encoded_texts - encoded,
        "rss_start_mb": rss0,
        "peak_rss_mb": peak,
        "layers_bytes": folder_bytes(kb.path / "layers"),
        "descent": {"queries": len(q), **_ms(lat)},
    }


def measure_kb(store: str, docs: list, work: Path, q: Queries, emb) -> tuple[dict, object]:
    """One KB of `docs` on `store`: its row of the report, and the KB (open, for the layers)."""
    from hierarchy.kb import KnowledgeBase
    from training.scale.bench_commits import build_kb

    rss0 = reset_peak_rss()
    path, build = build_kb(store, docs, work, emb)
    peak = peak_rss_mb()
    kb = KnowledgeBase.open(path, emb)
    n_q = min(len(q.vectors), MILVUS_QUERIES) if store == MILVUS else len(q.vectors)
    row = {
        "store": store,
        "index": kb.store.describe().get("type"),
        "chunks": build["chunks"],
        "documents": len(docs),
        "build_s": build["build_seconds_measured"],
        "build_cache_read_s": build["build_embed_seconds_measured"],
        "rss_start_mb": rss0,
        "peak_rss_mb": peak,
        "kb_bytes": build["kb_bytes"],
        "disk_bytes": folder_bytes(path),  # with a Milvus Lite folder inside the KB folder
        "retrieval": chunk_retrieval(kb, q.vectors[:n_q], store),
    }
    return row, kb


def add_changes(row: dict, path: Path, docs: list, extra: list, fresh) -> None:
    """The 1% add and delete against a rebuild (training.scale.bench_commits), into `row`."""
    from training.scale.bench_commits import measure_changes

    build = {"build_seconds_measured": row["build_s"], "build_embed_seconds_measured": row["build_cache_read_s"]}
    ch = measure_changes(path, docs, extra, build, fresh)
    per_chunk = ch["fresh_embed_ms_per_chunk"] / 1000
    embed = per_chunk * row["chunks"]
    row["fresh_embed_ms_per_chunk"] = ch["fresh_embed_ms_per_chunk"]
    row["build_fresh_s"] = ch["rebuild_seconds_fresh"]
    row["embed_share"] = round(min(1.0, embed / ch["rebuild_seconds_fresh"]), 4)
    for what in ("add", "delete"):
        m = ch[what]
        res = m.pop("result")
        m["chunks"] = res["added_chunks"] if what == "add" else res
        m["bytes_share_of_kb"] = round(m["bytes"] / max(1, row["kb_bytes"]), 4)
        row[what] = m


QUERY_WORDS = 16  # words of a held-out chunk that make an in-domain query


def query_set(n: int, emb, corpus=None, largest: int = 0) -> Queries:
    """What the retrievals are asked. The shared corpus: questions of its own data sets
    (training.scale.bench_store.questions). Any other corpus: those questions are about nothing in it
    (top-1 cosine ~0.3 on debian-docs), and HNSW recall against exact search on such queries
    measures ties among unrelated chunks; so the queries are the first QUERY_WORDS words of n
    chunks that no KB of the run holds (those past the largest size and its 1% add), drawn with
    a fixed seed. Embedded through the cache."""
    if corpus is None or corpus.name == SHARED:
        from training.scale.bench_store import questions

        texts = questions(n)
    else:
        held = corpus.texts[corpus.chunks_for(largest) if largest else 0 :]
        if not held:
            raise LogicRouteError(f"{corpus.name}: no chunk is left outside the largest KB to ask queries from")
        pick = np.random.default_rng(0).choice(len(held), min(n, len(held)), replace=False)
        texts = [" ".join(held[i].split()[:QUERY_WORDS]) for i in sorted(pick)]
    return Queries(texts, np.asarray(emb.encode(texts, show_progress=True), np.float32))


def embed_latency(texts: list[str], fresh) -> dict:
    """One question at a time through the model, no cache: what the routes pay before retrieval."""
    fresh.encode(["the model loads before the clock starts"])
    lat = []
    for t in texts[:QUERY_EMBED_SAMPLE]:
        t0 = time.perf_counter()
        fresh.encode([t])
        lat.append(time.perf_counter() - t0)
    return {"queries": len(lat), **_ms(lat)}


def index_only(
    base: np.ndarray, n: int, q: np.ndarray, stores: tuple[str, ...], milvus_max: int = 0, done: frozenset = frozenset()
) -> list[dict]:
    """Vectors only (training.scale.bench_store.measure): the corpus' real vectors, past them noisy copies.
    Milvus Lite holds at most `milvus_max` of them (0: all); (store, rows) pairs in `done` are skipped."""
    from training.scale.bench_store import bench_spec, grow, measure, truth_ids

    v = grow(base, n)
    truth = truth_ids(q, v)
    rows = []
    for store in stores:
        rows_n, m = n, len(q)
        if store == MILVUS:
            rows_n, m = min(n, milvus_max or n), min(len(q), MILVUS_QUERIES)
        if (store, rows_n) in done:
            continue
        t = truth[:m] if rows_n == n else truth_ids(q[:m], v[:rows_n])
        with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
            rss0 = reset_peak_rss()
            row = measure(bench_spec(store), v[:rows_n], q[:m], t, tmp)
            row["rss_start_mb"], row["peak_rss_mb"] = rss0, peak_rss_mb()
        row["store"], row["real_vectors"] = store, min(rows_n, len(base))
        rows.append(row)
    return rows


# ---------------------------------------------------------------- the run


def new_report(cfg: ScaleConfig, corpus, emb, notes: list[str]) -> dict:
    """The report before any measurement: what is measured, on what, and the notes that say what was cut."""
    if MILVUS in cfg.stores and cfg.milvus_index_max and any(n > cfg.milvus_index_max for n in cfg.index_only_sizes):
        notes.append(
            f"index only: Milvus Lite holds at most {cfg.milvus_index_max:,} vectors (--milvus-index-max; it keeps "
            "~9 KB of memory a vector and searches in pure Python, so 1M would need ~9 GB and seconds a query)"
        )
    return {
        "config": asdict(cfg),
        "machine": {"cpus": os.cpu_count(), "load_at_start": [round(x, 2) for x in os.getloadavg()]},
        "corpus": corpus.describe(),
        "embedding": {"model": emb.id, "dim": int(emb.dim)},
        "kb": [],
        "layers": [],
        "index_only": [],
        "notes": notes,
        "finished": False,
    }


def run_bench_scale(cfg: ScaleConfig, embedder=None, fresh=None, echo: Callable[[str], None] = print) -> dict:
    """Measure everything `cfg` asks for; the report is rewritten (atomically) after each step,
    so an interrupted run leaves the figures it has. embedder: the cached one (default: MiniLM);
    fresh: the same model without the cache (default: built from embedder)."""
    from engine.floor.embedder import Embedder, get_embedder

    t_start = time.perf_counter()
    emb = embedder or get_embedder()
    fresh = fresh or (Embedder(emb.spec, cache=False) if isinstance(emb, Embedder) else emb)
    corpus = load_corpus(cfg.corpus, cfg.sets)
    plan, notes = plan_sizes(cfg.sizes, corpus)
    report = new_report(cfg, corpus, emb, notes)
    for line in corpus_lines(corpus):
        echo(line)
    for note in notes:
        echo(f"note: {note}")

    def save(plot: bool = False) -> None:
        # JSON and markdown after every step; the curves (seconds to draw) once a size is done.
        report["seconds"] = round(time.perf_counter() - t_start, 1)
        write_report(report, cfg.out, plot=plot)

    # The chunks first, through the cache: the long, resumable part (a rerun embeds nothing). All
    # of them when the index-only part alone runs: its real vectors are these.
    texts = corpus.texts[: corpus.chunks_for(max(n for _, n in plan))] if plan else corpus.texts
    encoded = getattr(emb, "encoded_texts", None)
    t0 = time.perf_counter()
    base = np.asarray(emb.encode(texts, show_progress=True), np.float32)
    report["embedding"].update(
        corpus_texts=len(texts),
        corpus_seconds=round(time.perf_counter() - t0, 1),
        embedded_now=None if encoded is None else emb.encoded_texts - encoded,
    )
    q = query_set(cfg.queries, emb, corpus, max((n for _, n in plan), default=0))
    report["embedding"]["query"] = embed_latency(q.texts, fresh)
    report["queries"] = {"from": "questions" if corpus.name == SHARED else "held-out chunks", "n": len(q.texts)}
    report["queries"] |= {"words": QUERY_WORDS, "examples": q.texts[:3]} if corpus.name != SHARED else {}
    save()
    work = Path(tempfile.mkdtemp(prefix="bench_scale_kbs_"))
    try:
        for asked, n in plan:
            docs, extra = corpus.take(n)
            for i, store in enumerate(cfg.stores):
                echo(f"{n:,} chunks, {store}: build, queries, 1% add and delete")
                # A folder per size: Milvus Lite keeps one client per folder for the whole process.
                row, kb = measure_kb(store, docs, work / str(n), q, emb)
                row["size"] = asked
                if cfg.layers and i == 0:  # the layers read only the vectors, the descent no store
                    echo(f"{n:,} chunks: summary layers")
                    report["layers"].append({"size": asked, "store": store, **summary_layers(kb, q.texts, q.vectors)})
                kb.store.close()
                add_changes(row, kb.path, docs, extra, fresh)
                report["kb"].append(row)
                shutil.rmtree(kb.path, ignore_errors=True)
                save(plot=store == cfg.stores[-1])
        for n in cfg.index_only_sizes:
            echo(f"index only, {n:,} vectors: {', '.join(cfg.stores)}")
            done = frozenset((r["store"], r["n"]) for r in report["index_only"])
            report["index_only"] += index_only(base, n, q.vectors, cfg.stores, cfg.milvus_index_max, done)
            save(plot=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report["finished"] = True
    save()
    return report
