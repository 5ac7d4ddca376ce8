"""The benchmark of routing decisions: every way of choosing a route, side by side on the
same questions.

Systems
- fixed routes (chunk, summary, logic): the only systems that call the answering LLM;
- router: the trained MLP, argmax, and at P(logic) thresholds (router.policy);
- logreg: logistic regression fitted on the router's own training labels and inputs (argmax),
  when the router's card lists label files that are on disk;
- oracle: per question the route with the best score (ties: fewer tokens, then the cheaper
  route), from the fixed routes' per-question results;
- random: routes drawn (seeded) with the router's route shares;
- llm_router: the LLM asked to choose the route (JSON schema); its call's tokens and latency
  are added to the answer it picks.
Router-decided systems reuse the fixed routes' answers: nothing is answered twice.

Cost-quality (RouteLLM): logic is the "strong" model, chunk the "weak" one. Sweeping a
threshold on P(logic) gives quality vs share of logic calls; AUC, APGR (average performance
gap recovered) and CPT(x%) (share of logic calls needed to recover x% of the gap) summarize
the curve (training/cost_quality.py). The report is written by training/bench_report.py.

Resumable: every (system, question) result is appended to <out>/results.jsonl as it finishes
and is skipped on a rerun with the same LLM, top-k and knowledge base; every LLM call also
goes through the on-disk cache. Heavy imports (matplotlib, the KB, the router) happen inside
functions.
"""
from __future__ import annotations

import hashlib
import json
import random
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from engine.errors import LogicRouteError
from engine.llm import DEFAULT_LLM
from training.bench_report import write_report
from training.cost_quality import cost_quality
from engine.prompts import llm_router_messages, llm_router_schema

ROUTES = ("chunk", "summary", "logic")
METRICS = ("em", "f1", "string_acc")
STRONG, WEAK = "logic", "chunk"
DEFAULT_THRESHOLDS = (0.25, 0.5, 0.75)
RESULTS_FILE = "results.jsonl"


@dataclass
class BenchConfig:
    """One benchmark run; stored in report.json."""

    data: list[str]
    out: str
    n: int | None = field(default=50, metadata={"help": "questions per data file (None = all)"})
    offset: int = field(default=0, metadata={"help": "first question taken from each file"})
    kb_per_dataset: bool = field(default=False, metadata={
        "help": "one KB per data file (its questions' passages); otherwise one KB over all of them"})
    kb_questions: int | None = field(default=None, metadata={
        "help": "KB = the passages of the first max(n, kb_questions) questions from offset (more distractors; "
                "None = those of the n questions, the data README's corpus rule)"})
    llm_spec: str = DEFAULT_LLM
    checkpoint: str | None = field(default=None, metadata={"help": "router checkpoint (None: shipped generalist)"})
    labels: list[str] = field(default_factory=list, metadata={
        "help": "label files (answer scorer) whose per-route answers stand in for fixed-route runs"})
    routes: tuple[str, ...] = ROUTES
    thresholds: tuple[float, ...] = DEFAULT_THRESHOLDS
    metric: str = field(default="f1", metadata={"help": "oracle and cost-quality metric: em | f1 | string_acc"})
    seed: int = 0
    k: int = 3
    concurrency: int = 1
    logic_max_seconds: float | None = field(default=1800.0, metadata={
        "help": "wall-clock cap of one logic answer (the route's own default, 300 s, makes results depend on "
                "machine load); None = the route's default"})
    llm_router: bool = True
    cache: bool = True
    retry_errors: bool = False
    show_progress: bool = True
    plots: bool = True

    def __post_init__(self) -> None:
        bad = [r for r in self.routes if r not in ROUTES]
        if bad or not self.routes:
            raise LogicRouteError(f"unknown route(s) {bad}: choose from {', '.join(ROUTES)}")
        if self.metric not in METRICS:
            raise LogicRouteError(f"unknown metric {self.metric!r}: choose {', '.join(METRICS)}")
        if any(not 0.0 <= t <= 1.0 for t in self.thresholds):
            raise LogicRouteError(f"thresholds must be in [0, 1], got {list(self.thresholds)}")
        self.routes = tuple(r for r in ROUTES if r in self.routes)  # cheapest first


# ============================================================ per-question results -> tables


