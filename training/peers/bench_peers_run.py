"""The harness of `logicroute bench peers`: every system on one data set's passages and questions.

One KB per data set, as `logicroute benchmark --kb-per-dataset` builds it (training.bench.bench_data):
the passages of the first N questions (or of the first kb_questions) and their distractors.
Every system gets the same LLM and the same embedder through PeerContext, and every answer is
scored by training.common.answer_scores.

Resumable: <out>/<set>/results.jsonl holds one row per finished index batch and per answered
question, keyed by the system, the question, and a signature (LLM, passages, the system's
settings); a rerun skips them. A peer indexes in batches of `index_batch` passages: an interrupted
build continues with the passages no batch row names (the peer keeps its own store in its
folder), so the indexing cost is the sum of the batch rows. A failed answer is a row too, with
its error: it is counted in the report, not dropped (--retry-errors answers it again)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from engine.floor.base.errors import LogicRouteError
from engine.floor.base.progress import progress_bar
from training.common.answer_scores import answer_scores
from training.common.jsonl_store import JsonlStore, exclusive_folder
from training.peers.bench_peers import IndexCost, PeerAdapter, PeerAnswer, PeerContext

RESULTS_FILE = "results.jsonl"


@dataclass
class PeersConfig:
    """One `bench peers` run on one data set."""

    data: str  # a data file (hierarchy.datasets.resolve_data resolves a set name)
    systems: tuple[str, ...]
    out: str = "runs/bench_peers"
    n: int = 30
    offset: int = 0
    kb_questions: int | None = None  # KB = the passages of the first max(n, this) questions
    max_passages: int | None = None  # keep this many passages (the questions' supporting ones first): smoke runs
    k: int = 3
    style: str = "short"
    index_batch: int = 5
    retry_errors: bool = False
    report_only: bool = False  # no indexing, no answering: the report of the rows there are
    show_progress: bool = True
    options: dict = field(default_factory=dict)  # per-system settings (PeerContext.options)


def _fp(obj) -> str:
    return hashlib.sha1(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def row_key(row: dict) -> tuple:
    return row.get("kind"), row.get("system"), row.get("key"), row.get("sig")


def load_set(cfg: PeersConfig, notes: list[str]) -> tuple[str, list, list]:
    """(set name, questions [training.bench.bench_data.Item], passages): the routing benchmark's KB rule."""
    from training.bench.bench_data import BenchConfig, collect_items, load_data

    bcfg = BenchConfig(
        data=[cfg.data], out=cfg.out, n=cfg.n, offset=cfg.offset, kb_per_dataset=True, kb_questions=cfg.kb_questions
    )
    data = load_data(bcfg)
    items, kb_passages = collect_items(bcfg, data, notes)
    name, ds, _ = data[0]
    passages = list(kb_passages[name].values())
    if cfg.max_passages is not None and cfg.max_passages < len(passages):
        supporting = [pid for q in ds.questions for pid in q.supporting]
        rank = {pid: i for i, pid in enumerate(dict.fromkeys(supporting))}
        passages = sorted(passages, key=lambda p: rank.get(p.id, len(rank)))[: cfg.max_passages]
        notes.append(f"KB cut to {cfg.max_passages} passages (the questions' supporting passages first)")
    return name, list(items.values()), passages


@dataclass
class SystemRun:
    """One system's rows of this run: its index batches and its answers."""

    name: str
    settings: dict
    sig: str
    index_rows: list[dict]
    answer_rows: list[dict]
    error: str | None = None  # the system could not start or index: no answers


def run_system(
    adapter: PeerAdapter,
    items: Sequence,
    passages: Sequence,
    store: JsonlStore,
    cfg: PeersConfig,
    base_sig: dict,
    echo: Callable[[str], None],
) -> SystemRun:
    """Index (what is left of) the passages, then answer the questions not answered before."""
    name = adapter.name
    settings = adapter.settings()
    sig = _fp({**base_sig, "system": name, "settings": settings})
    index_rows = [r for r in store.rows if r.get("kind") == "index" and r.get("system") == name and r["sig"] == sig]
    if cfg.report_only:
        return rows_only(name, settings, sig, index_rows, items, passages, store, echo)
    done = {pid for r in index_rows for pid in r.get("passage_ids", [])}
    todo = [p for p in passages if p.id not in done]
    incremental = getattr(adapter, "incremental", True)
    echo(f"{name}: {len(passages) - len(todo)} of {len(passages)} passages indexed before, {len(todo)} to index")
    bar = progress_bar(len(passages), f"{name} index", "passage", cfg.show_progress)
    bar.update(len(passages) - len(todo))
    try:
        if not incremental:  # builds its whole index at once (cheap, no LLM): a cost row the first time only
            cost = adapter.index(list(passages), lambda d, t: None)
            if todo:
                index_rows.append(_index_row(name, sig, [p.id for p in passages], cost, store))
        else:
            batches = [todo[i : i + cfg.index_batch] for i in range(0, len(todo), cfg.index_batch)] or [[]]
            for batch in batches:  # an empty batch opens the finished index
                cost = adapter.index(batch, lambda d, t: None)
                if batch:
                    index_rows.append(_index_row(name, sig, [p.id for p in batch], cost, store))
                bar.update(len(batch))
    except LogicRouteError as e:
        bar.close()
        return SystemRun(name, settings, sig, index_rows, [], error=f"index: {e}")
    bar.close()
    answers = []
    todo_q = []
    for it in items:
        row = store.get(("answer", name, it.key, sig))
        if row is not None and not (row.get("error") and cfg.retry_errors):
            answers.append(row)
        else:
            todo_q.append(it)
    echo(f"{name}: {len(items) - len(todo_q)} of {len(items)} questions answered before")
    bar = progress_bar(len(todo_q), f"{name} answers", "q", cfg.show_progress)
    for it in todo_q:
        t0 = time.perf_counter()
        try:
            a = adapter.answer(it.text)
        except LogicRouteError as e:  # the system broke on this question: counted, the run goes on
            a = PeerAnswer("", seconds=time.perf_counter() - t0, error=f"{type(e).__name__}: {e}")
        row = _answer_row(name, sig, it, a)
        store.append(row)
        answers.append(row)
        bar.update(1)
    bar.close()
    return SystemRun(name, settings, sig, index_rows, answers)


