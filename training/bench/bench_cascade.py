"""The cascade of the pipeline's escalation, measured in the routing benchmark: the router's
route, then (for a cheap answer) the structured self-check, then the logic route.

Replaying: `replay_self_checks` asks RoutedRAG.self_check_reason about every cheap answer the
router (argmax) picked, on the answer rebuilt from its results.jsonl row (its text and the chunk
ids it answered from), and stores one "self_check" row per question (resumable like the answer
rows). Only the check is new LLM work: the cheap and the logic answers are the fixed routes'.

Scoring: `check_system` builds "router+check" from those rows (training/bench/bench_analysis.py calls
it): a cheap answer goes on to logic when the text rule fires or the check says its passages do
not answer the question. Cost: the router's overhead + every check made (escalated or not) + on
escalation the cheap attempt's answer and the logic answer. Pure, like the analysis: reads rows.

This module imports neither training.bench.benchmark nor training.bench.bench_analysis (both use it): the
run (training.bench.benchmark.Run) and the systems (training.bench.bench_analysis.Systems) come in as
arguments.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence

from engine.core.routes import CHEAP_ROUTES
from engine.core.routes.common import looks_unanswered
from engine.floor.base.errors import LogicRouteError
from engine.floor.base.trace import Trace
from engine.floor.base.types import Answer, Usage

STRONG = "logic"
SYSTEM = "router+check"
CHECK_COSTS = ("llm_calls", "prompt_tokens", "completion_tokens", "seconds", "llm_seconds_uncached", "cached_calls")


def check_sig(run, it, route: str, row: dict) -> dict:
    """A check counts only for the same setup and the same answer and passages: a re-answered
    row with another text is checked again."""
    seen = f"{row.get('pred') or ''}\n{','.join(map(str, row.get('retrieved') or []))}"
    return {**run.sig(it, route), "answer": hashlib.sha1(seen.encode()).hexdigest()[:16]}


def rebuilt_answer(row: dict, route: str) -> Answer:
    """The cheap answer as the pipeline held it, from its row: the text and the chunk ids."""
    trace = Trace(retrieved=[{"chunk_id": c} for c in row.get("retrieved") or []])
    return Answer(text=str(row.get("pred") or ""), route=route, usage=Usage(), trace=trace)


def _check_row(run, it, route: str, row: dict, sig: dict) -> dict:
    """Ask the item's RoutedRAG about the cheap answer rebuilt from its row; the check's row
    holds the reason (None = supported, or no verdict) and what the check cost."""
    ans = rebuilt_answer(row, route)
    t0 = time.perf_counter()
    reason, error = None, None
    try:
        reason = run.rags[it.kb].self_check_reason(it.text, ans)
    except LogicRouteError as e:  # a failed check keeps the cheap answer, as in the pipeline
        error = f"{type(e).__name__}: {e}"
    u = ans.usage
    return {
        "kind": "self_check",
        "system": route,
        "key": it.key,
        "dataset": it.dataset,
        "id": it.id,
        "sig": sig,
        "route": route,
        "reason": reason,
        "error": error,
        "llm_calls": u.llm_calls,
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "cached_calls": u.cached_calls,
        "seconds": round(time.perf_counter() - t0, 4),
        "llm_seconds_uncached": round(u.llm_seconds_uncached, 3),
        "flags": list(ans.flags),
    }


def replay_self_checks(run, fixed: dict[tuple[str, str], dict], router_choice: dict[str, str]) -> dict[str, dict]:
    """The self-check row per item key, for every question whose router route is cheap and whose
    cheap answer does not already trip the text rule. Rows of earlier runs with the same
    signature are reused; the rest are asked now and appended as they finish. Rows without the
    chunk ids they answered from (older runs, label files) cannot be replayed: left out, noted."""
    checks: dict[str, dict] = {}
    todo: list[tuple] = []
    skipped = 0
    for it in run.items.values():
        route = router_choice.get(it.key)
        if route not in CHEAP_ROUTES:
            continue
        row = fixed[(route, it.key)]
        if looks_unanswered(str(row.get("pred") or "")):
            continue  # escalated by the text rule: the pipeline makes no check
        if "retrieved" not in row:
            skipped += 1
            continue
        sig = check_sig(run, it, route, row)
        old = run.stored("self_check", route, it.key, sig)
        if old is not None:
            checks[it.key] = old
        else:
            todo.append((it, route, row, sig))
    if skipped:
        run.notes.append(
            f"{SYSTEM}: {skipped} router cheap answer(s) have no stored chunk ids (an older run or a label "
            "file) and were not self-checked: only the text rule escalates them"
        )

    def check_job(job: tuple) -> None:
        it, route, row, sig = job
        out = _check_row(run, it, route, row, sig)
        run.store.append(out)
        checks[it.key] = out

    run.parallel(todo, check_job, "self-checks")
    errors = sum(1 for c in checks.values() if c.get("error"))
    if errors:
        run.notes.append(f"{SYSTEM}: {errors} self-check(s) failed; those cheap answers were kept")
    return checks


def _plus(base: dict | None, extra: dict | None) -> dict:
    """A routing cost row: `base` with the check's costs added."""
    out = dict(base or {})
    for c in CHECK_COSTS:
        out[c] = float(out.get(c) or 0.0) + float((extra or {}).get(c) or 0.0)
    return out


def check_system(
    s,
    keys: Sequence[str],
    per_route: dict[str, dict],
    checks: dict[str, dict],
    metric: str,
    notes: list[str],
) -> None:
    """router+check into `s` (a bench_analysis.Systems with the router in it): the router's
    route, except a cheap answer that the text rule or the self-check rejects goes on to logic.
    Every check made is paid for (overhead); an escalation also pays for the cheap attempt."""
    router = s.choices["router"]
    choice, first, overhead = {}, {}, {}
    sent, better = 0, 0
    for k in keys:
        r, check = router[k], checks.get(k)
        overhead[k] = _plus(s.overhead.get("router", {}).get(k), check)
        if r in CHEAP_ROUTES:
            by_check = check is not None and check.get("reason") is not None
            if by_check or looks_unanswered(str(per_route[k][r].get("pred") or "")):
                first[k] = r
                if by_check:
                    sent += 1
                    better += float(per_route[k][STRONG].get(metric) or 0.0) > float(per_route[k][r].get(metric) or 0.0)
                r = STRONG
        choice[k] = r
    s.choices[SYSTEM], s.overhead[SYSTEM], s.escalated[SYSTEM] = choice, overhead, first
    cheap = sum(1 for k in keys if router[k] in CHEAP_ROUTES)
    notes.append(
        f"{SYSTEM}: the self-check sent {sent} of the router's {cheap} cheap answers to logic ({len(checks)} "
        f"checked); logic beat the cheap answer's {metric} on {better} of them"
    )