def summarize(results: Sequence[dict], routes: Sequence[str]) -> dict:
    """Means of the per-question results of one system in one scope."""
    n = len(results)
    if n == 0:
        return {"n": 0}

    def mean(key: str) -> float:
        return sum(float(r.get(key) or 0.0) for r in results) / n

    out: dict[str, Any] = {"n": n}
    for m in METRICS:
        out[m] = mean(m)
    for c in ("llm_calls", "prompt_tokens", "completion_tokens", "seconds", "llm_seconds_uncached"):
        out[c] = mean(c)
    out["routes"] = {r: sum(1 for x in results if x.get("route") == r) / n for r in routes}
    out["errors"] = sum(1 for x in results if x.get("error"))
    out["cached_calls"] = sum(int(x.get("cached_calls") or 0) for x in results)
    return out


def confusion(pred: Sequence[str], true: Sequence[str], labels: Sequence[str]) -> dict:
    """matrix[i][j] = questions routed to labels[i] whose oracle route is labels[j]."""
    idx = {r: i for i, r in enumerate(labels)}
    m = [[0] * len(labels) for _ in labels]
    for p, t in zip(pred, true):
        if p in idx and t in idx:
            m[idx[p]][idx[t]] += 1
    agree = sum(m[i][i] for i in range(len(labels)))
    return {"labels": list(labels), "matrix": m, "agreement": agree / len(pred) if pred else None}


def oracle_choice(rows: dict[str, dict], metric: str, routes: Sequence[str]) -> str:
    """Best route by `metric`; ties go to fewer tokens, then the cheaper route."""
    return max(routes, key=lambda r: (float(rows[r].get(metric) or 0.0),
                                      -(int(rows[r].get("prompt_tokens") or 0) + int(rows[r].get("completion_tokens") or 0)),
                                      -routes.index(r)))


# ============================================================ the results file


