"""`logicroute bench global-lists-answer`: routes answering the list questions of
training/data/global_lists (bench global-lists) on the KB their folder was indexed into, each
answer scored by training.global_qa.list_score (set recall and precision).

Rows go to results.jsonl one per (set, system, question) as they finish, with the answer text, so
a rerun answers only what is missing (the LLM call cache makes a repeated call free) and the
report is scored afresh from the texts each time. Questions are answered question by question,
every system in turn, so a run cut short still pairs the systems on the questions it reached.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from engine.core.routes import AUTO
from engine.core.routes.summary_config import SummaryConfig
from engine.floor.base.errors import LogicRouteError
from training.common.bench_signature import answer_signature
from training.common.jsonl_store import JsonlStore
from training.common.usage_columns import usage_columns

STYLE = "reader"  # a list answer is sentences with citations, not one phrase


@dataclass(frozen=True)
class ListSystem:
    """A route with its settings: `summary` is the route as it was (the descent), `global` its
    global mode; `logic` the logic route's default preset in the reader style."""

    route: str
    summary: SummaryConfig | None = None
    about: str = ""

    def definition(self) -> dict:
        return {"route": self.route, "summary": asdict(self.summary) if self.summary else None}


SYSTEMS: dict[str, ListSystem] = {
    "chunk": ListSystem("chunk", about="the k best chunks, one answer call"),
    "logic": ListSystem("logic", about="the logic route (its reader-style preset)"),
    "summary": ListSystem("summary", SummaryConfig(mode="descend"), "the summary route's descent"),
    "global": ListSystem("summary", SummaryConfig(mode="global"), "the summary route's global mode: map, reduce"),
    "global-fixed": ListSystem(
        "summary",
        SummaryConfig(mode="global", breadth_calls=0),
        "the global mode with a fixed breadth: map_calls batches whatever the evidence (breadth_calls=0)",
    ),
    "default": ListSystem(AUTO, about="the default path as ask --kb answers: the router and list gate, escalation"),
}
DEFAULT_SYSTEMS = ("chunk", "logic", "summary", "global")
REFERENCES = ("chunk", "logic")  # every system's recall is paired against each of these


@dataclass
class ListSet:
    """One corpus's questions (one half) with the KB its folder was indexed into."""

    name: str
    path: Path
    kb: Path
    questions: list[dict] = field(default_factory=list)
    vocabulary: dict = field(default_factory=dict)


def check_systems(names: Sequence[str]) -> list[str]:
    bad = [n for n in names if n not in SYSTEMS]
    if bad or not names:
        raise LogicRouteError(f"unknown system(s) {bad}: known are {', '.join(SYSTEMS)}")
    return list(dict.fromkeys(names))


def read_set(path: str | Path, kb: str | Path, half: str) -> ListSet:
    """The questions of `half` (tune | judge | all) of one list file, with its vocabulary."""
    from training.global_qa.list_questions import load

    questions, vocab = load(path)
    chosen = [q for q in questions if half == "all" or q.get("half") == half]
    return ListSet(Path(path).stem, Path(path), Path(kb), chosen, vocab)


def signature(system: str, q: dict, setup: dict) -> str:
    """What a stored row must match to be reused: the question, the system's definition and the
    run's setup (LLM, k; the router for the default path)."""
    return answer_signature(q["question"], SYSTEMS[system].definition(), setup, routed=SYSTEMS[system].route == AUTO)


def row_key(row: dict) -> tuple[str, str, str]:
    return row["set"], row["system"], row["id"]


def answer_row(lists: ListSet, system: str, q: dict, answer: Callable[[str, str], object], sig: str) -> dict:
    """One system's answer to one question; the row keeps the text (scored later) or the error."""
    t0 = time.perf_counter()
    row: dict = {"set": lists.name, "system": system, "id": q["id"], "sig": sig, "question": q["question"]}
    try:
        ans = answer(system, q["question"])
    except LogicRouteError as e:  # one failed answer is a row to report, not the end of the run
        return {**row, "error": f"{type(e).__name__}: {e}", "text": "", "seconds": time.perf_counter() - t0}
    u = ans.usage
    return {
        **row,
        "text": ans.text,
        "route": ans.route,
        "flags": list(ans.flags),
        **usage_columns(u),
    }


