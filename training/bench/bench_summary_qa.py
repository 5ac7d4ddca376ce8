"""The QA part of `logicroute bench summary` (training/bench/bench_summary.py runs the parts).

Summary route vs chunk route (k=3) with the local LLM on the first n_hotpot HotpotQA dev500
questions and the first n_nq NQ-open questions: EM, F1, LLM tokens and wall seconds per
question. Resumes per question from its JSONL files.
  corpus "full":  all HotpotQA dev500 passages + the passages of the first 500 NQ questions;
                  chunk vs summary (extractive layers).
  corpus "small": only the passages of the questions asked; chunk vs summary with extractive
                  layers vs summary with LLM-written layers (LLM summaries take minutes per
                  node on a CPU, so they are built on this smaller corpus only).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from engine.floor.llm.urls import redact
from training.bench.bench_summary_build import HOTPOT, copy_embedding_cache, passage_documents
from training.common.jsonl_store import JsonlStore
from training.common.shared_data import SHARED_FILES

NQ = SHARED_FILES["nq"]
NQ_DISTRACTOR_QUESTIONS = 500


def _questions(data_dir: Path, n_hotpot: int, n_nq: int) -> tuple[list, list, list]:
    """(questions asked, passages of the full corpus, passages of the small corpus)."""
    from hierarchy.datasets import load_dataset

    hp_all = load_dataset(data_dir / HOTPOT)
    nq_all = load_dataset(data_dir / NQ, n=max(NQ_DISTRACTOR_QUESTIONS, n_nq))
    hp_q = load_dataset(data_dir / HOTPOT, n=n_hotpot)
    nq_q = load_dataset(data_dir / NQ, n=n_nq)
    questions = hp_q.questions + nq_q.questions
    full = list({p.id: p for p in hp_all.passages + nq_all.passages}.values())
    small = list({p.id: p for p in hp_q.passages + nq_q.passages}.values())
    return questions, full, small


def _kb_with_layers(path: Path, passages: list, summarizer: str, llm: Any, show_progress: bool):
    """Open or create the KB at path with the given layers (resumable: reuses what exists)."""
    from engine.floor.base.errors import KBNotFoundError
    from engine.floor.embedder import Embedder
    from hierarchy.indexing import add_documents
    from hierarchy.kb import KnowledgeBase
    from hierarchy.layers.update import build_layers

    # Seeded from the build part's chunk vectors, so HotpotQA passages embed once; a cache of
    # its own, so the build part's incremental step never finds held-out passages cached.
    qa_cache = path.parent / "emb_cache_qa"
    if not qa_cache.exists() and (path.parent / "emb_cache_chunks").exists():
        copy_embedding_cache(path.parent / "emb_cache_chunks", qa_cache)
    emb = Embedder(cache=qa_cache)
    try:
        kb = KnowledgeBase.open(path, emb)
    except KBNotFoundError:
        kb = KnowledgeBase.create(path, emb)
    docs = passage_documents(passages)
    if len(kb.doc_ids) != len(docs):
        add_documents(kb, docs, show_progress=show_progress)
    cost = build_layers(kb, summarizer, llm=llm, show_progress=show_progress)
    return kb, cost


def run_system(name: str, fn, questions: list, out_file: Path, show_progress: bool = True) -> list[dict]:
    """Answer every question not yet in out_file, appending one JSON line each; returns the
    rows of `questions`."""
    from engine.floor.base.errors import LogicRouteError
    from engine.floor.base.metrics import f1
    from training.common.answer_scores import exact_match

    store = JsonlStore(out_file, key=lambda r: r.get("id"))
    todo = [q for q in questions if q.id not in store]
    bar = None
    if show_progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), desc=name, unit="q", file=sys.stderr)
    for q in todo:
        t = time.perf_counter()
        try:
            ans = fn(q.text)
            pred, usage, trace, err = ans.text, ans.usage.to_dict(), ans.trace, None
        except LogicRouteError as e:  # recorded, scored as wrong, never silently dropped
            pred, usage, trace, err = "", {}, {}, f"{type(e).__name__}: {e}"
        store.append(
            {
                "id": q.id,
                "dataset": q.dataset,
                "question": q.text,
                "golds": q.answers,
                "pred": pred,
                "em": exact_match(pred, q.answers),
                "f1": f1(pred, q.answers),
                "prompt_tokens": usage.get("prompt_tokens", 0),
                "completion_tokens": usage.get("completion_tokens", 0),
                "llm_calls": usage.get("llm_calls", 0),
                "cached_calls": usage.get("cached_calls", 0),
                "seconds": round(time.perf_counter() - t, 3),
                "chunk_ids": trace.get("chunk_ids") or [r["chunk_id"] for r in trace.get("retrieved", [])],
                "summary_ids": trace.get("summary_ids", []),
                "flags": trace.get("flags", []),
                "error": err,
            }
        )
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    ids = {q.id for q in questions}
    return [r for r in store.rows if r.get("id") in ids]


def pool(rows: list[dict]) -> dict:
    n = len(rows)
    if not n:
        return {"n": 0}
    mean = lambda k: round(sum(r[k] for r in rows) / n, 4)  # noqa: E731
    return {
        "n": n,
        "em": mean("em"),
        "f1": mean("f1"),
        "prompt_tokens": mean("prompt_tokens"),
        "completion_tokens": mean("completion_tokens"),
        "llm_calls": mean("llm_calls"),
        "seconds": mean("seconds"),
        "errors": sum(1 for r in rows if r.get("error")),
        "cached_calls": sum(r.get("cached_calls", 0) for r in rows),
    }


def bench_qa(
    out_dir: Path,
    data_dir: Path,
    *,
    n_hotpot: int,
    n_nq: int,
    llm_spec: str,
    corpora: tuple[str, ...],
    llm_summaries: bool,
    k: int,
    show_progress: bool,
) -> dict:
    from engine.core.routes import ChunkRoute, RouteContext, SummaryRoute, answer_on
    from engine.floor.llm.factory import make_llm

    # A cache of its own: a first run times real calls (not other runs' cache hits), a rerun resumes.
    llm = make_llm(llm_spec, cache=out_dir / "llm_cache.sqlite")
    questions, full, small = _questions(data_dir, n_hotpot, n_nq)
    result: dict = {"llm": redact(llm_spec), "k": k, "questions": {"hotpotqa": n_hotpot, "nq": n_nq}, "corpora": {}}
    for corpus in corpora:
        passages = full if corpus == "full" else small
        kb, cost = _kb_with_layers(out_dir / f"kb_{corpus}", passages, "extractive", None, show_progress)
        systems = {
            "chunk": lambda q, kb=kb: answer_on(ChunkRoute(), q, RouteContext(kb, llm, k)),
            "summary_extractive": lambda q, kb=kb: answer_on(SummaryRoute(), q, RouteContext(kb, llm, k)),
        }
        layer_costs = {"extractive": cost}
        if corpus == "small" and llm_summaries:
            kb_llm, cost_llm = _kb_with_layers(out_dir / f"kb_{corpus}_llm", passages, "llm", llm, show_progress)
            systems["summary_llm"] = lambda q, kb=kb_llm: answer_on(SummaryRoute(), q, RouteContext(kb, llm, k))
            layer_costs["llm"] = cost_llm
        entry: dict = {"passages": len(passages), "chunks": len(kb), "layer_costs": layer_costs, "systems": {}}
        for name, fn in systems.items():
            rows = run_system(f"{corpus}/{name}", fn, questions, out_dir / f"qa_{corpus}_{name}.jsonl", show_progress)
            entry["systems"][name] = {
                "all": pool(rows),
                **{ds: pool([r for r in rows if r["dataset"] == ds]) for ds in ("hotpotqa", "nq")},
            }
        result["corpora"][corpus] = entry
    return result


def qa_table(r: dict) -> str:
    lines = [
        "| corpus | system | set | n | EM | F1 | prompt tok | compl tok | s/question |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for corpus, e in r["corpora"].items():
        for name, s in e["systems"].items():
            for ds in ("hotpotqa", "nq", "all"):
                p = s.get(ds) or {}
                if p.get("n"):
                    lines.append(
                        f"| {corpus} | {name} | {ds} | {p['n']} | {p['em']:.3f} | {p['f1']:.3f} | "
                        f"{p['prompt_tokens']:.0f} | {p['completion_tokens']:.1f} | {p['seconds']:.1f} |"
                    )
    return "\n".join(lines)
