"""Global questions benchmark (`logicroute bench global`): every system answers the same
GraphRAG-Bench questions per question type, scored on sentence answers (issue 17).

The corpus (one long text, cut into ~150-word passages by the data loader) becomes one KB twice
over the same chunks: once with extractive summary layers (zero LLM tokens), once with
LLM-written ones, so the two layer kinds are compared on equal chunks and their build costs sit
side by side. Per question type the questions [offset, offset+n) of that type are asked of every
system (training/global_qa/bench_global_systems.py: chunk, summary on either layers, the collapsed tree,
the summary-route variants, logic) in the reader answer style, and scored with ROUGE-L and
coverage (training/common/answer_scores.py). Each (LLM, system, question, settings) result is one line
of results.jsonl, skipped on a rerun; LLM calls go through the on-disk cache (make_llm).
Writes results.jsonl, kb_index.json, report.json and report.md (training/global_qa/bench_global_report.py).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from engine.floor.base.errors import LogicRouteError
from engine.floor.llm.base import DEFAULT_LLM
from training.common.answer_scores import gold_style
from training.common.jsonl_store import JsonlStore
from training.global_qa.bench_global_routed import ABOUT, DERIVED, can_route, route_questions, route_shares, routed_rows
from training.global_qa.bench_global_systems import (
    DEFAULT_SYSTEMS,
    LAYER_BUILDS,
    LAYERS,
    SYSTEMS,
    WIDE_CHUNKS,
    check_systems,
    system_settings,
)

TYPES = ("Fact Retrieval", "Complex Reasoning", "Contextual Summarize")
# Planning figures for the estimate printed before a run (local 1.5B on 2 cores, reader style):
# LLM calls per answer (the logic route made ~5 per question in bench logic) and seconds per call.
CALLS_PER_ANSWER = {"chunk": 1.0, "summary": 1.0, "logic": 5.0}
SECONDS_PER_CALL = {"answer": 30.0, "summary": 45.0}


@dataclass
class GlobalConfig:
    data: str = field(
        default="medical", metadata={"help": "GraphRAG-Bench questions file, or a shared data set name (medical)"}
    )
    out: str = field(default="runs/bench_global", metadata={"help": "output folder (resumable)"})
    corpus: str | None = field(
        default=None, metadata={"help": "corpus file (default: the *_corpus.json beside the questions)"}
    )
    types: tuple[str, ...] = field(default=TYPES, metadata={"help": "question types asked, each its own rows"})
    n: int = field(default=40, metadata={"help": "questions per type"})
    offset: int = field(default=0, metadata={"help": "first question taken within each type"})
    systems: tuple[str, ...] = field(default=DEFAULT_SYSTEMS, metadata={"help": "systems to run, in report order"})
    k: int = field(default=3, metadata={"help": "chunks per retrieval (and summaries per level)"})
    wide_chunks: int = field(default=WIDE_CHUNKS, metadata={"help": "chunks of the *-wide systems (> k)"})
    llm_spec: str = field(default=DEFAULT_LLM, metadata={"help": "the answering (and summarizing) LLM"})
    cache: bool = field(default=True, metadata={"help": "LLM calls through the on-disk cache"})
    retry_errors: bool = field(default=False, metadata={"help": "answer again the results that failed"})
    logic_max_seconds: float = field(
        default=3600.0, metadata={"help": "wall cap of one logic answer (high: results must not depend on load)"}
    )
    judge: int = field(
        default=0,
        metadata={
            "help": "the answering LLM judges the answers of the first JUDGE questions of each type against the "
            "reference (correct or not; its calls booked apart, its agreement with ROUGE-L reported); 0 = no judge"
        },
    )
    checkpoint: str | None = field(
        default=None,
        metadata={
            "help": "router whose picks among chunk, summary and logic make the 'router' row, beside the 'oracle' "
            "row; both come from the answers made (no new call), when those three systems run (default: the "
            "shipped generalist)"
        },
    )
    bootstrap: int = field(default=10_000, metadata={"help": "paired bootstrap resamples of the vs-chunk spread"})
    seed: int = field(default=0, metadata={"help": "seed of the bootstrap"})

    def __post_init__(self) -> None:
        self.types = tuple(dict.fromkeys(self.types))
        if not self.types:
            raise ValueError("no question type given")
        self.systems = check_systems(self.systems)
        if self.judge < 0:
            raise ValueError(f"judge must be 0 (no judge) or a number of questions per type, got {self.judge}")
        if self.n < 1 or self.offset < 0 or self.k < 1 or self.wide_chunks <= self.k or self.bootstrap < 1:
            raise ValueError(
                f"n >= 1, offset >= 0, k >= 1, wide_chunks > k and bootstrap >= 1 are required (got n={self.n}, "
                f"offset={self.offset}, k={self.k}, wide_chunks={self.wide_chunks}, bootstrap={self.bootstrap})"
            )

    def layers_needed(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(SYSTEMS[s].layers for s in self.systems))


def select_typed(ds, types, n: int, offset: int) -> list:
    """Questions [offset, offset+n) of each type, type by type; a type with none is an error
    naming the types there are."""
    out = []
    for t in types:
        typed = [q for q in ds.questions if q.type == t]
        if not typed[offset : offset + n]:
            have = sorted({str(q.type) for q in ds.questions})
            raise LogicRouteError(f"no question of type {t!r} at offset {offset} (types: {', '.join(have)})")
        out += typed[offset : offset + n]
    return out


def open_kb(path: Path, passages: list, kind: str, embedder, llm, show_progress: bool) -> tuple[Any, dict]:
    """The KB of `passages` at `path` with layers of `kind` (bench_global_systems.LAYER_BUILDS):
    made once, reopened after. A KB there made of other passages is refused (another corpus wants
    another --out). Returns the KB and its chunk index cost (None when it was made by an earlier run)."""
    from hierarchy.kb import KnowledgeBase
    from hierarchy.layers.update import build_layers
    from training.common.passage_kb import passages_kb

    index_cost = None
    if KnowledgeBase.exists(path):
        kb = KnowledgeBase.open(path, embedder)
        if set(kb.doc_ids) != {p.id for p in passages}:
            raise LogicRouteError(f"the KB at {path} holds other passages than this corpus: use another --out")
    else:
        t = time.perf_counter()
        kb = passages_kb(path, passages, embedder, overwrite=True, show_progress=show_progress)
        index_cost = {"chunks": len(kb), "passages": len(passages), "seconds": round(time.perf_counter() - t, 2)}
    # Layers already built this way are kept as they are (their cost is in their meta); an
    # interrupted LLM build starts again, its finished calls answered by the LLM cache.
    summarizer, how = LAYER_BUILDS[kind]
    build_layers(kb, summarizer, llm=llm if summarizer == "llm" else None, show_progress=show_progress, **how)
    return kb, index_cost


def layer_cost(kb) -> dict:
    """What building the KB's layers cost, as the build recorded it (hierarchy.layers.nodes.run_cost)."""
    from hierarchy.layers.persist import load_layers

    layers = load_layers(kb)
    return dict((layers.meta.get("build") if layers else None) or {})


