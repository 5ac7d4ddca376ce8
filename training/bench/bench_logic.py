"""Benchmark of the logic route against the chunk route, with the paper's four ablations.

On the first N questions of 2WikiMultihopQA (2wiki_train500.json) and MuSiQue (musique_200.jsonl),
each against a KB of its own file's passages for the first KB_N questions (default 100, as the
anchor of shared/ARCHITECTURE.md: more distractors than the N questions bring, and one KB shared
by every N so that runs of different sizes share the LLM cache), run:

  chunk                   vanilla top-k RAG (engine.core.routes.chunk.answer_chunk)
  logic                   LogicRAG, every mechanism on
  logic-no-merge          graph pruning off (one retrieval + call per sub-question)
  logic-no-memory         context pruning off (raw chunks concatenated)
  logic-with-replacement  sampling without replacement off
  logic-no-reflection     self-reflection off
  logic-last-hop-chunks   the final answer also sees the last hop's raw chunks (final_chunks=3)
  logic-dag-single-hop    a one-lookup plan goes through step, memory and reflection too

through the (cached) LLM, and report EM / F1 / string accuracy, LLM calls, prompt/completion
tokens, seconds and retrieval rounds per question, overall and per question type (2Wiki `type`,
MuSiQue hops), beside the paper's reference numbers. Resumable: every (llm, dataset, system,
question) result is appended to results.jsonl and skipped on a rerun. Run it as
`logicroute bench logic`.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from engine.core.routes import ChunkRoute, LogicRoute, RouteContext, answer_on
from engine.core.routes.logic.config import PRESETS, LogicConfig
from engine.floor.llm.base import DEFAULT_LLM
from training.bench.bench_logic_report import build_report, report_markdown
from training.common.answer_scores import answer_scores
from training.common.jsonl_store import JsonlStore
from training.common.logic_experiment import experiment, logic_fingerprint
from training.common.shared_data import SHARED_FILES, shared_data_dir

# data set name -> file under the shared data folder
DATASETS = {
    "2wiki": SHARED_FILES["2wiki"],
    "musique": SHARED_FILES["musique"],
    "musique-34hop": SHARED_FILES["musique"],
}
# The first 122 MuSiQue questions are all 2-hop: "musique-34hop" takes the first N/2 3-hop and the
# first N/2 4-hop questions of the file instead, against a KB of every 3- and 4-hop question's
# passages (its own KB, so the 2-hop runs keep theirs and their cache).
DEEP_HOPS = ("3hop", "4hop")
SYSTEMS = (
    "chunk",
    "logic",
    "logic-no-merge",
    "logic-no-memory",
    "logic-with-replacement",
    "logic-no-reflection",
    "logic-last-hop-chunks",
    "logic-dag-single-hop",
    "logic-lean",
    "logic-lean-whole-chunks",
    "logic-lean-long-prompts",
    "logic-lean-always-reflect",
    "logic-lean-final-call",
    "logic-lean-memory150",
    "logic-lean-compact",
    "logic-lean-compact-ev60",
    "logic-lean-questions",
    "logic-lean-no-reflect-notes",
    "logic-lean-examples1",
    "logic-lean-examples2",
    "logic-lean-reflect-unknown",
    "logic-lean-reflect-unknown-long-prompts",
    "logic-lean-reflect-unknown-whole-chunks",
    "logic-lean-reflect-unknown-ev200",
    "logic-forms",
    "logic-lean-forms",
    "logic-lean-forms-ev100",
    "logic-lean-forms-compressed",
)
# The lean logic route (issue: the logic route at half its cost): every cost cut on; each
# logic-lean-* row turns one of them back off, so each cut is its own ablation in the same run.
LEAN = {
    "evidence_tokens": 100,
    "short_prompts": True,
    "reflect_when_unsure": True,
    "fold_final": True,
    "memory_words": 80,
}
LEAN_150 = {**LEAN, "memory_words": 150}  # the best lean row on 2Wiki, the base of the later rows
LEAN_UNKNOWN = {**LEAN_150, "reflect_unknown_only": True}
_CHANGED = {
    "logic-lean": LEAN,
    "logic-lean-whole-chunks": {**LEAN, "evidence_tokens": 0},
    "logic-lean-long-prompts": {**LEAN, "short_prompts": False},
    "logic-lean-always-reflect": {**LEAN, "reflect_when_unsure": False},
    "logic-lean-final-call": {**LEAN, "fold_final": False},
    "logic-lean-memory150": LEAN_150,
    # the best lean row so far (memory 150) with the decomposition's examples as text lines
    "logic-lean-compact": {**LEAN_150, "compact_examples": True},
    # and 60 evidence tokens a sub-question instead of 100 (~2 sentences instead of ~3-4)
    "logic-lean-compact-ev60": {**LEAN_150, "compact_examples": True, "evidence_tokens": 60},
    # the best lean row so far with the plan as a list of sub-question strings
    "logic-lean-questions": {**LEAN_150, "plan_questions": True},
    # the best lean row so far with the reflection call shown the sub-answers without the memory
    "logic-lean-no-reflect-notes": {**LEAN_150, "reflect_notes": False},
    # the best lean row so far with the decomposition showing only the 1 or 2 example plans
    # closest in form to the question, out of all seven
    "logic-lean-examples1": {**LEAN_150, "plan_examples": 1},
    "logic-lean-examples2": {**LEAN_150, "plan_examples": 2},
    # the best lean row so far, reflecting only while a sub-question is unanswered
    "logic-lean-reflect-unknown": LEAN_UNKNOWN,
    # and each of its two cuts that change what the model reads turned back off (MuSiQue lost F1)
    "logic-lean-reflect-unknown-long-prompts": {**LEAN_UNKNOWN, "short_prompts": False},
    "logic-lean-reflect-unknown-whole-chunks": {**LEAN_UNKNOWN, "evidence_tokens": 0},
    # between the two: twice the evidence budget a sub-question
    "logic-lean-reflect-unknown-ev200": {**LEAN_UNKNOWN, "evidence_tokens": 200},
    # plans read off the question's form where it has one of a few fixed shapes: no decomposition call
    "logic-forms": {"plan_forms": True},
    "logic-lean-forms": {**LEAN_UNKNOWN, "evidence_tokens": 0, "plan_forms": True},
    "logic-lean-forms-ev100": {**LEAN_UNKNOWN, "plan_forms": True},
    # LEAN_UNKNOWN with whole chunks, except the evidence of form-plan sub-questions (100 tokens
    # each), plans read off forms: the logic route's "lean" preset, whose one home is PRESETS
    "logic-lean-forms-compressed": {
        f: v for f, v in asdict(PRESETS["lean"]).items() if v != getattr(PRESETS["paper"], f)
    },
    "logic-no-merge": {"merge_same_rank": False},
    "logic-no-memory": {"rolling_memory": False},
    "logic-with-replacement": {"without_replacement": False},
    "logic-no-reflection": {"reflection": False},
    "logic-last-hop-chunks": {"final_chunks": 3},
    "logic-dag-single-hop": {"direct_single_hop": False},
}


# The wall-clock budget of the route (300 s) would make results depend on what else runs on the
# machine (a cold call on a loaded 2-core box takes minutes) and make cached reruns differ from
# cold runs; the benchmark keeps the call and token budgets and relaxes only this one.
BENCH_MAX_SECONDS = 3600.0


def system_config(system: str, k: int = 3, max_seconds: float = BENCH_MAX_SECONDS) -> LogicConfig | None:
    """The LogicConfig of a logic system name (None for 'chunk')."""
    if system == "chunk":
        return None
    if system == "logic":
        return experiment(k=k, max_seconds=max_seconds)
    if system in _CHANGED:
        return experiment(k=k, max_seconds=max_seconds, **_CHANGED[system])
    raise ValueError(f"unknown system {system!r}; known: {', '.join(SYSTEMS)}")


def _kb_for(dataset, out_dir: Path, name: str, n: int, offset: int = 0):
    """The KB of this dataset's passages (those of its questions [offset, offset+n)), built once in out_dir."""
    from hierarchy.kb import KnowledgeBase
    from training.common.passage_kb import passages_kb

    path = out_dir / "kb" / (f"{name}_n{n}" if not offset else f"{name}_o{offset}_n{n}")
    if KnowledgeBase.exists(path):
        return KnowledgeBase.open(path)
    return passages_kb(path, dataset.passages, overwrite=True, show_progress=True)