def interleaved(sets: Sequence[ListSet]) -> list[tuple[ListSet, dict]]:
    """Every (set, question), taking the (set, family) groups in turn: the files list a family's
    questions together, and a run cut short should still have met every set and family."""
    groups: dict[tuple[str, str], list[tuple[ListSet, dict]]] = {}
    for lists in sets:
        for q in lists.questions:
            groups.setdefault((lists.name, q.get("family", "")), []).append((lists, q))
    out = []
    for i in range(max((len(g) for g in groups.values()), default=0)):
        out += [g[i] for g in groups.values() if i < len(g)]
    return out


def run(
    sets: Sequence[ListSet],
    systems: Sequence[str],
    store: JsonlStore,
    answer_for: Callable[[ListSet], Callable[[str, str], object]],
    *,
    setup: dict,
    redo: bool = False,
    progress: bool = True,
) -> dict:
    """Answer what `store` does not hold yet (all again with `redo`), question by question with
    every system in turn, sets and families interleaved (`interleaved`); return this run's rows
    by (set, system, id). `answer_for(set)` gives answer(system, question) -> Answer on its KB."""
    from engine.floor.base.progress import progress_bar

    todo = []
    for lists, q in interleaved(sets):
        for system in systems:
            sig = signature(system, q, setup)
            old = store.get((lists.name, system, q["id"]))
            if redo or old is None or old.get("sig") != sig or old.get("error"):
                todo.append((lists, system, q, sig))
    answerers: dict[str, Callable] = {}
    bar = progress_bar(len(todo), "bench global-lists-answer", "answer", progress)
    try:
        for lists, system, q, sig in todo:
            if lists.name not in answerers:
                answerers[lists.name] = answer_for(lists)
            store.append(answer_row(lists, system, q, answerers[lists.name], sig))
            bar.update(1)
    finally:
        bar.close()
    keys = [(s.name, system, q["id"]) for s in sets for system in systems for q in s.questions]
    return {k: store.get(k) for k in keys if store.get(k) is not None}


def stored_rows(sets: Sequence[ListSet], systems: Sequence[str], store: JsonlStore, setup: dict) -> dict:
    """The rows `store` holds for these questions under this setup (no answer is made)."""
    out = {}
    for lists in sets:
        for q in lists.questions:
            for system in systems:
                row = store.get((lists.name, system, q["id"]))
                if row is not None and row.get("sig") == signature(system, q, setup):
                    out[lists.name, system, q["id"]] = row
    return out


def scored_rows(sets: Sequence[ListSet], systems: Sequence[str], rows: dict) -> list[dict]:
    """Every answered (set, system, question) with its list score; an error scores 0 and says so."""
    from training.global_qa.list_score import score

    out = []
    for lists in sets:
        for q in lists.questions:
            for system in systems:
                row = rows.get((lists.name, system, q["id"]))
                if row is None:
                    continue
                base = {"set": lists.name, "system": system, "id": q["id"], "family": q.get("family", "")}
                base.update({c: row.get(c) for c in ("llm_calls", "tokens", "seconds", "error")})
                s = score(row.get("text") or "", q, lists.vocabulary).to_json()
                out.append({**base, **s, "gold": len(q["gold"])})
    return out


def answerer(kb, llm, k: int) -> Callable[[str, str], object]:
    """answer(system, question) on `kb`: the system's route in the reader style, no router, no
    escalation; the default path is RoutedRAG with its defaults, as `ask --kb` answers."""
    from engine.core.pipeline import RoutedRAG
    from engine.core.routes import RouteContext, answer_on, make_route

    ctx = RouteContext(kb, llm, k, STYLE)
    routes = {
        name: make_route(s.route, s.summary if s.route == "summary" else None if s.route == "chunk" else _logic(k))
        for name, s in SYSTEMS.items()
        if s.route != AUTO
    }
    rag = RoutedRAG(kb=kb, llm=llm, style=STYLE, k=k)

    def answer(system: str, question: str):
        if SYSTEMS[system].route == AUTO:
            return rag.answer(question)
        return answer_on(routes[system], question, ctx)

    return answer


def _logic(k: int):
    """The logic route as RoutedRAG runs it in the reader style (its preset for the style)."""
    from engine.core.routes.logic.config import preset_config, resolve_preset

    return preset_config(resolve_preset("auto", STYLE), k=k)