def estimate(cfg: GlobalConfig, store: JsonlStore | None, questions: list, chunks: int, built: set[str]) -> dict:
    """LLM calls and hours still to make: answers not in the store, LLM layers not built yet
    (one call per node: ~chunks/10 at level 1, a tenth of that above, ...)."""
    from hierarchy.layers.tree import CLUSTER_SIZE, MAX_TOP

    per_system = {}
    for s in cfg.systems:
        todo = sum(1 for q in questions if store is None or not _done(store, cfg, s, q))
        per_system[s] = {"answers": todo, "llm_calls": round(todo * CALLS_PER_ANSWER[SYSTEMS[s].route], 1)}
    nodes, m = 0, chunks
    while m > 0 and (nodes == 0 or m > MAX_TOP):
        m = max(1, round(m / CLUSTER_SIZE))
        nodes += m
    layer_calls = nodes if "llm" in cfg.layers_needed() and "llm" not in built else 0
    answer_calls = sum(v["llm_calls"] for v in per_system.values())
    hours = (answer_calls * SECONDS_PER_CALL["answer"] + layer_calls * SECONDS_PER_CALL["summary"]) / 3600
    return {
        "per_system": per_system,
        "answer_llm_calls": answer_calls,
        "layer_llm_calls": layer_calls,
        "llm_calls": answer_calls + layer_calls,
        "hours_local_model": round(hours, 1),
    }


def _key(spec: str, system: str, qid: str, settings: str) -> tuple:
    return spec, system, qid, settings


def _row_key(r: dict) -> tuple:
    return _key(r["llm"], r["system"], r["qid"], r["cfg"])


def llm_name(spec: str) -> str:
    """The name an LLM built from `spec` records in its results (make_llm normalizes the spec)."""
    from engine.floor.llm.base import parse_spec
    from engine.floor.llm.urls import redact

    try:
        return redact(str(parse_spec(spec)))  # as OpenAILLM.name: without the endpoint's credentials
    except LogicRouteError:  # not a spec make_llm builds (a test's fake LLM names itself)
        return spec