def _deep_hops(path: Path, n: int):
    """(KB dataset = every 3/4-hop question with its passages, asked = the first n/2 of each hop count)."""
    from hierarchy.datasets import Dataset, load_dataset

    everything = load_dataset(path)
    deep = [i for i, q in enumerate(everything.questions) if q.type in DEEP_HOPS]
    per_hop = max(1, n // len(DEEP_HOPS))
    asked = [i for h in DEEP_HOPS for i in [j for j in deep if everything.questions[j].type == h][:per_hop]]
    wanted = {pid for i in deep for pid in everything.questions[i].passages}
    kb_ds = Dataset(
        "musique", [everything.questions[i] for i in deep], [p for p in everything.passages if p.id in wanted]
    )
    return kb_ds, Dataset("musique", [everything.questions[i] for i in sorted(asked)], [])


def _qtype(q) -> str:
    return q.type or "unknown"


def _run_one(system: str, q, kb, llm, k: int) -> dict:
    t0 = time.perf_counter()
    route = ChunkRoute() if system == ChunkRoute.name else LogicRoute(system_config(system, k))
    ans = answer_on(route, q.text, RouteContext(kb, llm, k))
    wall = time.perf_counter() - t0
    tr = ans.trace
    return {
        "pred": ans.text,
        **answer_scores(ans.text, q.answers),
        "llm_calls": ans.usage.llm_calls,
        "prompt_tokens": ans.usage.prompt_tokens,
        "prompt_tokens_evaluated": ans.usage.prompt_tokens_evaluated,
        "completion_tokens": ans.usage.completion_tokens,
        "cached_calls": ans.usage.cached_calls,
        "llm_seconds": round(ans.usage.llm_seconds, 3),
        "seconds": round(ans.usage.seconds or wall, 3),
        "llm_seconds_uncached": round(ans.usage.llm_seconds_uncached, 3),
        "retrieval_rounds": tr.get("retrieval_rounds", 1),
        "nodes": len((tr.get("dag") or {}).get("nodes", [])) if system != "chunk" else 0,
        "edges": (tr.get("dag") or {}).get("edges", []) if system != "chunk" else [],
        "reflection_added": sum(len(r.get("added", [])) for r in tr.get("reflection", [])),
        "flags": tr.get("flags", []),
        "by_call": calls_by_kind(tr.get("llm_calls", [])),
        "subquestions": [
            [n["id"], n.get("rewritten") or n["question"], n.get("answer")]
            for n in (tr.get("dag") or {}).get("nodes", [])
        ]
        if system != "chunk"
        else [],
    }


def calls_by_kind(calls: list[dict]) -> dict[str, list[int]]:
    """{call kind: [calls, prompt tokens, completion tokens]} of one answer's trace["llm_calls"];
    the kind is the purpose's first word ("step q1,q2" -> "step", "reflect 2" -> "reflect")."""
    out: dict[str, list[int]] = {}
    for c in calls:
        kind = str(c.get("purpose", "")).split(" ")[0] or "unknown"
        have = out.setdefault(kind, [0, 0, 0])
        have[0] += int(c.get("attempts") or 1)  # a structured reply retried once is one entry of two calls
        have[1] += int(c.get("prompt_tokens") or 0)
        have[2] += int(c.get("completion_tokens") or 0)
    return out


def _row_key(r: dict) -> tuple:
    """A result counts for the same LLM, data set, system, question and route settings."""
    return r["llm"], r["dataset"], r["system"], r["qid"], r.get("cfg")


def _load_sets(datasets, data_dir: Path, n: int, kb_n: int, offset: int = 0) -> tuple[dict, dict]:
    """(KB data set, asked data set) per data set name: the questions [offset, offset+n), the
    passages of the questions [offset, offset+kb_n)."""
    from hierarchy.datasets import load_dataset

    kb_sets, loaded = {}, {}
    for name in datasets:
        if name == "musique-34hop":
            if offset:
                raise ValueError("musique-34hop picks its own questions: it takes no offset")
            kb_sets[name], loaded[name] = _deep_hops(data_dir / DATASETS[name], n)
        else:
            kb_sets[name] = load_dataset(data_dir / DATASETS[name], kb_n, offset=offset)
            loaded[name] = load_dataset(data_dir / DATASETS[name], n, offset=offset)
    return kb_sets, loaded


def _answer_all(
    store: JsonlStore,
    kb_sets: dict,
    loaded: dict,
    systems,
    cfgs: dict[str, str],
    spec: str,
    llm,
    k: int,
    out_dir: Path,
    kb_n: int,
    show_progress: bool,
    offset: int = 0,
) -> None:
    """Answer every (data set, question, system) not in the store yet, appending each result."""
    from tqdm import tqdm

    total = sum(len(d.questions) for d in loaded.values()) * len(systems)
    bar = tqdm(total=total, desc="bench logic", disable=not show_progress, unit="run")
    for name, ds in loaded.items():
        kb = _kb_for(kb_sets[name], out_dir, name, kb_n, offset)
        for q in ds.questions:
            for s in systems:
                if (spec, name, s, q.id, cfgs[s]) not in store:
                    store.append(
                        {
                            "llm": spec,
                            "dataset": name,
                            "system": s,
                            "qid": q.id,
                            "cfg": cfgs[s],
                            "type": _qtype(q),
                            "question": q.text,
                            "golds": q.answers,
                            **_run_one(s, q, kb, llm, k),
                        }
                    )
                bar.set_postfix_str(f"{name} {s}")
                bar.update(1)
    bar.close()


def main(
    n: int = 30,
    out_dir: str | Path = "runs/bench_logic",
    llm_spec: str = DEFAULT_LLM,
    *,
    systems: list[str] | tuple[str, ...] = SYSTEMS,
    datasets: list[str] | tuple[str, ...] = tuple(DATASETS),
    data_dir: str | Path | None = None,
    k: int = 3,
    cache: bool | str | Path = True,
    show_progress: bool = True,
    llm: Any = None,
    kb_n: int = 100,
    offset: int = 0,
) -> dict:
    """Run (resumably) and write out_dir/results.jsonl, report.json, report.md; return the report.
    `llm` overrides `llm_spec` (tests pass a fake); `cache` goes to make_llm. The KB of a dataset
    holds the passages of its first max(n, kb_n) questions."""
    from engine.floor.base.files import atomic_write_json, atomic_write_text
    from engine.floor.llm.factory import make_llm

    for s in systems:
        if s not in SYSTEMS:
            raise ValueError(f"unknown system {s!r}; known: {', '.join(SYSTEMS)}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data_dir = Path(data_dir) if data_dir else shared_data_dir()
    if llm is None:
        llm = make_llm(llm_spec, cache=cache)
    spec = llm.name
    store = JsonlStore(out_dir / "results.jsonl", key=_row_key)
    kb_n = max(n, kb_n)
    kb_sets, loaded = _load_sets(datasets, data_dir, n, kb_n, offset)
    # a result is reused only for the same route settings (a changed default is answered again)
    cfgs = {s: logic_fingerprint(system_config(s, k)) if s != "chunk" else f"chunk-k{k}" for s in systems}
    _answer_all(store, kb_sets, loaded, systems, cfgs, spec, llm, k, out_dir, kb_n, show_progress, offset)

    qids = {name: {q.id for q in ds.questions} for name, ds in loaded.items()}
    rows = [
        r
        for (sp, ds, s, qid, cfg), r in store.by_key.items()
        if sp == spec and ds in qids and qid in qids[ds] and s in systems and cfg == cfgs[s]
    ]
    report = build_report(rows, spec, n, SYSTEMS)
    report["offset"] = offset
    report["kb"] = {name: {"questions": len(d.questions), "passages": len(d.passages)} for name, d in kb_sets.items()}
    report["config"] = {s: (asdict(system_config(s, k)) if s != "chunk" else {"k": k}) for s in systems}
    atomic_write_json(out_dir / "report.json", report)
    md = report_markdown(report)
    atomic_write_text(out_dir / "report.md", md)
    print(md)
    return report
