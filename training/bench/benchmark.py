"""The benchmark of routing decisions: every way of choosing a route, side by side on the
same questions.

Running: the fixed routes (chunk, summary, logic) are the only systems that call the answering
LLM; the trained router scores every question (no LLM), a logistic-regression baseline is
fitted on the router's own training labels when its card lists label files that are on disk,
and the LLM is asked to choose the route (training.fitting.llm_router). The systems built from these
rows are described in training/bench/bench_analysis.py; the report is written by
training/bench/bench_report.py.

Cost-quality (RouteLLM): logic is the "strong" model, chunk the "weak" one. Sweeping a
threshold on P(logic) gives quality vs share of logic calls; AUC, APGR (average performance
gap recovered) and CPT(x%) (share of logic calls needed to recover x% of the gap) summarize
the curve (training/bench/cost_quality.py).

The cascade (router, then the structured self-check, then logic): each answer row keeps the
chunk ids it answered from, so the pipeline's self-check can be asked afterwards about the
router's cheap answers (training/bench/bench_cascade.py) and router+check scored from the rows.

Resumable: every (system, question) result is appended to <out>/results.jsonl as it finishes
and is skipped on a rerun with the same LLM, top-k and knowledge base; every LLM call also
goes through the on-disk cache. Heavy imports (matplotlib, the KB, the router) happen inside
functions.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from engine.floor.base.errors import LogicRouteError
from training.bench.bench_analysis import build_report, router_choices
from training.bench.bench_cascade import replay_self_checks
from training.bench.bench_data import (
    BenchConfig,
    Item,
    answer_style,
    build_or_open_kb,
    collect_items,
    import_labels,
    load_data,
    open_kbs,
    training_overlap,
)
from training.bench.bench_report import write_report
from training.common.answer_scores import answer_scores
from training.common.jsonl_store import JsonlStore, exclusive_folder
from training.fitting.llm_router import llm_route

RESULTS_FILE = "results.jsonl"


def result_key(row: dict) -> tuple:
    """A results.jsonl row counts only for a run with the same signature (sig: LLM, top-k, KB,
    logic settings): another setup answers again instead of reusing stale rows."""
    return row.get("kind"), row.get("system"), row.get("key"), json.dumps(row.get("sig"), sort_keys=True)


def _bar(total: int, desc: str, show: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="q", file=sys.stderr, disable=not show or total == 0, dynamic_ncols=True)


def _parallel(jobs: list, fn: Callable, workers: int, desc: str, show: bool) -> None:
    """Run fn(job) for every job, `workers` at a time; rows are saved by fn as they finish."""
    bar = _bar(len(jobs), desc, show)
    try:
        if workers <= 1:
            for j in jobs:
                fn(j)
                bar.update(1)
            return
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(fn, j) for j in jobs]
            for f in as_completed(futures):
                f.result()
                bar.update(1)
    finally:
        bar.close()


@dataclass
class Run:
    """What the steps of one benchmark run share."""

    cfg: BenchConfig
    items: dict[str, Item]
    rags: dict  # KB name -> RoutedRAG
    store: JsonlStore
    llm: object
    llm_name: str
    kb_fp: dict[str, str]
    logic_fp: str
    notes: list[str]

    def sig(self, it: Item, route: str) -> dict:
        # logic answers are reused only under the same LogicConfig (a changed default re-answers)
        extra = {"logic_cfg": self.logic_fp} if route == "logic" else {}
        return {"llm": self.llm_name, "k": self.cfg.k, "kb": self.kb_fp[it.kb], **extra}

    def reusable(self, row: dict | None) -> bool:
        return row is not None and not (row.get("error") and self.cfg.retry_errors)

    def stored(self, kind: str, system: str, key: str, sig: dict) -> dict | None:
        """The row of an earlier run with this kind, system, item key and signature, when reusable."""
        row = self.store.get(result_key({"kind": kind, "system": system, "key": key, "sig": sig}))
        return row if self.reusable(row) else None

    def parallel(self, jobs: list, fn: Callable, desc: str) -> None:
        """fn(job) for every job, cfg.concurrency at a time, with a progress bar."""
        _parallel(jobs, fn, self.cfg.concurrency, desc, self.cfg.show_progress)


def _answer_row(route: str, it: Item, sig: dict, ans=None, error: str | None = None, seconds: float = 0.0) -> dict:
    pred = ans.text if ans is not None else ""
    row = {
        "kind": "answer",
        "system": route,
        "key": it.key,
        "dataset": it.dataset,
        "id": it.id,
        "sig": sig,
        "pred": pred,
        **answer_scores(pred, it.answers),
        "route": route,
        "error": error,
    }
    if ans is not None:
        u = ans.usage
        row.update(
            llm_calls=u.llm_calls,
            prompt_tokens=u.prompt_tokens,
            completion_tokens=u.completion_tokens,
            cached_calls=u.cached_calls,
            seconds=round(u.seconds, 4),
            llm_seconds_uncached=round(u.llm_seconds_uncached, 3),
            flags=list(ans.flags),
            confidence=ans.trace.confidence,  # the model's certainty: router+confidence replays it
            # the chunks the route answered from: the self-check is replayed on them (bench_cascade)
            retrieved=[r["chunk_id"] for r in ans.trace.retrieved or [] if isinstance(r, dict) and "chunk_id" in r],
        )
    else:
        row.update(
            llm_calls=0,
            prompt_tokens=0,
            completion_tokens=0,
            cached_calls=0,
            seconds=round(seconds, 4),
            llm_seconds_uncached=0.0,
            flags=[],
        )
    return row


def answer_fixed_routes(run: Run, echo: Callable[[str], None]) -> tuple[dict[tuple[str, str], dict], int]:
    """(row per (route, item key), answers made now): rows of earlier runs and of label files
    are reused; the rest are answered and appended as they finish."""
    cfg = run.cfg
    imported = import_labels(cfg.labels, run.items, cfg.routes, run.llm_name, cfg.k, run.notes) if cfg.labels else {}
    fixed: dict[tuple[str, str], dict] = {}
    todo: list[tuple[str, Item]] = []
    for it in run.items.values():  # question-major: an interrupted run has every route for its first questions
        for r in cfg.routes:
            row = run.store.get(result_key({"kind": "answer", "system": r, "key": it.key, "sig": run.sig(it, r)}))
            if run.reusable(row):
                fixed[(r, it.key)] = row
            elif (r, it.key) in imported:
                fixed[(r, it.key)] = imported[(r, it.key)]
            else:
                todo.append((r, it))
    echo(
        f"{len(run.items)} questions x {len(cfg.routes)} routes: {len(todo)} to answer, "
        f"{len(run.items) * len(cfg.routes) - len(todo)} done before"
    )
    budget = None
    if cfg.logic_max_seconds is not None:
        from engine.core.pipeline import Budget

        budget = Budget(max_seconds=cfg.logic_max_seconds)

    def answer_job(job: tuple[str, Item]) -> None:
        r, it = job
        t0 = time.perf_counter()
        try:
            ans = run.rags[it.kb].answer(it.text, route=r, budget=budget)
            row = _answer_row(r, it, run.sig(it, r), ans)
        except LogicRouteError as e:  # one failed question must not stop the benchmark
            row = _answer_row(r, it, run.sig(it, r), error=f"{type(e).__name__}: {e}", seconds=time.perf_counter() - t0)
        run.store.append(row)
        fixed[(r, it.key)] = row

    _parallel(todo, answer_job, cfg.concurrency, "answers", cfg.show_progress)
    return fixed, len(todo)


def score_with_router(run: Run, router) -> tuple[dict, dict, float | None]:
    """(P(route) per item key, baseline routers' probabilities, router seconds per question).
    Without a router (none given and none loadable) the router systems are left out."""
    if router is None:
        try:
            router = next(iter(run.rags.values())).get_router()
        except (LogicRouteError, ImportError, OSError) as e:
            run.notes.append(f"no router ({type(e).__name__}: {e}): router systems left out")
            return {}, {}, None
    items = run.items
    texts = [it.text for it in items.values()]
    router.probs(texts[:1])  # warm-up: the embedder loads on its first batch
    t0 = time.perf_counter()
    plist = router.probs(texts)
    router_seconds = (time.perf_counter() - t0) / len(texts)
    probs = {key: dict(p) for key, p in zip(items, plist)}
    overlap = training_overlap(router.card or {}, items)
    if overlap:
        run.notes.append(
            f"{overlap} of {len(items)} benchmark questions are in the router's training label files "
            "(its card): router results on them are optimistic; use --offset past the training range"
        )
    baseline_probs = {}
    try:  # the logistic-regression baseline as a router, on the router's own labels and inputs
        from training.fitting.eval_router import logreg_router_probs

        lp = logreg_router_probs(router, texts)
    except (LogicRouteError, ImportError, OSError, ValueError, KeyError) as e:  # a baseline never stops the run
        lp = None
        run.notes.append(f"logreg baseline left out ({type(e).__name__}: {e})")
    if lp:
        baseline_probs["logreg"] = dict(zip(items, lp))
    missing = sorted({r for p in plist for r in p} - set(run.cfg.routes))
    if missing:
        run.notes.append(
            f"routes not run: {', '.join(missing)}; router decisions are restricted to {', '.join(run.cfg.routes)}"
        )
    return probs, baseline_probs, router_seconds


def ask_llm_router(run: Run) -> dict[str, dict]:
    """The LLM as router, a baseline: its call is routing cost, not answering. Row per item key."""
    cfg = run.cfg
    lsig = {"llm": run.llm_name, "routes": list(cfg.routes)}
    llm_routes: dict[str, dict] = {}
    todo = []
    for it in run.items.values():
        row = run.store.get(result_key({"kind": "llm_route", "system": "llm_router", "key": it.key, "sig": lsig}))
        if run.reusable(row):
            llm_routes[it.key] = row
        else:
            todo.append(it)

    def route_job(it: Item) -> None:
        d = llm_route(run.llm, it.text, cfg.routes)
        u = d.usage
        row = {
            "kind": "llm_route",
            "system": "llm_router",
            "key": it.key,
            "dataset": it.dataset,
            "id": it.id,
            "sig": lsig,
            "route": d.route,
            "error": d.error,
            "seconds": round(d.seconds, 4),
            "llm_calls": u.llm_calls,
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "cached": u.cached_calls == u.llm_calls > 0,
            "llm_seconds_uncached": round(u.llm_seconds_uncached, 3),
        }
        run.store.append(row)
        llm_routes[it.key] = row

    _parallel(todo, route_job, cfg.concurrency, "llm router", cfg.show_progress)
    return llm_routes


def _start(
    cfg: BenchConfig,
    out: Path,
    llm,
    make_kb: Callable | None,
    rag_factory: Callable | None,
    echo: Callable[[str], None],
) -> tuple[Run, list, dict]:
    """Data, knowledge bases, the answering side and the results file of a run; also the data
    files read and each KB's passages (for the report)."""
    notes: list[str] = []
    data = load_data(cfg)
    items, kb_passages = collect_items(cfg, data, notes)
    kbs, kb_fp = open_kbs(
        kb_passages, make_kb or build_or_open_kb, out, cfg.show_progress, echo, retrieval=cfg.retrieval
    )
    if llm is None:
        from engine.floor.llm.factory import make_llm

        llm = make_llm(cfg.llm_spec, cache=cfg.cache)
    style = answer_style(cfg, data)
    notes.append(f"answer style: {style}")
    if rag_factory is None:
        from engine.core.pipeline import RoutedRAG

        def rag_factory(kb):
            return RoutedRAG(
                kb=kb, llm=llm, k=cfg.k, checkpoint=cfg.checkpoint, style=style, logic_preset=cfg.logic_preset
            )

    rags = {name: rag_factory(kb) for name, kb in kbs.items()}
    for rag in rags.values():
        rag.retry_unanswered = False  # each route as it answers: the escalation systems are replayed on its rows
    store = JsonlStore(out / RESULTS_FILE, key=result_key)
    if store.bad_lines:
        notes.append(f"{store.bad_lines} unreadable line(s) in {RESULTS_FILE} ignored")
    from training.common.logic_experiment import logic_fingerprint

    logic_fp = logic_fingerprint(next(iter(rags.values())).logic_config()) if rags else ""
    run = Run(cfg, items, rags, store, llm, llm.name, kb_fp, logic_fp, notes)
    return run, data, kb_passages


def run_benchmark(
    cfg: BenchConfig,
    *,
    llm=None,
    router=None,
    make_kb: Callable | None = None,
    rag_factory: Callable | None = None,
    echo: Callable[[str], None] | None = None,
) -> dict:
    """Run (or resume) the benchmark and write report.json, report.md and the plots into
    cfg.out. llm / router / make_kb(path, passages, show_progress=) / rag_factory(kb) replace
    the real parts (tests)."""
    echo = echo or (lambda s: print(s, file=sys.stderr))
    with exclusive_folder(cfg.out, "benchmark run") as out:
        return _run_benchmark(cfg, out, llm, router, make_kb, rag_factory, echo)


def _run_benchmark(cfg: BenchConfig, out: Path, llm, router, make_kb, rag_factory, echo) -> dict:
    t_start = time.perf_counter()
    run, data, kb_passages = _start(cfg, out, llm, make_kb, rag_factory, echo)
    fixed, answered = answer_fixed_routes(run, echo)
    probs, baseline_probs, router_seconds = score_with_router(run, router)
    checks = None
    if probs and cfg.self_check and "logic" in cfg.routes:  # the cascade: router, self-check, logic
        texts = {k: it.text for k, it in run.items.items()}
        checks = replay_self_checks(run, fixed, router_choices(probs, cfg.routes, texts))
    llm_routes = ask_llm_router(run) if cfg.llm_router and len(cfg.routes) > 1 else {}
    report = build_report(cfg, run.items, fixed, probs, router_seconds, llm_routes, run.notes, baseline_probs, checks)
    report["datasets"] = {
        name: {
            "file": f,
            "questions": len(ds.questions),
            "passages": len(ds.passages),
            "kb": str(out / "kb" / (name if cfg.kb_per_dataset else "all")),
            "kb_passages": len(kb_passages[name if cfg.kb_per_dataset else "all"]),
        }
        for name, ds, f in data
    }
    report["seconds"] = round(time.perf_counter() - t_start, 2)
    report["answered_this_run"] = answered
    write_report(report, out, plots=cfg.plots)
    return report