def _done(store: JsonlStore, cfg: GlobalConfig, system: str, q, name: str | None = None) -> bool:
    s = SYSTEMS[system]
    fp = system_settings(s, cfg.k, cfg.wide_chunks, cfg.logic_max_seconds)[1]
    row = store.get(_key(name or llm_name(cfg.llm_spec), system, q.id, fp))
    return row is not None and not (cfg.retry_errors and row.get("error"))


def _shown_words(ans) -> int | None:
    """Words of the passages the answer call was shown (None on the logic route, whose final
    call reads its memory and notes, not passages)."""
    if ans.route == "logic":
        return None
    return sum(len(s.text.split()) for s in ans.sources if s.n is not None)


def answer_row(system: str, settings: Any, q, kb, llm, k: int, style: str) -> dict:
    """One system's answer to one question: scores, costs and what it was shown. A route error
    is recorded (and scores 0), never dropped."""
    from training.common.answer_scores import answer_scores
    from training.global_qa.bench_global_systems import answer_with

    t0 = time.perf_counter()
    try:
        ans = answer_with(SYSTEMS[system], settings, q.text, kb, llm, k, style)
        pred, usage, trace, err = ans.text, ans.usage, ans.trace, None
        shown = _shown_words(ans)
    except LogicRouteError as e:
        from engine.floor.base.types import Usage

        pred, usage, trace, err, shown = "", Usage(), {}, f"{type(e).__name__}: {e}", None
    return {
        "pred": pred,
        **answer_scores(pred, q.answers),
        "llm_calls": usage.llm_calls,
        "prompt_tokens": usage.prompt_tokens,
        "prompt_tokens_evaluated": usage.prompt_tokens_evaluated,
        "completion_tokens": usage.completion_tokens,
        "cached_calls": usage.cached_calls,
        "llm_seconds_uncached": round(usage.llm_seconds_uncached, 3),
        "seconds": round(usage.seconds or (time.perf_counter() - t0), 3),
        "context_words": shown,
        # the summary route lists its chunks apart from its summaries; the other routes retrieve chunks only
        "chunk_ids": trace["chunk_ids"]
        if "chunk_ids" in trace
        else [r["chunk_id"] for r in trace.get("retrieved", [])],
        "summary_ids": trace.get("summary_ids", []),
        "flags": trace.get("flags", []),
        "error": err,
    }


def run_all(cfg: GlobalConfig, store: JsonlStore, questions: list, kbs: dict, llm, style: str, progress: bool) -> int:
    """Answer every (question, system) not in the store, question by question (so an early
    stop leaves every system with the same questions answered); returns the answers made."""
    from tqdm import tqdm

    settings = {s: system_settings(SYSTEMS[s], cfg.k, cfg.wide_chunks, cfg.logic_max_seconds) for s in cfg.systems}
    todo = [(q, s) for q in questions for s in cfg.systems if not _done(store, cfg, s, q, llm.name)]
    bar = tqdm(total=len(todo), desc="bench global", unit="answer", file=sys.stderr, disable=not progress)
    for q, s in todo:
        obj, fp = settings[s]
        row = answer_row(s, obj, q, kbs[SYSTEMS[s].layers], llm, cfg.k, style)
        store.append(
            {"llm": llm.name, "system": s, "qid": q.id, "cfg": fp, "type": q.type, "question": q.text}
            | {"golds": q.answers, **row}
        )
        bar.set_postfix_str(s)
        bar.update(1)
    bar.close()
    return len(todo)


def load_questions(cfg: GlobalConfig):
    """(data set, questions asked). The data set must share one corpus (GraphRAG-Bench)."""
    from hierarchy.datasets import load_dataset
    from training.common.shared_data import resolve_data

    ds = load_dataset(resolve_data(cfg.data), corpus=cfg.corpus)
    if ds.corpus is None:
        raise LogicRouteError(f"{cfg.data}: its questions carry their own passages; bench global needs a corpus set")
    return ds, select_typed(ds, cfg.types, cfg.n, cfg.offset)


