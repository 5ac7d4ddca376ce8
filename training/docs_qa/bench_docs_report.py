"""The report of `logicroute bench docs`: per set and pooled over the sets, each system's tallies
(training.docs_qa.bench_docs_score.tally) and its paired difference against the reference system,
written as report.md (a table per set and one pooled) and report.json."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from engine.floor.base.files import atomic_write_json, atomic_write_text
from training.bench.bench_report import markdown_table
from training.docs_qa.bench_docs_score import paired_against, tally

POOLED = "pooled"

HEAD = (
    "system",
    "positives right",
    "pos. abstained",
    "pos. wrong",
    "negatives abstained (right)",
    "neg. answered (fabricated)",
    "off-topic abstained",
    "near misses abstained",
    "right, all",
    "positives flagged far",
    "LLM calls/q",
    "tokens/q",
    "s/q",
    "LLM s/q uncached",
    "vs {ref}: right (95% interval)",
    "vs {ref}: calls/q",
)


def build(scored: Sequence[dict], sets: Sequence[str], systems: Sequence[str], reference: str, run: dict) -> dict:
    """{"run", "sets": {set: {system: tally + "vs_reference"}}, "pooled": {...}} over scored rows;
    a set with several sets' rows pooled as "pooled" when there is more than one set."""
    scopes = {s: [r for r in scored if r["set"] == s] for s in sets}
    if len(sets) > 1:
        scopes[POOLED] = list(scored)
    out: dict = {"run": run, "reference": reference, "sets": {}}
    for scope, rows in scopes.items():
        per: dict = {}
        for system in systems:
            mine = [r for r in rows if r["system"] == system]
            if not mine:
                continue
            per[system] = tally(mine)
            if system != reference:
                # paired by (set, id): the pooled scope holds the same id once per set
                keyed = lambda rs: [{**r, "id": f"{r['set']}/{r['id']}"} for r in rs]  # noqa: E731
                ref = [r for r in rows if r["system"] == reference]
                per[system]["vs_reference"] = paired_against(keyed(mine), keyed(ref)) if ref else None
        out["sets"][scope] = per
    return out


def _count(n: int, d: int) -> str:
    return f"{n}/{d} ({100 * n / d:.0f}%)" if d else "-"


def _num(x, nd: int = 2) -> str:
    return "-" if x is None else f"{x:,.{nd}f}"


def _vs(p: dict | None) -> tuple[str, str]:
    if not p:
        return "-", "-"
    low, high = p["ci95"]
    return (
        f"{p['right_diff']:+.1f} pts ({low:+.1f} to {high:+.1f}; +{p['wins']} -{p['losses']})",
        f"{p['calls_diff']:+.2f}",
    )


def table(per: dict, reference: str) -> list[str]:
    rows = []
    for system, t in per.items():
        vs_right, vs_calls = _vs(t.get("vs_reference"))
        rows.append(
            (
                f"`{system}`",
                _count(t["positives_right"], t["positives"]),
                _count(t["positives_abstained"], t["positives"]),
                _count(t["positives_wrong"], t["positives"]),
                _count(t["negatives_abstained"], t["negatives"]),
                _count(t["negatives_answered"], t["negatives"]),
                _count(t["off_topic_abstained"], t["off_topic"]),
                _count(t["near_miss_abstained"], t["near_miss"]),
                _num(t["right_pct"], 1) + "%",
                _count(t.get("positives_flagged_far", 0), t["positives"]),
                _num(t["llm_calls_per_q"]),
                _num(t["tokens_per_q"], 0),
                _num(t["seconds_per_q"], 1),
                _num(t["llm_seconds_uncached_per_q"], 1),
                vs_right,
                vs_calls,
            )
        )
    return markdown_table([h.format(ref=reference) for h in HEAD], rows)


def markdown(report: dict) -> str:
    run, ref = report["run"], report["reference"]
    lines = [
        "# bench docs: answers and abstentions on documentation folders",
        "",
        f"Command: `{run['command']}`",
        "",
        f"Half: **{run['half']}**; style: {run['style']}; LLM: {run['llm']}; passages per retrieval: {run['k']}. "
        f"Machine: {run['machine']}.",
        "",
        "A positive is right when the answer does not abstain and holds every phrase its `must` lists; "
        "it abstained when the answer says the documents do not hold it, and is wrong otherwise. A "
        "negative (a question the folder does not answer) is right when the answer abstains; answered, "
        "it is a fabrication. Costs are means a question from each answer's usage: LLM calls, prompt + "
        "completion tokens, wall seconds (cached calls are fast) and the LLM seconds the calls took "
        "when they were made (the first answer of a run that loads the local model carries its load). "
        f"The last two columns pair each system with `{ref}` on the same questions: the difference in "
        "right answers (all questions) with a 95% bootstrap interval, questions won and lost, and the "
        "difference in LLM calls a question.",
        "",
    ]
    for scope, per in report["sets"].items():
        sets = run["sets"]
        if scope == POOLED:
            title = f"Pooled over {', '.join(s['name'] for s in sets)}"
        else:
            where = next((s for s in sets if s["name"] == scope), {})
            title = f"{scope}: {where.get('file', '')} on KB {where.get('kb', '')}"
        lines += [f"## {title}", "", *table(per, ref), ""]
    if run.get("notes"):
        lines += ["## Notes", "", *[f"- {n}" for n in run["notes"]], ""]
    return "\n".join(lines)


def write(report: dict, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out_dir / "report.json", report)
    path = out_dir / "report.md"
    atomic_write_text(path, markdown(report))
    return path
