"""What a commit costs against a rebuild, on real text: adding 1% of the documents and deleting
1% of them from a KB of N passages, in wall time (embedding included) and in bytes written to
the KB folder (hierarchy.kb_segments), per store. The figures in docs/vector_stores.md.

    nice -n 10 python -m training.scale.bench_commits [--n 10000] [--stores faiss,faiss-hnsw] [--out DIR]

Corpus: the passages of the shared HotpotQA, 2Wiki and MuSiQue files (../shared/data, read
where they are), deduplicated, in file order; the first N are the KB, the next N/100 the add.
Embedding: the KB is built with the on-disk embedding cache (its passages may be cached from
earlier runs); the 1% add is embedded fresh (no cache), so its wall time is what a user pays.
The rebuild's time is its measured build time without embedding plus N times the per-chunk
time of that fresh embedding: a rebuild of N new passages, without the cache.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

DATA = ("hotpotqa/hotpotqa_dev500.jsonl", "2wikimultihopqa/2wiki_train500.json", "musique/musique_200.jsonl")


def distinct_passages(files: Sequence[str] = DATA) -> list:
    """The distinct passages of shared data files (paths under shared/data), as Documents, in file order."""
    from hierarchy.datasets import load_dataset
    from hierarchy.documents import Document
    from training.common.shared_data import shared_data_dir

    seen: dict[str, Document] = {}
    for name in files:
        for p in load_dataset(shared_data_dir() / name).passages:
            seen.setdefault(p.id, Document(p.id, p.title, p.text))
    return list(seen.values())


def passages(n: int) -> list:
    """The first n distinct passages of the shared data sets, as Documents."""
    docs = distinct_passages()
    if len(docs) < n:
        raise SystemExit(f"only {len(docs)} passages in {', '.join(DATA)}; ask for fewer")
    return docs[:n]


def _listing(path: Path) -> dict[str, tuple[int, int, int]]:
    return {f.name: (f.stat().st_ino, f.stat().st_mtime_ns, f.stat().st_size) for f in path.iterdir() if f.is_file()}


def _written(before: dict, after: dict) -> dict[str, int]:
    """Bytes of the files new or rewritten between two listings of the KB folder."""
    return {n: a[2] for n, a in after.items() if before.get(n, (None, None))[:2] != a[:2]}


def _measure(kb_path: Path, change) -> dict:
    before = _listing(kb_path)
    t0 = time.perf_counter()
    out = change()
    seconds = time.perf_counter() - t0
    written = _written(before, _listing(kb_path))
    index = written.get("index.faiss", 0)
    return {
        "seconds": round(seconds, 3),
        "bytes": sum(written.values()),
        "index_bytes": index,
        "other_bytes": sum(written.values()) - index,
        "result": out,
    }


def build_kb(store: str, docs: list, work: Path, embedder=None) -> tuple[Path, dict]:
    """A KB of `docs` at work/STORE, embedded through the on-disk embedding cache: its path and
    its build figures (seconds rounded to the millisecond)."""
    from engine.floor.embedder import get_embedder
    from hierarchy.kb import KnowledgeBase
    from training.scale.bench_store import bench_spec

    # faiss-hnsw is forced to its graph at every size, so the index rewrite it pays is measured.
    spec = bench_spec(store)
    path = work / store
    t0 = time.perf_counter()
    kb = KnowledgeBase.create(path, embedder or get_embedder(), store=spec, overwrite=True)
    built = kb.add(docs, show_progress=False)
    build_seconds = time.perf_counter() - t0
    return path, {
        "chunks": built["added_chunks"],
        "kb_bytes": sum(f.stat().st_size for f in path.iterdir() if f.is_file()),
        "build_seconds_measured": round(build_seconds, 3),
        "build_embed_seconds_measured": round(built["embed_seconds"], 3),
    }


def measure_changes(path: Path, docs: list, extra: list, build: dict, fresh=None) -> dict:
    """Add `extra` to the KB at `path` (embedded by `fresh`, default: the cached embedder's model
    without the cache), then delete as many of `docs`; each against a rebuild (build_kb's figures)."""
    from engine.floor.embedder import Embedder, get_embedder
    from hierarchy.kb import KnowledgeBase

    fresh = fresh or Embedder(get_embedder().spec, cache=False)  # the added passages cost what a user pays
    fresh.encode(["the model loads before the clock starts"])  # as in a process that already answers
    kb = KnowledgeBase.open(path, fresh)
    add = _measure(path, lambda: kb.add(extra, show_progress=False))
    per_chunk = add["result"]["embed_seconds"] / max(1, add["result"]["added_chunks"])
    delete = _measure(path, lambda: kb.delete([d.id for d in docs[: len(extra)]]))
    rebuild = build["build_seconds_measured"] - build["build_embed_seconds_measured"] + per_chunk * len(kb)
    rebuild = max(rebuild, 1e-6)  # a fake embedder on a tiny KB (tests) can round it to nothing
    return {
        "fresh_embed_ms_per_chunk": round(per_chunk * 1000, 2),
        "rebuild_seconds_fresh": round(rebuild, 2),
        "add": {**add, "share_of_rebuild": round(add["seconds"] / rebuild, 4)},
        "delete": {**delete, "share_of_rebuild": round(delete["seconds"] / rebuild, 4)},
    }


def run_store(store: str, docs: list, extra: list, work: Path) -> dict:
    path, build = build_kb(store, docs, work)
    return {"store": store, **build, **measure_changes(path, docs, extra, build)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000, help="passages in the KB")
    ap.add_argument("--stores", default="faiss,faiss-hnsw")
    ap.add_argument("--out", default=None, help="folder for the KBs (a temp folder, removed, by default)")
    args = ap.parse_args(argv)
    docs = passages(args.n + args.n // 100)
    base, extra = docs[: args.n], docs[args.n :]
    work = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench_commits_"))
    try:
        for store in args.stores.split(","):
            print(json.dumps(run_store(store, base, extra, work)), flush=True)
    finally:
        if not args.out:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