def rows_only(name, settings, sig, index_rows, items, passages, store, echo) -> SystemRun:
    """The system's run as its rows have it, nothing indexed or answered: a report made after the
    builds can never start one (a changed runner or setting signs no row: the system shows none)."""
    indexed = {pid for r in index_rows for pid in r.get("passage_ids", [])}
    answers = [row for it in items if (row := store.get(("answer", name, it.key, sig))) is not None]
    missing = len([p for p in passages if p.id not in indexed]), len(items) - len(answers)
    echo(f"{name}: rows of {len(passages) - missing[0]} of {len(passages)} passages, {len(answers)} answers")
    error = None
    if any(missing):
        error = f"report only: {missing[0]} passages not indexed and {missing[1]} questions not answered in its rows"
    return SystemRun(name, settings, sig, index_rows, answers, error=error)


def _index_row(name: str, sig: str, ids: list[str], cost: IndexCost, store: JsonlStore) -> dict:
    row = {"kind": "index", "system": name, "key": _fp(ids), "sig": sig, "passage_ids": ids, **asdict(cost)}
    row["seconds"] = round(row["seconds"], 3)
    store.append(row)
    return row


def _answer_row(name: str, sig: str, it, a: PeerAnswer) -> dict:
    pred = a.text if not a.error else ""
    return {
        "kind": "answer",
        "system": name,
        "key": it.key,
        "sig": sig,
        "id": it.id,
        "question": it.text,
        "golds": it.answers,
        "pred": pred,
        **answer_scores(pred, it.answers),
        "llm_calls": a.llm_calls,
        "prompt_tokens": a.prompt_tokens,
        "completion_tokens": a.completion_tokens,
        "seconds": round(a.seconds, 3),
        "error": a.error,
    }


def run_peers(
    cfg: PeersConfig,
    registry: dict[str, Callable[[PeerContext], PeerAdapter]],
    llm,
    *,
    embedder=None,
    echo: Callable[[str], None] = print,
) -> dict:
    """Run (or resume) every system of cfg on the set; returns the report's dict (see
    training.peers.bench_peers_report.summarize)."""
    from training.bench.bench_data import fingerprint
    from training.peers.bench_peers_report import summarize

    unknown = [s for s in cfg.systems if s not in registry]
    if unknown:
        raise LogicRouteError(f"unknown system(s) {', '.join(unknown)}: choose from {', '.join(registry)}")
    notes: list[str] = []
    name, items, passages = load_set(cfg, notes)
    base_sig = {"llm": llm.name, "passages": fingerprint([p.id for p in passages]), "k": cfg.k, "style": cfg.style}
    t0 = time.perf_counter()
    with exclusive_folder(Path(cfg.out) / name, "bench peers run") as folder:
        store = JsonlStore(folder / RESULTS_FILE, key=row_key)
        runs = []
        for system in cfg.systems:
            ctx = PeerContext(llm, folder / system, embedder, cfg.k, cfg.style, dict(cfg.options), _fp(base_sig))
            ctx.workdir.mkdir(parents=True, exist_ok=True)
            try:
                adapter = registry[system](ctx)
            except LogicRouteError as e:
                runs.append(SystemRun(system, {}, "", [], [], error=f"start: {e}"))
                continue
            try:
                runs.append(run_system(adapter, items, passages, store, cfg, base_sig, echo))
            except LogicRouteError as e:  # e.g. settings() could not reach the peer's runner
                runs.append(SystemRun(system, {}, "", [], [], error=str(e)))
            finally:
                adapter.close()
    return summarize(name, cfg, items, passages, runs, llm.name, notes, time.perf_counter() - t0)
