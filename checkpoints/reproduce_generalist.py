"""Rebuild the data behind checkpoints/generalist.ckpt (KBs + retrieval labels), then print
the training and evaluation commands. Run from the repository root:

    .venv/bin/python checkpoints/reproduce_generalist.py            # KBs + labels under runs/router/
    .venv/bin/logicroute train generalist --labels 'runs/router/labels/*_train.jsonl' \
        --eval-labels 'runs/router/labels/*_test.jsonl' --out checkpoints/generalist.ckpt
    .venv/bin/logicroute eval-router --labels 'runs/router/labels/*_test.jsonl' --json runs/router/eval.json

Per data set (the shared data folder, hierarchy.datasets.shared_data_dir): the first N questions
(SQuAD: every 26th question, so the
sample spans all 48 articles instead of the first two), KB = the passages of exactly those
questions (the data README's corpus rule) with extractive summary layers (no LLM), labels
from the LLM-free `retrieval` scorer for chunk, summary and logic; the first 80% of each
set's questions are training labels, the last 20% held out. Questions 0-99 of every file are
reserved for the benchmarks (`logicroute benchmark`, `logicroute bench-logic`, which take the first
questions of each file): they are in no training label file.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SETS = [  # shared data set name (hierarchy.datasets.SHARED_FILES), questions, stride
    ("nq", 400, 1),
    ("squad", 400, 26),
    ("hotpotqa", 400, 1),
    ("2wiki", 400, 1),
    ("musique", 200, 1),
]
HOLDOUT = 0.2
RESERVED = 100  # questions 0..99 of each file: benchmark questions, never trained on


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=None, help="shared data folder [default: hierarchy.datasets.shared_data_dir()]")
    ap.add_argument("--out", default=str(ROOT / "runs" / "router"))
    ap.add_argument("--only", nargs="*", help="data set names to do (default: all)")
    ap.add_argument("--routes", default="chunk,summary,logic")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(1)  # a shared 2-core machine: one thread avoids oversubscription stalls

    from engine.embedder import get_embedder
    from hierarchy.datasets import SHARED_FILES, shared_data_dir
    from hierarchy.kb import KnowledgeBase
    from hierarchy.layers.persist import load_layers
    from hierarchy.layers.update import build_layers
    from training.label_scorers import LabelConfig
    from training.labels import label_questions, select_questions
    from training.passage_kb import passages_kb

    emb = get_embedder()
    out = Path(args.out)
    routes = tuple(args.routes.split(","))
    cfg = LabelConfig(scorer="retrieval", routes=routes, k=3, lam=0.1, tau=0.1)
    data_dir = Path(args.data) if args.data else shared_data_dir()
    for name, n, stride in SETS:
        if args.only and name not in args.only:
            continue
        t0 = time.perf_counter()
        qs, ds, _ = select_questions(data_dir / SHARED_FILES[name], n=n, stride=stride)
        if stride > 1:  # the span read holds other questions' paragraphs: keep those of the questions taken
            keep = {s for q in qs for s in q.supporting}
            passages = [p for p in ds.passages if p.id in keep]
        else:
            passages = ds.passages
        kb_dir = out / "kb" / name
        if KnowledgeBase.exists(kb_dir):
            kb = KnowledgeBase.open(kb_dir, emb)
        else:
            kb = passages_kb(kb_dir, passages, emb, show_progress=True)
        if "summary" in routes and load_layers(kb) is None:
            build_layers(kb, summarizer="extractive", show_progress=True)
        cut = int(round(len(qs) * (1 - HOLDOUT)))
        idx = [i * stride for i in range(len(qs))]
        train = [i for i in range(cut) if idx[i] >= RESERVED]
        for part, pos in (("train", train), ("test", list(range(cut, len(qs))))):
            res = label_questions(
                [qs[i] for i in pos], kb, out / "labels" / f"{name}_{part}.jsonl", cfg, indices=[idx[i] for i in pos]
            )
            print(f"{name} {part}: {res}", file=sys.stderr)
        print(
            f"{name}: {len(qs)} questions, {len(passages)} passages, {len(kb)} chunks, {time.perf_counter() - t0:.0f}s",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
