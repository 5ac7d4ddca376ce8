"""Every routing path's decisions with the shipped checkpoint, as JSONL: the before/after check of
the one Decider (issue 63, item 1). Run on two commits, the outputs must be byte-identical.

    taskset -c 0 .venv/bin/python docs/results/router/decider/route_dump.py > OUT.jsonl

Questions: the hand-written routing tests' lists, the demo's questions, the list and docs-lookup
questions of training/data, and the first 100 questions of each shared set (../shared/data).
Paths: the engine's decision (argmax; a threshold calibrated on the batch; a fixed threshold; the
list gate off; a forced route), adapt's verdict, bench global's routed rows, eval-router's share
curve, the routing benchmark's choices, and LODO's router systems over label rows.

The engine's and the training callers' entry points are called as they are on both commits; LODO
composes inside a fold, so its composition is called through `lodo.router_systems` where that
exists, else through the original's lines, copied below (_lodo_before).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
SHARED = ("hotpotqa", "2wiki", "musique", "nq", "squad")
LABEL_SETS = ("nq", "hotpotqa", "lists", "musique")


def _rounded(x):
    if isinstance(x, float):
        return round(x, 6)
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_rounded(v) for v in x]
    return x


def emit(path: str, question: str, record: dict) -> None:
    print(json.dumps({"path": path, "question": question, **_rounded(record)}, ensure_ascii=False, sort_keys=True))


# the list sets the dump was first taken on (998 questions in all), so its hash stays comparable as
# sets are added; LIST_SETS=all reads every set of training/data/global_lists
LIST_SETS = ("node", "npm", "valgrind")
if os.environ.get("LIST_SETS") == "all":
    LIST_SETS = tuple(f.stem for f in (ROOT / "training" / "data" / "global_lists").glob("*.jsonl"))


def questions() -> list[str]:
    from hierarchy.datasets import load_dataset
    from tests.router import routing_questions as rq
    from tests.router import routing_questions_fresh as fresh
    from training.common.jsonl_store import read_jsonl
    from training.common.shared_data import resolve_data

    out = rq.ONE_HOP + rq.MULTI_HOP + fresh.ONE_HOP_FRESH + fresh.MULTI_HOP_FRESH
    out += [r["question"] for r in read_jsonl(ROOT / "engine" / "demo" / "questions.jsonl", strict=True)]
    for kind in ("global_lists", "docs_questions"):
        for f in sorted((ROOT / "training" / "data" / kind).glob("*.jsonl")):
            if kind != "global_lists" or f.stem in LIST_SETS:
                out += [r["question"] for r in read_jsonl(f, strict=True)]
    for name in SHARED:
        out += [q.text for q in load_dataset(resolve_data(name), n=100).questions]
    return list(dict.fromkeys(out))


def engine_paths(router, qs: list[str]) -> None:
    from engine.core.budget import Budget
    from engine.core.decide import decide_many, forced

    runs = {
        "argmax": dict(budget=None, ood_policy="chunk-escalate"),
        "argmax ood=route": dict(budget=None, ood_policy="route"),
        "share 0.3": dict(budget=Budget(logic_share=0.3), ood_policy="chunk-escalate"),
        "threshold 0.35": dict(budget=Budget(threshold=0.35, logic_share=0.2), ood_policy="logic"),
        "list_gate off": dict(budget=None, ood_policy="chunk-escalate", list_gate=False),
    }
    for name, kw in runs.items():
        for q, d in zip(qs, decide_many(router, qs, style="phrase", **kw)):
            emit(f"engine {name}", q, {"to_dict": d.to_dict(), "trace": d.trace(), "flag": d.flag})
    d = forced("logic")
    emit("engine forced", "", {"to_dict": d.to_dict(), "trace": d.trace()})


def training_paths(router, qs: list[str]) -> None:
    import numpy as np

    from training.adapt.adapt_verdict import decisions
    from training.bench.bench_analysis import router_choices
    from training.fitting.eval_router import decisions_at_share

    routes, far, probs = decisions(router, qs)
    emit("adapt verdict", "", {"far": far})
    for q, r, p in zip(qs, routes, probs):
        emit("adapt verdict", q, {"route": r, "probs": p})

    arr = np.array([[p[r] for r in router.routes] for p in probs])
    for share in (0.1, 0.3, 0.5):
        for q, r in zip(qs, decisions_at_share(arr, router.routes, share)):
            emit(f"eval-router share {share}", q, {"route": r})

    keyed = {str(i): p for i, p in enumerate(probs)}
    texts = {str(i): q for i, q in enumerate(qs)}
    for routes_run in (list(router.routes), ["chunk", "logic"]):
        for name, texts_given in (("forms", texts), ("no forms", None)):
            chosen = router_choices(keyed, routes_run, texts_given)
            for i, q in enumerate(qs):
                emit(f"bench routing {'+'.join(routes_run)} {name}", q, {"route": chosen[str(i)]})


def bench_global_path(embedder, qs: list[str]) -> None:
    from training.global_qa.bench_global_routed import route_questions

    items = [SimpleNamespace(id=str(i), text=q) for i, q in enumerate(qs)]
    decided = route_questions(items, None, embedder)
    for it in items:
        d = decided[it.id]
        emit("bench global", it.text, {"route": d["route"], "probs": d["probs"]})


def _lodo_before(probs, routes, questions, fired, on) -> dict[str, list[str]]:
    """training/fitting/lodo.py's _fold_decisions at 77bc4c3: the MLP's argmax, summary where the
    fold's gate fires on a KB of documents; "router+forms": logic where a form plan is read."""
    from hierarchy.question_forms import form_plan

    routed = [routes[i] for i in probs.argmax(1)]
    routed = [
        "summary" if p is not None and o else r for r, p, o in zip(routed, fired, on)
    ]  # LIST_ROUTE, as lodo keeps it
    return {"router": routed, "router+forms": ["logic" if form_plan(q) else r for q, r in zip(questions, routed)]}


def lodo_path(router) -> None:
    from training.common.jsonl_store import read_jsonl

    try:
        from training.fitting.lodo import router_systems
    except ImportError:
        router_systems = _lodo_before
    rows = []
    for name in LABEL_SETS:
        rows += list(read_jsonl(ROOT / "training" / "data" / "labels" / f"answer_{name}.jsonl", strict=True))[:40]
    questions = [r["question"] for r in rows]
    x = router.inputs(questions)
    probs = router.model.predict_proba(x)
    fired = router.gate.fires(x[:, : router.embed_dim], questions)
    on = [r.get("summary_mode") == "global" for r in rows]
    systems = router_systems(probs, list(router.routes), questions, fired, on)
    for i, q in enumerate(questions):
        emit("lodo", q, {name: routes[i] for name, routes in sorted(systems.items())})


def main() -> None:
    import torch

    from engine.floor.embedder import Embedder
    from router.checkpoint import load_router

    torch.set_num_threads(1)
    embedder = Embedder(cache=tempfile.mkdtemp(prefix="route-dump-emb-"))
    router = load_router(ROOT / "checkpoints" / "generalist.ckpt", embedder=embedder)
    qs = questions()
    print(f"{len(qs)} questions", file=sys.stderr)
    engine_paths(router, qs)
    training_paths(router, qs)
    bench_global_path(embedder, qs)
    lodo_path(router)


if __name__ == "__main__":
    main()
