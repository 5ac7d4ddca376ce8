"""The report of `logicroute adapt` (report.json + report.md in the adaptation's folder): the
questions written, kept and rejected; the label distribution; on the held-out part the routed
score, tokens and LLM calls of the generalist, the specialist, each fixed route and the oracle;
and the time and LLM calls each phase took, per question kind.

Held-out scores are read from the label rows (each route's answer was made and scored once), so
comparing routers costs no LLM call. Routers decide by argmax here; `far` is the share of the
held-out questions each router's out-of-distribution guard flags (those `ask` would send to its
fallback instead)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from engine.floor.base.files import atomic_write_text
from training.adapt.adapt_labels import AGREEMENT_METRIC, OWN, WRITTEN

SYSTEM_ORDER = ("generalist", "specialist")


def _cost(row: dict, route: str, key: str) -> float:
    c = row["costs"][route]
    value = c.get(key, c.get(f"{key}_est"))
    return float(value or 0.0)


def systems_table(
    rows: Sequence[dict],
    decisions: dict[str, list[str]],
    run_routes: Sequence[str],
    overhead: dict[str, list[dict]] | None = None,
) -> dict:
    """name -> {n, score, tokens, llm_calls, route_share}: each router's decisions, every route
    run (always that route) and the oracle, averaged over `rows`. `overhead[name]` (per row:
    tokens, llm_calls) is what an escalating system paid for the cheap attempt it replaced."""
    picks = dict(decisions)
    for r in run_routes:
        picks[f"always {r}"] = [r] * len(rows)
    picks["oracle"] = [row["oracle"] for row in rows]
    out = {}
    for name, chosen in picks.items():
        share = Counter(chosen)
        extra = (overhead or {}).get(name) or [{}] * len(rows)
        tokens = [_cost(row, p, "tokens") + e.get("tokens", 0.0) for row, p, e in zip(rows, chosen, extra)]
        calls = [_cost(row, p, "llm_calls") + e.get("llm_calls", 0.0) for row, p, e in zip(rows, chosen, extra)]
        out[name] = {
            "n": len(rows),
            "score": round(100 * float(np.mean([row["scores"][p] for row, p in zip(rows, chosen)])), 1),
            "tokens": round(float(np.mean(tokens)), 1),
            "llm_calls": round(float(np.mean(calls)), 2),
            "route_share": {r: round(share[r] / len(rows), 3) for r in rows[0]["scores"]},
        }
    return out


def routed(rows: Sequence[dict], routers: dict, run_routes: Sequence[str], metric: str) -> dict:
    """The systems table of `rows` with each router's argmax decisions, and each router's far
    share. A router with a calibrated escalation threshold (Router.escalate_below: the adapted
    one) is judged as `ask` runs it too: "<name> + confidence", its cheap answers below the
    threshold escalated to logic, paying for both (training.fitting.lodo_cascade.escalate)."""
    from training.fitting.lodo_cascade import escalate

    questions = [r["question"] for r in rows]
    decisions, far, overhead = {}, {}, {}
    for name, router in routers.items():
        p = router.probs_array(questions)
        decisions[name] = [router.routes[i] for i in p.argmax(1)]
        flags = [o["far"] for o in router.ood(questions) if o is not None]
        far[name] = round(sum(flags) / len(rows), 3) if flags else None
        below = getattr(router, "escalate_below", None)
        if below is not None:
            escalated = f"{name} + confidence"
            decisions[escalated], overhead[escalated] = escalate(rows, decisions[name], below)
    table = systems_table(rows, decisions, run_routes, overhead)
    return {"metric": metric, "systems": table, "far_share": far}


def heldout_section(rows: Sequence[dict], routers: dict, run_routes: Sequence[str]) -> dict:
    """Per dataset of the held-out rows (written: F1 against the constructed answer; own:
    agreement), the systems table, and each router's far share."""
    out = {}
    for ds, metric in ((WRITTEN, "token F1 against the constructed answer"), (OWN, AGREEMENT_METRIC)):
        part = [r for r in rows if r.get("dataset") == ds]
        if part:
            out[ds] = routed(part, routers, run_routes, metric)
    return out


def judged_section(files: Sequence, routers: dict) -> dict:
    """Per label file of real questions (answer-label rows `logicroute label` made: each route's
    answer already scored against the gold answer), the routers judged on them: no LLM call."""
    from training.labels.label_arrays import load_label_files, routes_of

    out = {}
    for f in files:
        rows = load_label_files([f])
        out[str(f)] = routed(rows, routers, routes_of(rows), f"{rows[0].get('metric', 'score')} against gold answers")
    return out