class ResultStore:
    """Append-only JSONL of per-(kind, system, question) rows; a rerun reads it back.

    A row only counts for a run with the same signature (LLM, top-k, KB): a different setup
    answers again instead of reusing stale rows. A torn line (an interrupted write) is
    skipped, and appends start on a fresh line."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self.rows: dict[tuple, dict] = {}
        self.bad_lines = 0
        if self.path.exists():
            raw = self.path.read_bytes()
            for line in raw.split(b"\n"):
                if line.strip():
                    try:
                        row = json.loads(line)
                    except ValueError:
                        self.bad_lines += 1
                        continue
                    self.rows[self._key(row)] = row
            if raw and not raw.endswith(b"\n"):
                with open(self.path, "ab") as f:  # appends must start on a fresh line
                    f.write(b"\n")

    @staticmethod
    def _key(row: dict) -> tuple:
        return row.get("kind"), row.get("system"), row.get("key"), json.dumps(row.get("sig"), sort_keys=True)

    def get(self, kind: str, system: str, key: str, sig: dict) -> dict | None:
        return self.rows.get((kind, system, key, json.dumps(sig, sort_keys=True)))

    def append(self, row: dict) -> None:
        line = json.dumps(row, ensure_ascii=False) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
            self.rows[self._key(row)] = row


# ============================================================ data, knowledge bases


@dataclass
class Item:
    """One benchmark question."""

    key: str
    dataset: str
    id: str
    text: str
    answers: list[str]
    type: str | None
    kb: str  # which KB answers it


def fingerprint(ids: Sequence[str]) -> str:
    return hashlib.sha1("\n".join(sorted(ids)).encode()).hexdigest()[:12]


def load_data(cfg: BenchConfig) -> list[tuple[str, Any, str]]:
    """[(unique dataset name, Dataset, file)]; two files with one format name get suffixes."""
    from training.data import load_dataset

    out, seen = [], {}
    for path in cfg.data:
        ds = load_dataset(path, cfg.n, cfg.offset)
        if not ds.questions:
            raise LogicRouteError(f"{path}: no questions at offset {cfg.offset}")
        name = ds.name
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name}-{seen[name]}"
        out.append((name, ds, str(path)))
    return out


def build_or_open_kb(path: Path, passages: Sequence, *, show_progress: bool = True):
    """A KB of exactly these passages (doc id = passage id) with extractive summary layers,
    built under `path` once and reused while the passages are the same."""
    from hierarchy.documents import Document
    from hierarchy.kb import KnowledgeBase
    from hierarchy.layers import build_layers

    marker = path.parent / f"{path.name}.bench.json"
    fp = fingerprint([p.id for p in passages])
    if (path / "manifest.json").exists() and marker.exists():
        try:
            same = json.loads(marker.read_text()).get("passages") == fp
        except ValueError:
            same = False
        if same:
            kb = KnowledgeBase.open(path)
            if (path / "layers").exists():
                return kb
            build_layers(kb, summarizer="extractive", show_progress=show_progress)
            return kb
    kb = KnowledgeBase.create(path, overwrite=True)
    kb.add([Document(id=p.id, title=p.title, text=p.text) for p in passages], show_progress=show_progress)
    build_layers(kb, summarizer="extractive", show_progress=show_progress)
    from engine.io import atomic_write_json

    atomic_write_json(marker, {"passages": fp, "n_passages": len(passages)})
    return kb


# ============================================================ running


def _bar(total: int, desc: str, show: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="q", file=sys.stderr, disable=not show or total == 0,
                dynamic_ncols=True)


def _parallel(jobs: list, fn: Callable, workers: int, bar) -> None:
    """Run fn(job) for every job, `workers` at a time; rows are saved by fn as they finish."""
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


def _answer_row(route: str, it: Item, sig: dict, ans=None, error: str | None = None,
                seconds: float = 0.0) -> dict:
    from training.metrics import exact_match, f1, string_acc

    pred = ans.text if ans is not None else ""
    row = {"kind": "answer", "system": route, "key": it.key, "dataset": it.dataset, "id": it.id, "sig": sig,
           "pred": pred, "em": exact_match(pred, it.answers), "f1": f1(pred, it.answers),
           "string_acc": string_acc(pred, it.answers), "route": route, "error": error}
    if ans is not None:
        u = ans.usage
        row.update(llm_calls=u.llm_calls, prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens,
                   cached_calls=u.cached_calls, seconds=round(u.seconds, 4),
                   llm_seconds_uncached=round(u.llm_seconds_uncached, 3), flags=list(ans.flags))
    else:
        row.update(llm_calls=0, prompt_tokens=0, completion_tokens=0, cached_calls=0, seconds=round(seconds, 4),
                   llm_seconds_uncached=0.0, flags=[])
    return row


def import_labels(files: Sequence[str], items: dict[str, Item], routes: Sequence[str], llm_name: str,
                  k: int, notes: list[str]) -> dict[tuple[str, str], dict]:
    """Per-route answers of answer-scorer label rows (same LLM and k), keyed (route, item key)."""
    from training.labels import read_labels
    from training.metrics import exact_match, f1, string_acc

    got: dict[tuple[str, str], dict] = {}
    for path in files:
        rows = read_labels(path)
        used = skipped = 0
        for row in rows:
            key = f"{row.get('dataset')}:{row.get('id')}"
            it = items.get(key)
            if it is None:
                continue
            if row.get("scorer") != "answer" or row.get("llm") != llm_name or row.get("k") != k:
                skipped += 1
                continue
            for r in routes:
                pred = (row.get("answers_pred") or {}).get(r)
                cost = (row.get("costs") or {}).get(r)
                if pred is None or cost is None:
                    continue
                got[(r, key)] = {
                    "kind": "answer", "system": r, "key": key, "dataset": it.dataset, "id": it.id, "route": r,
                    "pred": pred, "em": exact_match(pred, it.answers), "f1": f1(pred, it.answers),
                    "string_acc": string_acc(pred, it.answers), "error": (row.get("errors") or {}).get(r),
                    "llm_calls": cost.get("llm_calls", 0), "prompt_tokens": cost.get("prompt_tokens", 0),
                    "completion_tokens": cost.get("completion_tokens", 0),
                    "cached_calls": cost.get("cached_calls", 0), "seconds": cost.get("seconds", 0.0),
                    "source": f"labels:{path}"}
                used += 1
        notes.append(f"labels {path}: {used} route answers reused"
                     + (f"; {skipped} matching rows skipped (not answer-scorer rows of {llm_name}, k={k})"
                        if skipped else ""))
    return got


def run_benchmark(cfg: BenchConfig, *, llm=None, router=None, make_kb: Callable | None = None,
                  rag_factory: Callable | None = None, echo: Callable[[str], None] | None = None) -> dict:
    """Run (or resume) the benchmark and write report.json, report.md and the plots into
    cfg.out. llm / router / make_kb(path, passages, show_progress=) / rag_factory(kb) replace
    the real parts (tests)."""
    echo = echo or (lambda s: print(s, file=sys.stderr))
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    t_start = time.perf_counter()

    # ---- data and knowledge bases
    data = load_data(cfg)
    make_kb = make_kb or build_or_open_kb
    items: dict[str, Item] = {}
    kb_passages: dict[str, dict] = {}
    for name, ds, path in data:
        kb_name = name if cfg.kb_per_dataset else "all"
        kb_ds = ds
        if cfg.kb_questions and (cfg.n is not None and cfg.kb_questions > cfg.n):
            from training.data import load_dataset

            kb_ds = load_dataset(path, cfg.kb_questions, cfg.offset)
        kb_passages.setdefault(kb_name, {}).update({p.id: p for p in kb_ds.passages})
        for q in ds.questions:
            key = f"{name}:{q.id}"
            if key in items:
                notes.append(f"{name}: duplicate question id {q.id} taken once")
                continue
            items[key] = Item(key, name, str(q.id), q.text, list(q.answers), q.type, kb_name)
    kbs, kb_fp = {}, {}
    for kb_name, passages in kb_passages.items():
        echo(f"knowledge base {kb_name}: {len(passages)} passages")
        kbs[kb_name] = make_kb(out / "kb" / kb_name, list(passages.values()), show_progress=cfg.show_progress)
        kb_fp[kb_name] = fingerprint(list(passages))

    # ---- the answering side
    if llm is None:
        from engine.llm import make_llm

        llm = make_llm(cfg.llm_spec, cache=cfg.cache)
    llm_name = getattr(llm, "name", cfg.llm_spec)
    if rag_factory is None:
        from engine.pipeline import RoutedRAG

        def rag_factory(kb):
            return RoutedRAG(kb=kb, llm=llm, k=cfg.k, checkpoint=cfg.checkpoint)
    rags = {name: rag_factory(kb) for name, kb in kbs.items()}
    store = ResultStore(out / RESULTS_FILE)
    if store.bad_lines:
        notes.append(f"{store.bad_lines} unreadable line(s) in {RESULTS_FILE} ignored")

    logic_fp = next(iter(rags.values())).logic_config().fingerprint() if rags else ""

    def sig(it: Item, route: str) -> dict:
        # logic answers are reused only under the same LogicConfig (a changed default re-answers)
        extra = {"logic_cfg": logic_fp} if route == "logic" else {}
        return {"llm": llm_name, "k": cfg.k, "kb": kb_fp[it.kb], **extra}

    # ---- fixed routes (the only answering LLM calls)
    imported = import_labels(cfg.labels, items, cfg.routes, llm_name, cfg.k, notes) if cfg.labels else {}
    fixed: dict[tuple[str, str], dict] = {}
    todo: list[tuple[str, Item]] = []
    for it in items.values():  # question-major: an interrupted run has every route for its first questions
        for r in cfg.routes:
            row = store.get("answer", r, it.key, sig(it, r))
            if row is not None and not (row.get("error") and cfg.retry_errors):
                fixed[(r, it.key)] = row
            elif (r, it.key) in imported:
                fixed[(r, it.key)] = imported[(r, it.key)]
            else:
                todo.append((r, it))
    echo(f"{len(items)} questions x {len(cfg.routes)} routes: {len(todo)} to answer, "
         f"{len(items) * len(cfg.routes) - len(todo)} done before")

    budget = None
    if cfg.logic_max_seconds is not None:
        from engine.pipeline import Budget

        budget = Budget(max_seconds=cfg.logic_max_seconds)

    def answer_job(job: tuple[str, Item]) -> None:
        r, it = job
        t0 = time.perf_counter()
        try:
            ans = rags[it.kb].answer(it.text, route=r, budget=budget)
            row = _answer_row(r, it, sig(it, r), ans)
        except LogicRouteError as e:  # one failed question must not stop the benchmark
            row = _answer_row(r, it, sig(it, r), error=f"{type(e).__name__}: {e}", seconds=time.perf_counter() - t0)
        store.append(row)
        fixed[(r, it.key)] = row

    bar = _bar(len(todo), "answers", cfg.show_progress)
    try:
        _parallel(todo, answer_job, cfg.concurrency, bar)
    finally:
        bar.close()

    # ---- the trained router (no LLM)
    probs: dict[str, dict[str, float]] = {}
    baseline_probs: dict[str, dict[str, dict[str, float]]] = {}
    router_seconds = None
    if router is None:
        try:
            router = next(iter(rags.values())).get_router()
        except (LogicRouteError, ImportError, OSError) as e:
            notes.append(f"no router ({type(e).__name__}: {e}): router systems left out")
            router = None
    if router is not None:
        texts = [it.text for it in items.values()]
        router.probs(texts[:1])  # warm-up: the embedder loads on its first batch
        t0 = time.perf_counter()
        plist = router.probs(texts)
        router_seconds = (time.perf_counter() - t0) / len(texts)
        probs = {key: dict(p) for key, p in zip(items, plist)}
        overlap = training_overlap(getattr(router, "card", None) or {}, items)
        if overlap:
            notes.append(f"{overlap} of {len(items)} benchmark questions are in the router's training label files "
                         "(its card): router results on them are optimistic; use --offset past the training range")
        try:  # the logistic-regression baseline as a router, on the router's own labels and inputs
            from training.eval_router import logreg_router_probs

            lp = logreg_router_probs(router, texts)
        except (LogicRouteError, ImportError, OSError, ValueError, KeyError) as e:  # a baseline never stops the run
            lp = None
            notes.append(f"logreg baseline left out ({type(e).__name__}: {e})")
        if lp:
            baseline_probs["logreg"] = dict(zip(items, lp))
        missing = sorted({r for p in plist for r in p} - set(cfg.routes))
        if missing:
            notes.append(f"routes not run: {', '.join(missing)}; router decisions are restricted to "
                         f"{', '.join(cfg.routes)}")

    # ---- the LLM as router (a baseline: its call is routing cost, not answering)
    llm_routes: dict[str, dict] = {}
    if cfg.llm_router and len(cfg.routes) > 1:
        lr_todo = []
        for it in items.values():
            lsig = {"llm": llm_name, "routes": list(cfg.routes)}
            row = store.get("llm_route", "llm_router", it.key, lsig)
            if row is not None and not (row.get("error") and cfg.retry_errors):
                llm_routes[it.key] = row
            else:
                lr_todo.append(it)

        def route_job(it: Item) -> None:
            from engine.llm import call_llm
            from engine.types import Usage

            lsig = {"llm": llm_name, "routes": list(cfg.routes)}
            usage, trace = Usage(), {}
            t0 = time.perf_counter()
            try:
                c = call_llm(llm, llm_router_messages(it.text, cfg.routes), purpose="route", usage=usage,
                             trace=trace, schema=llm_router_schema(cfg.routes), max_tokens=16)
                route, error = c.data["route"], None
            except LogicRouteError as e:
                route, error = cfg.routes[0], f"{type(e).__name__}: {e}"  # cheapest route, visibly
            row = {"kind": "llm_route", "system": "llm_router", "key": it.key, "dataset": it.dataset, "id": it.id,
                   "sig": lsig, "route": route, "error": error, "seconds": round(time.perf_counter() - t0, 4),
                   "llm_calls": usage.llm_calls, "prompt_tokens": usage.prompt_tokens,
                   "completion_tokens": usage.completion_tokens, "cached": usage.cached_calls == usage.llm_calls > 0,
                   "llm_seconds_uncached": round(usage.llm_seconds_uncached, 3)}
            store.append(row)
            llm_routes[it.key] = row

        bar = _bar(len(lr_todo), "llm router", cfg.show_progress)
        try:
            _parallel(lr_todo, route_job, cfg.concurrency, bar)
        finally:
            bar.close()

    report = build_report(cfg, items, fixed, probs, router_seconds, llm_routes, notes, baseline_probs)
    report["datasets"] = {name: {"file": f, "questions": len(ds.questions), "passages": len(ds.passages),
                                 "kb": str(out / "kb" / (name if cfg.kb_per_dataset else "all")),
                                 "kb_passages": len(kb_passages[name if cfg.kb_per_dataset else "all"])}
                          for name, ds, f in data}
    report["seconds"] = round(time.perf_counter() - t_start, 2)
    report["answered_this_run"] = len(todo)
    write_report(report, out, plots=cfg.plots)
    return report


def training_overlap(card: dict, items: dict[str, "Item"]) -> int:
    """How many benchmark questions the router was trained on, by (dataset, id) in the label
    files its card lists (those still readable; paths relative to the cwd or the repository)."""
    from training.labels import read_labels

    repo = Path(__file__).resolve().parents[1]
    wanted = {(it.dataset, it.id) for it in items.values()}
    seen: set[tuple[str, str]] = set()
    for lf in (card.get("training") or {}).get("label_files") or []:
        p = Path(lf.get("path", "") if isinstance(lf, dict) else str(lf))
        p = p if p.is_absolute() or p.exists() else repo / p
        try:
            rows = read_labels(p) if p.is_file() else []
        except LogicRouteError:
            continue
        seen |= {(str(r.get("dataset")), str(r.get("id"))) for r in rows} & wanted
    return len(seen)


# ============================================================ systems and the report


def _restricted(p: dict[str, float], routes: Sequence[str]) -> dict[str, float]:
    """Probabilities over the routes that were run, in their order (ties: cheaper)."""
    return {r: float(p.get(r, 0.0)) for r in routes}


def build_report(cfg: BenchConfig, items: dict[str, Item], fixed: dict[tuple[str, str], dict],
                 probs: dict[str, dict[str, float]], router_seconds: float | None,
                 llm_routes: dict[str, dict], notes: list[str],
                 baseline_probs: dict[str, dict[str, dict[str, float]]] | None = None) -> dict:
    """Every system's per-question results, tables per dataset and pooled, confusion
    matrices and the cost-quality analysis. Pure: reads rows, runs nothing."""
    from router.policy import Policy, decide

    routes = list(cfg.routes)
    keys = list(items)
    per_route = {k: {r: fixed[(r, k)] for r in routes} for k in keys}
    oracle = {k: oracle_choice(per_route[k], cfg.metric, routes) for k in keys}

    choices: dict[str, dict[str, str]] = {r: {k: r for k in keys} for r in routes}
    overhead: dict[str, dict[str, dict]] = {}
    if probs:
        choices["router"] = {k: decide(_restricted(probs[k], routes)) for k in keys}
        overhead["router"] = {k: {"seconds": router_seconds or 0.0} for k in keys}
        if "logic" in routes and len(routes) > 1:
            for t in cfg.thresholds:
                pol = Policy(kind="threshold", route="logic", threshold=t)
                name = f"router@{t:.2f}"
                # the threshold is on the router's own P(logic); the rest by argmax
                choices[name] = {k: decide({**_restricted(probs[k], routes), "logic": probs[k].get("logic", 0.0)},
                                           pol) for k in keys}
                overhead[name] = overhead["router"]
    for name, bp in (baseline_probs or {}).items():  # other scoring routers (logreg), argmax
        choices[name] = {k: decide(_restricted(bp[k], routes)) for k in keys}
        overhead[name] = overhead.get("router", {k: {"seconds": 0.0} for k in keys})
    escalated: dict[str, str] = {}
    if "router" in choices and STRONG in routes:
        # escalation's text rule (engine.pipeline), replayed on the fixed rows: a cheap answer
        # that says it does not know is answered again by logic, and pays for both
        from engine.pipeline import looks_unanswered

        choices["router+escalate"] = {}
        for k in keys:
            r = choices["router"][k]
            if r != STRONG and looks_unanswered(str(per_route[k][r].get("pred") or "")):
                escalated[k] = r
                r = STRONG
            choices["router+escalate"][k] = r
        overhead["router+escalate"] = overhead["router"]
    choices["oracle"] = oracle
    # random routing with the router's shares (uniform without a router), seeded
    if "router" in choices:
        counts = [sum(1 for k in keys if choices["router"][k] == r) for r in routes]
    else:
        counts = [1] * len(routes)
        notes.append("random: uniform route shares (no router to copy shares from)")
    rng = random.Random(cfg.seed)
    choices["random"] = dict(zip(keys, rng.choices(routes, weights=counts, k=len(keys)) if sum(counts) else
                                 [routes[0]] * len(keys)))
    if llm_routes:
        choices["llm_router"] = {k: llm_routes[k]["route"] if llm_routes[k]["route"] in routes else routes[0]
                                 for k in keys}
        overhead["llm_router"] = {k: llm_routes[k] for k in keys}

    def result(system: str, k: str) -> dict:
        r = choices[system][k]
        row = per_route[k][r]
        res = {m: float(row.get(m) or 0.0) for m in METRICS}
        for c in ("llm_calls", "prompt_tokens", "completion_tokens", "seconds", "cached_calls", "llm_seconds_uncached"):
            res[c] = float(row.get(c) or 0.0)
        res["route"], res["error"] = r, row.get("error")
        extras = [overhead.get(system, {}).get(k)]  # routing cost: the LLM router's call, the MLP's seconds
        if system == "router+escalate" and k in escalated:
            extras.append(per_route[k][escalated[k]])  # the first, cheap attempt
        for extra in filter(None, extras):
            for c in ("llm_calls", "prompt_tokens", "completion_tokens", "seconds", "llm_seconds_uncached"):
                res[c] += float(extra.get(c) or 0.0)
        return res

    scopes: dict[str, list[str]] = {}
    for k in keys:
        scopes.setdefault(items[k].dataset, []).append(k)
    if len(scopes) > 1:
        scopes["pooled"] = keys
    else:  # one dataset: its table is the pooled one
        scopes = {"pooled": keys, **scopes}

    systems = {scope: {s: summarize([result(s, k) for k in ks], routes) for s in choices}
               for scope, ks in scopes.items()}
    conf = {}
    for scope, ks in scopes.items():
        conf[scope] = {}
        for s in ("router", "llm_router"):
            if s in choices:
                conf[scope][f"{s}_vs_oracle"] = confusion([choices[s][k] for k in ks], [oracle[k] for k in ks],
                                                          routes)
    cq = {}
    if STRONG in routes and WEAK in routes:
        for scope, ks in scopes.items():
            strong = [float(per_route[k][STRONG].get(cfg.metric) or 0.0) for k in ks]
            weak = [float(per_route[k][WEAK].get(cfg.metric) or 0.0) for k in ks]
            p = [probs[k].get("logic", 0.0) for k in ks] if probs else None
            a = cost_quality(p if p is not None else [0.0] * len(ks), strong, weak)
            if p is None:
                del a["router"]
            # the 3-route systems as points: share of logic calls, quality on the metric
            a["points"] = {s: {"share": systems[scope][s]["routes"].get(STRONG, 0.0),
                               "quality": systems[scope][s][cfg.metric]}
                           for s in choices if s not in (STRONG, WEAK)}
            cq[scope] = a
    else:
        notes.append("cost-quality analysis needs the chunk and logic routes")

    lr = None
    if llm_routes:
        secs = [float(r["seconds"]) for r in llm_routes.values() if not r.get("cached")]
        # a cached decision still knows what its call took when it was made
        original = [float(r["llm_seconds_uncached"]) for r in llm_routes.values()
                    if r.get("cached") and r.get("llm_seconds_uncached")]
        all_secs = [float(r["seconds"]) for r in llm_routes.values()]
        use = secs + original or all_secs
        note = None
        if not secs:
            note = ("every decision came from the LLM cache: latencies are those of the original calls"
                    if original else "every decision came from the LLM cache: latencies are cache reads")
        lr = {"decisions": len(llm_routes), "uncached": len(secs), "errors": sum(1 for r in llm_routes.values()
                                                                                   if r.get("error")),
              "median_seconds": statistics.median(use), "mean_seconds": sum(use) / len(use), "note": note}
    per_question = []
    for k in keys:
        it = items[k]
        per_question.append({
            "key": k, "dataset": it.dataset, "id": it.id, "question": it.text, "answers": it.answers,
            "type": it.type, "probs": probs.get(k), "oracle": oracle[k],
            "choices": {s: choices[s][k] for s in choices if s not in routes},
            "results": {r: {x: per_route[k][r].get(x) for x in ("pred", *METRICS, "llm_calls", "prompt_tokens",
                                                                "completion_tokens", "seconds", "error")}
                        for r in routes}})
    cfg_d = asdict(cfg)
    if escalated:
        notes.append(f"router+escalate: {len(escalated)} of {len(keys)} router answers said they did not know "
                     "and were answered again by logic (text rule only; the self-check call is not replayed)")
    return {"config": cfg_d, "routes": routes, "systems_order": list(choices), "systems": systems,
            "confusion": conf, "cost_quality": cq, "llm_router": lr,
            "router": {"checkpoint": cfg.checkpoint or "shipped generalist",
                       "seconds_per_question": router_seconds} if probs else None,
            "notes": notes, "per_question": per_question}


# ============================================================ writing

