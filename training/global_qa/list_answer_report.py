"""The report of `bench global-lists-answer` (training.global_qa.list_answer): per set and pooled,
each system's mean recall and precision of the listed set, its cost a question, and its recall
paired against each reference system (chunk, logic) with a 95% bootstrap interval, as
training.docs_qa.bench_docs_score.paired_against pairs right answers (the bootstrap is bench
global's: training.global_qa.bench_global_report.paired)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from engine.floor.base.files import atomic_write_json, atomic_write_text

COSTS = ("llm_calls", "tokens", "seconds")


def _mean(xs: Sequence[float], digits: int = 1) -> float | None:
    return round(sum(xs) / len(xs), digits) if xs else None


def tally(rows: Sequence[dict]) -> dict:
    """One system's figures: mean recall and precision (points of %), mean cost a question."""
    out = {
        "questions": len(rows),
        "recall": _mean([100 * r["recall"] for r in rows]),
        "precision": _mean([100 * r["precision"] for r in rows]),
        "errors": sum(1 for r in rows if r.get("error")),
    }
    for c in COSTS:
        out[f"{c}_per_q"] = _mean([float(r.get(c) or 0) for r in rows], 2)
    return out


def paired(rows: Sequence[dict], reference: Sequence[dict]) -> dict | None:
    """Recall of `rows` minus the reference's on the questions both answered (points of %), with
    a 95% bootstrap interval over the questions (bench global's, 10,000 draws, seed 0), questions
    won and lost, and the ratio of tokens. None: no question in common."""
    from training.global_qa.bench_global_report import paired as bootstrap

    ref = {(r["set"], r["id"]): r for r in reference}
    both = [(r, ref[r["set"], r["id"]]) for r in rows if (r["set"], r["id"]) in ref]
    if not both:
        return None
    b = bootstrap([a["recall"] for a, _ in both], [r["recall"] for _, r in both])
    tokens_a = sum(float(a.get("tokens") or 0) for a, _ in both)
    tokens_b = sum(float(r.get("tokens") or 0) for _, r in both)
    return {
        "questions": len(both),
        "recall_diff": b["mean_diff"],
        "ci95": b["ci95"],
        "wins": b["wins"],
        "losses": b["losses"],
        "tokens_ratio": round(tokens_a / tokens_b, 2) if tokens_b else None,
    }


def build(scored: Sequence[dict], sets: Sequence[str], systems: Sequence[str], run: dict) -> dict:
    """{"run", "sets": {set | "pooled": {system: tally + "vs": {reference: paired}}}}."""
    scopes = {s: [r for r in scored if r["set"] == s] for s in sets}
    if len(sets) > 1:
        scopes["pooled"] = list(scored)
    out: dict = {"run": run, "sets": {}}
    for scope, rows in scopes.items():
        per: dict = {}
        for system in systems:
            mine = [r for r in rows if r["system"] == system]
            if not mine:
                continue
            t = tally(mine)
            t["vs"] = {
                ref: paired(mine, [r for r in rows if r["system"] == ref])
                for ref in ("chunk", "logic")
                if ref != system and ref in systems
            }
            per[system] = t
        out["sets"][scope] = per
    return out


def _diff(p: dict | None) -> str:
    if not p:
        return "–"
    return f"{p['recall_diff']:+.1f} [{p['ci95'][0]:+.1f}, {p['ci95'][1]:+.1f}] ({p['wins']}/{p['losses']})"


def markdown(report: dict) -> str:
    run = report["run"]
    lines = [
        "# List questions over a whole corpus: answers (`bench global-lists-answer`)",
        "",
        f"`{run['command']}`",
        "",
        f"Half: **{run['half']}**. LLM: {run['llm']}, k={run['k']}, style {run['style']}. {run.get('machine', '')}",
        "",
        "Recall and precision: mean over questions of the listed set's recall and precision (points of %,"
        " training/global_qa/list_score.py). Paired: the system's recall minus the reference's on the same"
        " questions, mean with a 95% bootstrap interval (questions won/lost).",
        "",
    ]
    for name, about in run.get("systems", {}).items():
        lines.append(f"- `{name}`: {about}")
    for scope, per in report["sets"].items():
        lines += [
            "",
            f"## {scope}",
            "",
            "| system | n | recall | precision | calls/q | tokens/q | s/q | recall vs chunk | recall vs logic |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for system, t in per.items():
            vs = t.get("vs", {})
            lines.append(
                f"| {system} | {t['questions']} | {t['recall']} | {t['precision']} | {t['llm_calls_per_q']} | "
                f"{t['tokens_per_q']} | {t['seconds_per_q']} | {_diff(vs.get('chunk'))} | {_diff(vs.get('logic'))} |"
            )
    for note in run.get("notes", []):
        lines += ["", f"Note: {note}"]
    return "\n".join(lines) + "\n"


def write(report: dict, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "report.json", report)
    path = out / "report.md"
    atomic_write_text(path, markdown(report))
    return path
