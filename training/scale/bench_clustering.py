"""How the summary layers' clustering methods compare on real text as the corpus grows: time,
peak memory, cluster-size balance and descent recall. It is the measurement behind
hierarchy/layers/clustering.py (Ward up to WARD_MAX rows, two stages above).

    python -m training.scale.bench_clustering [--sizes 2000,5000,10000,30000,100000]
        [--methods ward,minibatch,faiss,two-stage] [--ward-max 10000] [--minibatch-max 5000]
        [--faiss-max 30000] [--questions N] [--out docs/results/summary/bench_clustering.md]

Methods, each with k = round(m / 10) clusters at every level: Ward (sklearn, what the layers
used up to 12k rows), sklearn MiniBatchKMeans, faiss k-means, two stages (faiss k-means into
~m/1000 groups, Ward inside each group with k shared out by group size), and "code": what
hierarchy.layers.clustering does now at each level's size (run only above its WARD_MAX, below
it is the Ward row). Ward and the flat k-means methods run only up to their --*-max sizes:
Ward's memory and the flat methods' time grow with m^2 (MiniBatchKMeans was the slowest here).
Each tree is built in a fresh process on one thread, so its time and peak memory are its own.

Corpus, tree and descent: training/scale/bench_clustering_eval.py. Question and chunk vectors come
from the MiniLM embedding cache where present (questions not yet in it are embedded once);
distractors are read from the cache, read-only."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from training.scale.bench_clustering_eval import METHODS, QACorpus

DEFAULT_SIZES = "2000,5000,10000,30000,100000"
DEFAULT_OUT = "docs/results/summary/bench_clustering.md"
COLUMNS = [
    ("method", "method"),
    ("level-1 s", "level1_s"),
    ("level-1 CPU s", "level1_cpu_s"),
    ("tree s", "tree_s"),
    ("peak MB", "peak_mb"),
    ("clusters", "clusters"),
    ("median / p99 / max size", "sizes"),
    ("singletons", "singletons"),
    ("recall, descent from top", "recall_top"),
    ("reached by it", "reach_top"),
    ("recall, descent from level 1", "recall_l1"),
    ("supporting kept together", "together"),
]


def run(
    qa: QACorpus,
    pool: np.ndarray,
    sizes: list[int],
    methods: list[str],
    caps: dict[str, int],
    *,
    cluster_size: int = 10,
    seed: int = 0,
    isolate: bool = True,
    log: Callable[[dict], None] = lambda row: None,
) -> list[dict]:
    """One row per (size, method) that runs, and one per size with the flat reference recall."""
    from hierarchy.layers.clustering import WARD_MAX
    from training.scale.bench_clustering_eval import CODE, corpus, descent_scores, flat_recall

    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-clustering-") as tmp:
        for n in sizes:
            x, held, what = corpus(qa, pool, n, seed)
            path = str(Path(tmp) / f"x{n}.npy")
            np.save(path, x)
            ref = {"size": n, "method": "flat top-3 (no layers)", "questions": len(held), **what}
            ref["recall_top"] = ref["recall_l1"] = flat_recall(qa, x, held)
            rows.append(ref)
            log(ref)
            for method in methods:
                if n > caps.get(method, math.inf) or (method == CODE and n <= WARD_MAX):
                    continue  # too big for the method; or the code's method is Ward's row
                tree = _tree(path, method, cluster_size, seed, isolate)
                row = {"size": n, "method": method, **_summary(tree), **descent_scores(qa, x, tree["levels"], held)}
                rows.append(row)
                log(row)
    return rows


def _tree(path: str, method: str, cluster_size: int, seed: int, isolate: bool) -> dict:
    from training.scale.bench_clustering_eval import tree_in_child

    if not isolate:
        return tree_in_child(path, method, cluster_size, seed)
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    # spawn, not fork: the parent has run torch and OpenMP, which a forked child can deadlock on
    with ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn")) as pool:
        return pool.submit(tree_in_child, path, method, cluster_size, seed).result()


def _summary(tree: dict) -> dict:
    from training.scale.bench_clustering_eval import balance

    b = balance(tree["levels"][0])
    return {
        "level1_s": round(tree["level1_s"], 2),
        "level1_cpu_s": round(tree["level1_cpu_s"], 2),
        "tree_s": round(tree["tree_s"], 2),
        "peak_mb": tree["peak_mb"],
        "peak_exact": tree["peak_exact"],
        "levels": [len(g) for g in tree["levels"]],
        "clusters": b["clusters"],
        "sizes": f"{b['median']:g} / {b['p99']:g} / {b['max']}",
        "singletons": b["singletons"],
    }


def report(rows: list[dict], setup: dict, command: str) -> str:
    """The markdown report: setup and one table per size."""
    out = [
        "# Summary-layer clustering at scale",
        "",
        f"Command: `{command}`",
        "",
        f"Measured {setup['date']} on {setup['cpus']} CPU cores shared with other jobs "
        f"(load average {setup['load']} at the start); the whole run took {setup['minutes']} minutes. "
        "Wall seconds are inflated by the load, CPU seconds less so.",
        "",
        f"Corpus: the chunks of the passages of {setup['questions']} HotpotQA and 2Wiki questions "
        f"({setup['qa_chunks']} chunks, chunked as the KB chunks them), then real MiniLM vectors of "
        f"other texts from the embedding cache ({setup['pool']} of them), then those again with "
        "Gaussian noise (sigma 0.03, renormalized); each size says how many rows are which. "
        "Only questions whose passages are all in the corpus count. The cache grows as the project "
        "embeds more text, so the distractors (and the figures from 10,000 rows up) move between runs.",
        "",
        f"Run up to: {_caps_text(setup['caps'])}; two stages at every size. Ward keeps m^2/2 distances "
        "and flat k-means costs m * k * d an iteration with k = m/10, so their time or memory grows with m^2.",
        "",
        "Tree: k = round(m / 10) clusters at every level until a level holds at most 8 nodes, each "
        "method at every level; a node's vector is the normalized centroid of the chunks under it "
        "(the layers embed a summary instead). Descent: the summary route's own descent "
        "(`summary_context`, k = 3) over those nodes, from the top level or from level 1. Recall: "
        "the share of a question's supporting passages with a chunk among the 3 chunks returned; "
        "'reached by it': with a chunk under the level-1 nodes the descent from the top chose; "
        "'kept together': the share of questions whose supporting passages share a level-1 cluster. "
        "Every method runs on one thread. Peak MB: the most resident memory the level-1 clustering "
        "added, in its own process. 'code': what `hierarchy/layers/clustering.py` does at each "
        "level's size (Ward up to its WARD_MAX items, two stages above); below WARD_MAX it is the "
        "Ward row.",
        "",
    ]
    for n in sorted({r["size"] for r in rows}):
        ref = next(r for r in rows if r["size"] == n and "questions" in r)
        out += [
            f"## {n:,} rows",
            "",
            f"{ref['qa_chunks']} QA chunks, {ref['cached_distractors']} cached distractors, {ref['noisy']} noisy "
            f"copies; {ref['questions']} questions. Flat top-3 recall (no layers): {ref['recall_top']}.",
            "",
            "| " + " | ".join(h for h, _ in COLUMNS) + " |",
            "|" + "---|" * len(COLUMNS),
        ]
        for r in rows:
            if r["size"] == n and "questions" not in r:
                out.append("| " + " | ".join(str(r.get(key, "")) for _, key in COLUMNS) + " |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=DEFAULT_SIZES)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--ward-max", type=int, default=10_000)
    ap.add_argument("--minibatch-max", type=int, default=5_000)
    ap.add_argument("--faiss-max", type=int, default=30_000)
    ap.add_argument("--questions", type=int, default=None, help="questions per QA set (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        ap.error(f"unknown method(s) {', '.join(unknown)}: choose from {', '.join(METHODS)}")
    caps = {"ward": args.ward_max, "minibatch": args.minibatch_max, "faiss": args.faiss_max}
    load = [round(x, 2) for x in os.getloadavg()]  # before the run adds its own
    t0 = time.perf_counter()
    qa, pool = _inputs(args.questions, args.seed)
    rows = run(qa, pool, [int(s) for s in args.sizes.split(",")], methods, caps, seed=args.seed, log=_print)
    setup = {
        "date": _today(),
        "cpus": os.cpu_count(),
        "load": load,
        "questions": len(qa.questions),
        "qa_chunks": len(qa.vectors),
        "pool": len(pool),
        "caps": {m: caps[m] for m in methods if m in caps},
        "minutes": round((time.perf_counter() - t0) / 60, 1),
    }
    command = " ".join(["python -m training.scale.bench_clustering", *(sys.argv[1:] if argv is None else argv)])
    from engine.floor.base.files import atomic_write_text

    atomic_write_text(args.out, report(rows, setup, command))
    print(f"wrote {args.out}", file=sys.stderr)


def _inputs(questions: int | None, seed: int):
    """The QA corpus (chunk and question vectors through the embedder and its cache) and the
    cached distractors."""
    from engine.floor.embedder import get_embedder
    from training.scale.bench_clustering_eval import distractors, qa_corpus, text_keys
    from training.scale.bench_store import cached_vectors

    emb = get_embedder()
    qa = qa_corpus(lambda texts: emb.encode(texts, show_progress=False), questions)
    keys, cached = cached_vectors()
    exclude = text_keys(_all_qa_texts())
    pool = distractors(keys, cached, exclude, seed)
    return qa, pool


def _all_qa_texts() -> list[str]:
    """Every question and chunk text of the QA sets (all questions): none may be a distractor."""
    from hierarchy.chunking import chunk_document, chunk_embed_text
    from hierarchy.datasets import load_dataset
    from hierarchy.documents import Document
    from training.common.shared_data import SHARED_FILES, shared_data_dir
    from training.scale.bench_clustering_eval import QA_SETS

    texts = []
    for name in QA_SETS:
        ds = load_dataset(shared_data_dir() / SHARED_FILES[name])
        texts += [q.text for q in ds.questions]
        texts += [chunk_embed_text(c) for p in ds.passages for c in chunk_document(Document(p.id, p.title, p.text))]
    return texts


def _caps_text(caps: dict[str, int]) -> str:
    return ", ".join(f"{m} {n:,} rows (--{m}-max)" for m, n in caps.items()) or "no caps"


def _today() -> str:
    return time.strftime("%Y-%m-%d")


def _print(row: dict) -> None:
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
