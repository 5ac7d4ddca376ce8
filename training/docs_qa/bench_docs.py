"""`logicroute bench docs`: RoutedRAG configurations answering questions about documentation
folders, with negatives (issue 56). Each question set (training/data/docs_questions) is paired
with the KB its folder was indexed into; every named system answers every question of the
chosen half in the default (reader) style, and the answers are scored by
training.docs_qa.bench_docs_score: positives right, abstained or wrong, negatives abstained or answered
(fabrications), by kind, and the cost a question.

Rows go to results.jsonl one per system x question as they finish, with the answer text, so
that a rerun skips what is done (and the LLM call cache makes the rest of it free) and the
report is scored afresh from the texts every time: a change of the scorer needs no new answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path

from engine.core.routes import AUTO
from engine.floor.base.errors import LogicRouteError
from training.common.bench_signature import answer_signature
from training.common.jsonl_store import JsonlStore
from training.common.usage_columns import usage_columns
from training.docs_qa.bench_docs_sets import DocsQuestion

# The RoutedRAG configurations compared: the route asked for and the settings over RagConfig's
# defaults. `before` is the default path as it was before issue 56 (absence climbs the ladder,
# the OOD guard ignores the KB's own questions, ungrounded logic answers stand).
SYSTEMS: dict[str, dict] = {
    "chunk": {"route": "chunk", "options": {"abstain_ungrounded": False}},  # the chunk route's own answer
    "default": {"route": AUTO, "options": {}},
    "before": {
        "route": AUTO,
        "options": {"keep_absence": False, "ood_kb_questions": False, "abstain_ungrounded": False},
    },
}
REFERENCE = "before"  # what every other system is paired against, when it ran
STYLE = "reader"


@dataclass
class DocsSet:
    """A question set with the KB its folder was indexed into, restricted to one half."""

    name: str
    path: Path
    kb: Path
    questions: list[DocsQuestion] = field(default_factory=list)


def check_systems(names: Sequence[str]) -> list[str]:
    """The systems by name, in order, each known and each of its options a RagConfig setting
    of this version: a system that needs a setting this code lacks fails before any answer."""
    from engine.core.config import RagConfig

    known = {f.name for f in fields(RagConfig)}
    out = []
    for name in names:
        if name not in SYSTEMS:
            raise LogicRouteError(f"unknown system {name!r}: known are {', '.join(SYSTEMS)}")
        lacking = sorted(set(SYSTEMS[name]["options"]) - known)
        if lacking:
            raise LogicRouteError(
                f"system {name!r} needs the RagConfig setting(s) {', '.join(lacking)}, "
                "which this version does not have: leave it out of --systems"
            )
        if name not in out:
            out.append(name)
    return out


def signature(system: str, q: DocsQuestion, setup: dict) -> str:
    """What a stored row must match to be reused: the question, the system's definition and the
    run's setup (LLM, passages per retrieval; the router for an auto-routed system). A change of
    any of them answers the row again."""
    return answer_signature(q.question, SYSTEMS[system], setup, routed=SYSTEMS[system]["route"] == AUTO)


def row_key(row: dict) -> tuple[str, str, str]:
    return row["set"], row["system"], row["id"]


def answer_row(docs: DocsSet, system: str, q: DocsQuestion, rag, sig: str) -> dict:
    """Answer one question with one system; the row holds the answer as given (scored later)
    or the error that stopped it."""
    t0 = time.perf_counter()
    row: dict = {"set": docs.name, "system": system, "id": q.id, "sig": sig, "question": q.question}
    try:
        ans = rag.answer(q.question, route=SYSTEMS[system]["route"])
    except LogicRouteError as e:  # one failed answer is a row to report, not the end of the run
        return {**row, "error": f"{type(e).__name__}: {e}", "text": "", "seconds": time.perf_counter() - t0}
    u = ans.usage
    decision = ans.trace.decision or {}
    return {
        **row,
        "text": ans.text,
        "route": ans.route,
        "decision": decision.get("route"),
        "flags": list(ans.flags),
        "sources": [s.path for s in ans.sources],
        **usage_columns(u),
    }


def run(
    sets: Sequence[DocsSet],
    systems: Sequence[str],
    store: JsonlStore,
    rag_for: Callable[[DocsSet, str], object],
    *,
    setup: dict,
    redo: bool = False,
    concurrency: int = 1,
    progress: bool = True,
) -> dict:
    """Answer what `store` does not hold yet (every row again with `redo`) and return the rows
    of this run's questions by (set, system, id). `rag_for(set, system)` gives the RoutedRAG
    that answers; it is asked once per pair, when the pair has work."""
    from engine.floor.base.progress import progress_bar

    todo: list[tuple[DocsSet, str, DocsQuestion, str]] = []
    for docs in sets:
        for system in systems:
            for q in docs.questions:
                sig = signature(system, q, setup)
                old = store.get((docs.name, system, q.id))
                if redo or old is None or old.get("sig") != sig or old.get("error"):
                    todo.append((docs, system, q, sig))
    rags: dict[tuple[str, str], object] = {}
    for docs, system, _, _ in todo:
        if (docs.name, system) not in rags:
            rags[docs.name, system] = rag_for(docs, system)
    bar = progress_bar(len(todo), "bench docs", "answer", progress)

    def one(job: tuple) -> None:
        docs, system, q, sig = job
        store.append(answer_row(docs, system, q, rags[docs.name, system], sig))
        bar.update(1)

    try:
        if concurrency <= 1:
            for job in todo:
                one(job)
        else:
            with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="bench-docs") as pool:
                list(pool.map(one, todo))
    finally:
        bar.close()
    return {
        (d.name, s, q.id): store.get((d.name, s, q.id))
        for d in sets
        for s in systems
        for q in d.questions
        if store.get((d.name, s, q.id)) is not None
    }


def scored_rows(sets: Sequence[DocsSet], systems: Sequence[str], rows: dict) -> list[dict]:
    """Every answered (set, system, question) with its verdict (training.docs_qa.bench_docs_score.score)
    and the fields the tallies read; an errored answer is its own outcome, never right."""
    from training.docs_qa.bench_docs_score import score

    out = []
    for docs in sets:
        for system in systems:
            for q in docs.questions:
                row = rows.get((docs.name, system, q.id))
                if row is None:
                    continue
                base = {
                    "set": docs.name,
                    "system": system,
                    "id": q.id,
                    "kind": q.kind,
                    "group": q.group,
                    **{
                        c: row.get(c)
                        for c in ("llm_calls", "tokens", "seconds", "llm_seconds_uncached", "error", "flags")
                    },
                }
                if row.get("error"):
                    out.append({**base, "outcome": "error", "right": False, "abstained": False})
                else:
                    out.append({**base, **score(q, row.get("text") or "")})
    return out