RIGHT = 0.5  # a route "answers right" at this score or more


def needs_logic(row: dict, run_routes: Sequence[str]) -> bool:
    """Every cheaper route run fails and logic succeeds: the question needs the DAG's second hop."""
    cheap = [r for r in run_routes if r != "logic"]
    return row["scores"].get("logic", 0.0) >= RIGHT and all(row["scores"][r] < RIGHT for r in cheap)


def label_section(rows: Sequence[dict], run_routes: Sequence[str]) -> dict:
    """The label distribution (oracle route counts) and, per question kind, the share of questions
    each route answered right (score >= RIGHT), the share only logic answered right, and the
    labelling's LLM calls, tokens and seconds."""
    kinds: dict[str, dict] = {}
    for r in rows:
        k = kinds.setdefault(str(r.get("type")), {"n": 0, "right": Counter(), "llm_calls": 0, "tokens": 0, "s": 0.0})
        k["n"] += 1
        k["right"]["only logic"] += needs_logic(r, run_routes)
        for route in run_routes:
            k["right"][route] += r["scores"][route] >= RIGHT
            c = r["costs"][route]
            k["llm_calls"] += int(c.get("llm_calls", 0))
            k["tokens"] += int(c.get("tokens", 0))
            k["s"] += float(c.get("seconds", 0.0))
    per_kind = {
        kind: {
            "n": k["n"],
            "right_share": {route: round(k["right"][route] / k["n"], 3) for route in run_routes},
            "only_logic_share": round(k["right"]["only logic"] / k["n"], 3),
            "llm_calls": k["llm_calls"],
            "tokens": k["tokens"],
            "seconds": round(k["s"], 1),
        }
        for kind, k in sorted(kinds.items())
    }
    return {
        "rows": len(rows),
        "oracle": dict(Counter(r["oracle"] for r in rows)),
        "oracle_by_dataset": {
            ds: dict(Counter(r["oracle"] for r in rows if r.get("dataset") == ds))
            for ds in sorted({str(r.get("dataset")) for r in rows})
        },
        "all_zero": sum(bool(r.get("all_zero")) for r in rows),
        "per_kind": per_kind,
    }


def writing_section(report) -> dict:
    """The writer's report (training.adapt.adapt_questions.WritingReport) as JSON: over every row of its
    file, earlier runs' included."""
    if report is None:
        return {}
    return {
        "attempted": dict(getattr(report, "attempted", {}) or {}),
        "written": dict(report.written),
        "kept": dict(report.kept),
        "rejected": dict(report.rejected),
        "rejected_by_kind": {k: dict(v) for k, v in (getattr(report, "rejected_by_kind", {}) or {}).items()},
        "cost_by_kind": dict(getattr(report, "cost_by_kind", {}) or {}),
        "llm_calls": report.llm_calls,
        "tokens": report.prompt_tokens + report.completion_tokens,
        "seconds": round(report.seconds, 1),
    }


def examples(rows: Sequence[dict], run_routes: Sequence[str], per_kind: int = 20) -> dict[str, list[dict]]:
    """Up to `per_kind` label rows of each kind: the question, its answer, each route's answer and score."""
    out: dict[str, list[dict]] = {}
    for r in rows:
        shown = out.setdefault(str(r.get("type")), [])
        if len(shown) < per_kind:
            pred = r.get("answers_pred") or {}
            shown.append(
                {
                    "question": r["question"],
                    "answer": (r.get("answers") or [""])[0],
                    "routes": {x: {"answer": pred.get(x), "score": r["scores"][x]} for x in run_routes},
                }
            )
    return out


def write_report(folder: Path, report: dict) -> Path:
    """report.json and report.md in `folder` (atomic writes); returns the Markdown's path."""
    atomic_write_text(folder / "report.json", json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    md = folder / "report.md"
    atomic_write_text(md, render_markdown(report))
    return md


def _table(head: Sequence[str], body: list[Sequence]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(x) for x in row) + " |" for row in body]
    return lines + [""]