def plan(cfg: GlobalConfig) -> dict:
    """What a run would still do (LLM calls, hours), without building, embedding or calling anything."""
    from hierarchy.kb import LAYERS_DIR
    from hierarchy.layers.persist import read_meta

    ds, questions = load_questions(cfg)
    out = Path(cfg.out)
    store = JsonlStore(out / "results.jsonl", key=_row_key) if (out / "results.jsonl").exists() else None
    built = {
        s for s in LAYERS if (read_meta(out / f"kb_{s}" / LAYERS_DIR) or {}).get("summarizer") == LAYER_BUILDS[s][0]
    }
    return {
        "questions": len(questions),
        "passages": len(ds.passages),
        **estimate(cfg, store, questions, len(ds.passages), built),
    }


def main(cfg: GlobalConfig, *, llm: Any = None, embedder: Any = None, show_progress: bool = True) -> dict:
    """Run (resumably), write the results and the report; return the report. `llm` and
    `embedder` replace the configured ones (tests pass fakes)."""
    from engine.floor.base.files import atomic_write_json, atomic_write_text
    from engine.floor.llm.factory import make_llm
    from training.global_qa.bench_global_report import build_report, report_markdown

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    ds, questions = load_questions(cfg)
    if llm is None:
        llm = make_llm(cfg.llm_spec, cache=cfg.cache)
    kbs, index_costs, layer_costs = {}, {}, {}
    for summarizer in cfg.layers_needed():
        kb, index_cost = open_kb(out / f"kb_{summarizer}", ds.passages, summarizer, embedder, llm, show_progress)
        kbs[summarizer] = kb
        index_costs[summarizer] = index_cost
        layer_costs[summarizer] = layer_cost(kb)
    # The chunk index cost is only known when this run made the KB: kept from the run that did.
    index_file = out / "kb_index.json"
    if any(index_costs.values()) or not index_file.exists():
        old = json.loads(index_file.read_text()) if index_file.exists() else {}
        atomic_write_json(index_file, {**old, **{s: c for s, c in index_costs.items() if c}})
    store = JsonlStore(out / "results.jsonl", key=_row_key)
    made = run_all(cfg, store, questions, kbs, llm, gold_style(ds), show_progress)
    fps = {s: system_settings(SYSTEMS[s], cfg.k, cfg.wide_chunks, cfg.logic_max_seconds)[1] for s in cfg.systems}
    rows = [r for q in questions for s in cfg.systems if (r := store.get(_key(llm.name, s, q.id, fps[s])))]
    routed, routing = _routed(cfg, rows, questions, embedder, next(iter(kbs.values())))
    report = build_report(rows + routed, (*cfg.systems, *DERIVED), cfg.types, bootstrap=cfg.bootstrap, seed=cfg.seed)
    report["routing"] = routing
    if cfg.judge:
        from training.global_qa.bench_global_judge import judge_answers, judge_key, judge_report

        golds = {q.id: q.answers[0] for q in questions}
        verdicts = judge_answers(rows, golds, llm, JsonlStore(out / "judge.jsonl", key=judge_key), cfg.judge)
        report["judge"] = judge_report(verdicts, cfg.systems, cfg.types)
    report.update(
        llm=llm.name,
        data=ds.name,
        corpus=ds.corpus,
        style=gold_style(ds),
        questions_per_type={t: sum(1 for q in questions if q.type == t) for t in cfg.types},
        offset=cfg.offset,
        kb={"passages": len(ds.passages), "chunks": len(next(iter(kbs.values())))},
        index_cost=json.loads(index_file.read_text()),
        layer_costs=layer_costs,
        systems_about={s: SYSTEMS[s].about if s in SYSTEMS else ABOUT[s] for s in report["systems"]},
        config={**asdict(cfg), "types": list(cfg.types), "systems": list(cfg.systems)},
        answered_this_run=made,
    )
    atomic_write_json(out / "report.json", report)
    atomic_write_text(out / "report.md", report_markdown(report))
    return report


def _routed(cfg: GlobalConfig, rows: list[dict], questions: list, embedder: Any, kb: Any) -> tuple[list[dict], dict]:
    """(router and oracle rows, what the routing did): none unless chunk, summary and logic ran. A
    router that cannot be loaded or run leaves the oracle row alone and says why in the report."""
    if not can_route(cfg.systems):
        return [], {"skipped": "the router and oracle rows need the systems chunk, summary and logic"}
    decisions: dict = {}
    routing: dict = {"checkpoint": cfg.checkpoint or "shipped"}
    try:
        decisions = route_questions(questions, cfg.checkpoint, embedder, kb)
    except (LogicRouteError, OSError, ValueError) as e:
        routing["error"] = f"router not run: {e}"
    routed = routed_rows(rows, decisions)
    if "error" not in routing:
        routing["shares"] = route_shares(routed, cfg.types)
    return routed, routing
