"""The routed rows of bench global: what a router and the oracle would have scored, from the
answers already in the store (no LLM call).

Once chunk, summary and logic have answered the same question, a router's pick among the three
selects one of those answers: the "router" row. The "oracle" row picks, per question, the answer
with the best score (ties go to the fewest tokens): the ceiling of any router on these answers.
Both rows are scored, costed and compared with chunk like any system, and the router's route
shares per question type show whether it learned the split the set is built on (global questions
to summary, fact questions to chunk).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from engine.core.routes import ROUTES  # the router's routes, each the bench system of that name

DERIVED = ("router", "oracle")
ABOUT = {
    "router": "the router's pick among chunk, summary and logic, answered by that system (no new call)",
    "oracle": "the best of chunk, summary and logic per question by ROUGE-L, ties to the fewest tokens",
}


def can_route(systems) -> bool:
    return all(r in systems for r in ROUTES)


def route_questions(questions: list, checkpoint: str | None, embedder: Any = None, kb=None) -> dict[str, dict]:
    """{question id: the router's decision (engine.core.decide.Decision.to_dict without the out-of-distribution
    stage: route, probs, ood, ...)}; checkpoint None = the shipped one; `kb`: the KB answering them
    (router.kb_router.fit_to_kb: no list gate on single passages)."""
    from engine.core.decide import Decider
    from router.checkpoint import load_router
    from router.kb_router import fit_to_kb

    router = load_router(Path(checkpoint) if checkpoint else None, embedder=embedder)
    if kb is not None:
        fit_to_kb(router, kb)
    decided = Decider().decide_many(router, [q.text for q in questions])
    return {q.id: d.to_dict() for q, d in zip(questions, decided)}


def _tokens(row: dict) -> int:
    return (row.get("prompt_tokens") or 0) + (row.get("completion_tokens") or 0)


def routed_rows(rows: list[dict], decisions: dict[str, dict], metric: str = "rouge_l") -> list[dict]:
    """Oracle rows for every question that chunk, summary and logic all answered, and router rows
    for those of them the router decided; each is a copy of the picked answer's row, renamed,
    with `picked` naming the system it came from."""
    by = {(r["system"], r["qid"]): r for r in rows}
    out = []
    for qid in dict.fromkeys(r["qid"] for r in rows):
        have = {s: by[s, qid] for s in ROUTES if (s, qid) in by}
        if len(have) < len(ROUTES):
            continue
        best = max(ROUTES, key=lambda s: (have[s].get(metric) or 0.0, -_tokens(have[s])))
        out.append({**have[best], "system": "oracle", "picked": best})
        if qid in decisions:
            pick = decisions[qid]["route"]
            out.append({**have[pick], "system": "router", "picked": pick, "probs": decisions[qid]["probs"]})
    return out


def route_shares(rows: list[dict], types) -> dict[str, dict[str, int]]:
    """{type: {route: how many questions the router sent there}} from the router rows."""
    return {t: dict(Counter(r["picked"] for r in rows if r["system"] == "router" and r["type"] == t)) for t in types}


def shares_markdown(shares: dict[str, dict[str, int]]) -> list[str]:
    from training.bench.bench_report import markdown_table

    rows = []
    for t, c in shares.items():
        n = sum(c.values())
        rows.append([t, n, *(f"{c.get(r, 0)} ({100 * c.get(r, 0) / n:.0f}%)" if n else "" for r in ROUTES)])
    return markdown_table(["question type", "n", *ROUTES], [[str(x) for x in r] for r in rows])
