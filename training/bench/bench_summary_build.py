"""The build part of `logicroute bench summary` (training/bench/bench_summary.py runs the parts).

Extractive layers over the ~4,858 passages of HotpotQA dev500: a KB over 99% of the passages
(every 100th passage held out), layers built on it, the held-out 1% added (add_documents
updates the layers incrementally), then a full rebuild over all passages. Run twice: "cold"
(each step with a fresh embedding cache: the worst case) and "warm" (one cache for all steps,
as a user's default cache: the update re-embeds only new sentences and changed summaries).
LLM tokens are 0 by construction. Printed beside the indexing costs graph-RAG systems report
on 2WikiMQA's ~6,000 passages (PUBLISHED below).
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from training.common.shared_data import SHARED_FILES

HOTPOT = SHARED_FILES["hotpotqa"]
HOLDOUT_EVERY = 100  # 1% of the documents are added incrementally

# Indexing cost on 2WikiMQA (~6,000 passages) as the LogicRAG paper's cost comparison
# publishes it: LLM tokens to build the graph, minutes.
PUBLISHED = [
    {"system": "GraphRAG", "corpus": "2WikiMQA ~6,000 passages", "tokens": 35_000_000, "minutes": 200},
    {"system": "LightRAG", "corpus": "2WikiMQA ~6,000 passages", "tokens": 36_000_000, "minutes": 100},
    {"system": "HippoRAG", "corpus": "2WikiMQA ~6,000 passages", "tokens": 20_000_000, "minutes": 40},
]


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _loadavg() -> list[float] | None:
    try:
        import os

        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def passage_documents(passages: Iterable[Any]) -> list:
    from hierarchy.documents import Document

    return [Document(p.id, p.title, p.text) for p in passages]


def copy_embedding_cache(src: Path, dst: Path) -> None:
    """Seed an embedding cache folder with a copy of another (SQLite file and its WAL)."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.glob("embeddings.sqlite*"):
        if not f.name.endswith("-shm"):
            shutil.copy2(f, dst / f.name)


def _build_run(mode: str, base: list, held: list, work: Path, chunk_cache: Path, show_progress: bool) -> dict:
    """Build on `base`, add `held` (incremental), rebuild on all, with embedding caches per mode.

    cold: every measured step gets a fresh embedding cache (worst case: nothing embedded before).
    warm: one cache for all steps, as a user's default cache is: the update re-embeds only new
          sentences and changed summaries; the rebuild finds the base corpus's sentences cached."""
    from engine.floor.embedder import Embedder
    from hierarchy.indexing import add_documents
    from hierarchy.kb import KnowledgeBase
    from hierarchy.layers.persist import load_layers
    from hierarchy.layers.update import build_layers

    if mode == "cold":
        kb_cache = chunk_cache
        caches = {step: work / f"cold_{step}" for step in ("build", "add", "rebuild")}
    else:
        kb_cache = work / "warm"
        copy_embedding_cache(chunk_cache, kb_cache)  # the chunk vectors are not what is measured
        caches = {step: kb_cache for step in ("build", "add", "rebuild")}
    path = work / f"kb_{mode}"
    t = time.perf_counter()
    kb = KnowledgeBase.create(path, Embedder(cache=kb_cache), overwrite=True)
    kb.add(base, show_progress=show_progress)
    kb_seconds = time.perf_counter() - t
    _log(f"[{mode}] chunk index over {len(base)} passages: {kb_seconds:.1f} s ({len(kb)} chunks)")
    kb = KnowledgeBase.open(path, Embedder(cache=caches["build"]))
    build = build_layers(kb, "extractive", show_progress=show_progress, rebuild=True)
    _log(f"[{mode}] extractive layers over {len(kb)} chunks: {build['seconds']:.1f} s, {build['nodes_per_level']}")
    kb = KnowledgeBase.open(path, Embedder(cache=caches["add"]))
    t = time.perf_counter()
    add = add_documents(kb, held, show_progress=False)
    add_seconds = time.perf_counter() - t
    upd = load_layers(kb).meta["updates"][-1]
    _log(f"[{mode}] add {len(held)} documents: {add_seconds:.1f} s in all, layer update {upd['seconds']:.1f} s")
    kb = KnowledgeBase.open(path, Embedder(cache=caches["rebuild"]))
    rebuild = build_layers(kb, "extractive", show_progress=show_progress, rebuild=True)
    _log(f"[{mode}] full rebuild over {len(kb)} chunks: {rebuild['seconds']:.1f} s")
    return {
        "chunks": len(kb),
        "chunk_index_seconds_base": round(kb_seconds, 2),
        "build_base": build,
        "incremental_add": {
            "documents": len(held),
            "kb_add_seconds_total": round(add_seconds, 2),
            "kb_add": add,
            "layer_update": upd,
        },
        "full_rebuild": rebuild,
        "speedup_incremental_vs_rebuild": round(rebuild["seconds"] / max(upd["seconds"], 1e-9), 1),
    }


def bench_build(
    out_dir: Path, data_dir: Path, show_progress: bool = True, modes: Iterable[str] = ("cold", "warm")
) -> dict:
    """Extractive build on 99% of the passages, incremental add of the other 1%, full rebuild."""
    from hierarchy.datasets import load_dataset

    ds = load_dataset(data_dir / HOTPOT)
    docs = passage_documents(ds.passages)
    held = [d for i, d in enumerate(docs) if i % HOLDOUT_EVERY == HOLDOUT_EVERY - 1]
    base = [d for i, d in enumerate(docs) if i % HOLDOUT_EVERY != HOLDOUT_EVERY - 1]
    work = out_dir / "build_work"
    shutil.rmtree(work, ignore_errors=True)
    # Holds only the base passages' chunk vectors (never sentences or held-out chunks), and
    # survives reruns: the chunk index is the chunk route's cost, not the layers'.
    chunk_cache = out_dir / "emb_cache_chunks"
    result: dict = {
        "corpus": f"HotpotQA dev500, {len(docs)} passages ({len(base)} base + {len(held)} added)",
        "published": PUBLISHED,
        "load_average_at_start": _loadavg(),
        "note": "wall seconds on a 2-core machine that may be shared with other jobs; "
        "cpu_seconds is this process's CPU time",
    }
    try:
        for mode in modes:
            result[mode] = _build_run(mode, base, held, work, chunk_cache, show_progress)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["load_average_at_end"] = _loadavg()
    return result


def build_table(r: dict) -> str:
    def m(sec: float) -> str:
        return f"{sec / 60:.1f}" if sec >= 60 else f"{sec / 60:.2f}"

    lines = ["| system / step | corpus | LLM tokens to index | minutes (wall) | CPU minutes |", "|---|---|---|---|---|"]
    for mode in ("cold", "warm"):
        x = r.get(mode)
        if not x:
            continue
        n_add = x["incremental_add"]["documents"]
        rows = [
            (f"logicroute extractive layers, full build ({mode} embedding cache)", x["full_rebuild"]),
            (f"logicroute incremental add of {n_add} docs ({mode})", x["incremental_add"]["layer_update"]),
        ]
        for name, c in rows:
            lines.append(
                f"| {name} | {r['corpus']} | {c['total_tokens']} | {m(c['seconds'])} | {m(c.get('cpu_seconds', 0.0))} |"
            )
    for p in r["published"]:
        lines.append(f"| {p['system']} (published) | {p['corpus']} | ~{p['tokens'] / 1e6:.0f}M | ~{p['minutes']} | |")
    return "\n".join(lines)