def render_markdown(rep: dict) -> str:
    lines = [f"# Adapting the router to {rep['kb']}", ""]
    lines += [f"LLM `{rep['llm']}`, generalist `{rep['generalist']}`, routes run: {', '.join(rep['routes_run'])}.", ""]
    w = rep.get("writing") or {}
    if w:
        lines += ["## Questions written", "", "Over every question in the writer's file (earlier runs' too).", ""]
        kinds = sorted(set(w["attempted"]) | set(w["written"]) | set(w["kept"]))
        head = ("kind", "tried", "written", "kept", "rejected (why)", "LLM calls", "tokens", "seconds")
        body = []
        for k in kinds:
            why = ", ".join(f"{r} {c}" for r, c in sorted(w["rejected_by_kind"].get(k, {}).items()))
            cost = w["cost_by_kind"].get(k, {})
            row = (w["attempted"].get(k, 0), w["written"].get(k, 0), w["kept"].get(k, 0), why or "-")
            body.append((k, *row, cost.get("llm_calls", ""), cost.get("tokens", ""), cost.get("seconds", "")))
        lines += _table(head, body)
        lines += _table(("rejected because", "questions"), sorted(w["rejected"].items()))
        lines += [f"Notes: {'; '.join(rep['writing_notes'])}", ""] if rep.get("writing_notes") else []
    lab = rep["labels"]
    lines += ["## Labels", "", f"{lab['rows']} rows, {lab['all_zero']} where no route answered (not trained on).", ""]
    lines += _table(
        ("dataset", *rep["routes"]),
        [(d, *(c.get(r, 0) for r in rep["routes"])) for d, c in lab["oracle_by_dataset"].items()],
    )
    lines += [
        f"Per question kind: the share each route answered right (score >= {RIGHT}), the share only logic "
        "answered right (the cheaper routes failed: the question needs its second hop), and what labelling cost.",
        "",
    ]
    head = ("kind", "n", *(f"{r} right" for r in rep["routes_run"]), "only logic", "LLM calls", "tokens", "seconds")
    body = [
        (k, v["n"], *(v["right_share"][r] for r in rep["routes_run"]), v["only_logic_share"])
        + (v["llm_calls"], v["tokens"], v["seconds"])
        for k, v in lab["per_kind"].items()
    ]
    lines += _table(head, body)
    below, budget = rep.get("escalate_below"), rep.get("escalation_budget")
    within = "without a token cap" if budget is None else f"within {budget:.0%} of always-logic's tokens there"
    lines += [
        "## Escalation threshold",
        "",
        f"A routed chunk or summary answer whose confidence is under {below:.4g} goes on to the logic route "
        "(fitted on the training part: the best mean of score minus the labels' cost weight times tokens over the "
        f"costliest route's, {within}; `ask` applies it)."
        if below is not None
        else f"None: escalating by the answer's confidence did not pay on the training part {within} (or the LLM "
        "reports no token probabilities); `ask` escalates only as configured.",
        "",
    ]
    parts = [(f"Held-out ({ds}", part) for ds, part in rep["heldout"].items()]
    parts += [(f"Judged on real questions ({f}", part) for f, part in (rep.get("judged") or {}).items()]
    for title, part in parts:
        lines += [f"## {title}: {part['metric']})", ""]
        body = [
            (name, m["n"], m["score"], m["tokens"], m["llm_calls"], _shares(m["route_share"]))
            for name, m in part["systems"].items()
        ]
        lines += _table(("system", "n", "score", "tokens", "LLM calls", "routes"), body)
        far = ", ".join(f"{k} {v}" for k, v in part["far_share"].items())
        lines += [f"Share flagged out of distribution: {far}.", ""]
    lines += ["## Time and LLM calls of this run", ""]
    body = [(p, v.get("seconds"), v.get("llm_calls", ""), v.get("tokens", "")) for p, v in rep["phases"].items()]
    lines += _table(("phase", "seconds", "LLM calls", "tokens"), body)
    lines += [f"Router saved to `{rep['checkpoint']}` and recorded in the KB: `ask` and `serve` use it.", ""]
    for kind, shown in (rep.get("examples") or {}).items():
        lines += [f"## Examples: {kind}", ""]
        head = ("question", "answer", *(f"{r} (score)" for r in rep["routes_run"]))
        body = [
            (_cell(e["question"]), _cell(e["answer"]))
            + tuple(f"{_cell(e['routes'][r]['answer'])} ({e['routes'][r]['score']:.2f})" for r in rep["routes_run"])
            for e in shown
        ]
        lines += _table(head, body)
    return "\n".join(lines)


def _shares(share: dict) -> str:
    return ", ".join(f"{r} {v:.0%}" for r, v in share.items() if v)


def _cell(text) -> str:
    """Text fit for one Markdown table cell."""
    return " ".join(str(text or "").split()).replace("|", "\\|")[:200]
