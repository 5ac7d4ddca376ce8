"""Benchmark of the summary layers and the summary route (`logicroute bench-summary`).

Parts (each writes its own file under out_dir and is skipped when that file exists, unless
force=True; the QA part resumes per question from its JSONL files):

build        Extractive layers over the ~4,858 passages of HotpotQA dev500: a KB over 99% of
             the passages (every 100th passage held out), layers built on it, the held-out 1%
             added (add_documents updates the layers incrementally), then a full rebuild over
             all passages. Run twice: "cold" (each step with a fresh embedding cache: the worst
             case) and "warm" (one cache for all steps, as a user's default cache: the update
             re-embeds only new sentences and changed summaries). LLM tokens are 0 by
             construction. Printed beside the indexing costs graph-RAG systems report on
             2WikiMQA's ~6,000 passages (PUBLISHED below).
qa           Summary route vs chunk route (k=3) with the local LLM on the first n_hotpot
             HotpotQA dev500 questions and the first n_nq NQ-open questions: EM, F1, LLM tokens
             and wall seconds per question.
               corpus "full":  all HotpotQA dev500 passages + the passages of the first 500 NQ
                               questions; chunk vs summary (extractive layers).
               corpus "small": only the passages of the questions asked; chunk vs summary with
                               extractive layers vs summary with LLM-written layers (LLM
                               summaries take minutes per node on a CPU, so they are built on
                               this smaller corpus only).
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from engine.llm.base import DEFAULT_LLM
from hierarchy.datasets import SHARED_FILES, shared_data_dir
from training.jsonl_store import JsonlStore

HOTPOT = SHARED_FILES["hotpotqa"]
NQ = SHARED_FILES["nq"]
NQ_DISTRACTOR_QUESTIONS = 500
HOLDOUT_EVERY = 100  # 1% of the documents are added incrementally

# Indexing cost on 2WikiMQA (~6,000 passages) as published (figures quoted in the issue,
# from the LogicRAG paper's cost comparison): LLM tokens to build the graph, minutes.
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


def _docs(passages: Iterable[Any]) -> list:
    from hierarchy.documents import Document

    return [Document(p.id, p.title, p.text) for p in passages]


# ------------------------------------------------------------------------------ build cost


def _copy_cache(src: Path, dst: Path) -> None:
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
    from engine.embedder import Embedder
    from hierarchy.indexing import add_documents
    from hierarchy.kb import KnowledgeBase
    from hierarchy.layers.persist import load_layers
    from hierarchy.layers.update import build_layers

    if mode == "cold":
        kb_cache = chunk_cache
        caches = {step: work / f"cold_{step}" for step in ("build", "add", "rebuild")}
    else:
        kb_cache = work / "warm"
        _copy_cache(chunk_cache, kb_cache)  # the chunk vectors are not what is measured
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
    docs = _docs(ds.passages)
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


# ------------------------------------------------------------------------------ QA


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
    from engine.base.errors import KBNotFoundError
    from engine.embedder import Embedder
    from hierarchy.indexing import add_documents
    from hierarchy.kb import KnowledgeBase
    from hierarchy.layers.update import build_layers

    # Seeded from the build part's chunk vectors, so HotpotQA passages embed once; a cache of
    # its own, so the build part's incremental step never finds held-out passages cached.
    qa_cache = path.parent / "emb_cache_qa"
    if not qa_cache.exists() and (path.parent / "emb_cache_chunks").exists():
        _copy_cache(path.parent / "emb_cache_chunks", qa_cache)
    emb = Embedder(cache=qa_cache)
    try:
        kb = KnowledgeBase.open(path, emb)
    except KBNotFoundError:
        kb = KnowledgeBase.create(path, emb)
    docs = _docs(passages)
    if len(kb.doc_ids) != len(docs):
        add_documents(kb, docs, show_progress=show_progress)
    cost = build_layers(kb, summarizer, llm=llm, show_progress=show_progress)
    return kb, cost


def run_system(name: str, fn, questions: list, out_file: Path, show_progress: bool = True) -> list[dict]:
    """Answer every question not yet in out_file, appending one JSON line each; returns the
    rows of `questions`."""
    from engine.base.errors import LogicRouteError
    from engine.base.metrics import exact_match, f1

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
    from engine.llm.factory import make_llm
    from engine.routes.chunk import answer_chunk
    from engine.routes.summary import answer_summary

    # A cache of its own: a first run times real calls (not other runs' cache hits), a rerun resumes.
    llm = make_llm(llm_spec, cache=out_dir / "llm_cache.sqlite")
    questions, full, small = _questions(data_dir, n_hotpot, n_nq)
    result: dict = {"llm": llm_spec, "k": k, "questions": {"hotpotqa": n_hotpot, "nq": n_nq}, "corpora": {}}
    for corpus in corpora:
        passages = full if corpus == "full" else small
        kb, cost = _kb_with_layers(out_dir / f"kb_{corpus}", passages, "extractive", None, show_progress)
        systems = {
            "chunk": lambda q, kb=kb: answer_chunk(q, kb, llm, k=k),
            "summary_extractive": lambda q, kb=kb: answer_summary(q, kb, llm, k=k),
        }
        layer_costs = {"extractive": cost}
        if corpus == "small" and llm_summaries:
            kb_llm, cost_llm = _kb_with_layers(out_dir / f"kb_{corpus}_llm", passages, "llm", llm, show_progress)
            systems["summary_llm"] = lambda q, kb=kb_llm: answer_summary(q, kb, llm, k=k)
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


# ------------------------------------------------------------------------------ entry point


def main(
    out_dir: str | Path = "runs/bench_summary",
    *,
    parts: Iterable[str] = ("build", "qa"),
    n_hotpot: int = 30,
    build_modes: Iterable[str] = ("cold", "warm"),
    n_nq: int = 30,
    llm: str = DEFAULT_LLM,
    corpora: Iterable[str] = ("full", "small"),
    llm_summaries: bool = True,
    k: int = 3,
    data_dir: str | Path | None = None,
    force: bool = False,
    show_progress: bool = True,
) -> dict:
    """Run the selected parts; returns {"build": ..., "qa": ...} and writes
    out_dir/build.json, out_dir/qa.json, out_dir/report.md."""
    parts = tuple(parts)
    unknown = set(parts) - {"build", "qa"}
    if unknown:
        raise ValueError(f"unknown parts {sorted(unknown)}: choose from build, qa")
    if set(build_modes) - {"cold", "warm"}:
        raise ValueError(f"unknown build modes {sorted(set(build_modes))}: choose from cold, warm")
    corpora = tuple(corpora)
    if set(corpora) - {"full", "small"}:
        raise ValueError(f"unknown corpora {corpora}: choose from full, small")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = Path(data_dir) if data_dir else shared_data_dir()
    result: dict = {}
    report: list[str] = ["# Summary layers benchmark", ""]
    # a part not run this time (or build.json without --force) keeps its earlier result in the report
    f, q = out / "build.json", out / "qa.json"
    if "build" in parts and (force or not f.is_file()):
        result["build"] = bench_build(out, data, show_progress, modes=tuple(build_modes))
        f.write_text(json.dumps(result["build"], indent=2) + "\n")
    elif f.is_file():
        result["build"] = json.loads(f.read_text())
    if "qa" in parts:
        result["qa"] = bench_qa(
            out,
            data,
            n_hotpot=n_hotpot,
            n_nq=n_nq,
            llm_spec=llm,
            corpora=corpora,
            llm_summaries=llm_summaries,
            k=k,
            show_progress=show_progress,
        )
        q.write_text(json.dumps(result["qa"], indent=2) + "\n")
    elif q.is_file():
        result["qa"] = json.loads(q.read_text())
    if "build" in result:
        report += ["## Build cost", "", build_table(result["build"]), ""]
    if "qa" in result:
        report += ["## Summary route vs chunk route", "", qa_table(result["qa"]), ""]
    (out / "report.md").write_text("\n".join(report) + "\n")
    print("\n".join(report))
    return result
