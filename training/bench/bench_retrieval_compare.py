"""The routing benchmark run once per retrieval mode (`logicroute benchmark --retrieval dense
--retrieval hybrid`): every system's score and tokens side by side, per data set and pooled, written
to OUT/retrieval.md and OUT/retrieval.json. Each mode's own run and report live in OUT/<mode>/."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from training.bench.bench_report import markdown_table

SYSTEMS = ("chunk", "summary", "logic", "router", "router+check", "oracle", "llm_router")


def compare_rows(reports: Mapping[str, dict], table: str) -> list[dict]:
    """One row per system present in every mode's report: its metric and prompt+completion tokens
    per question under each mode (first mode = the baseline of the delta and ratio columns)."""
    modes = list(reports)
    metric = reports[modes[0]]["config"]["metric"]
    rows = []
    for system in SYSTEMS:
        cells = [reports[m]["systems"].get(table, {}).get(system) for m in modes]
        if any(c is None for c in cells):
            continue
        row = {"system": system, "n": cells[0]["n"]}
        for m, c in zip(modes, cells):
            row[m] = {"score": c[metric], "tokens": c["prompt_tokens"] + c["completion_tokens"]}
        rows.append(row)
    return rows


def render(reports: Mapping[str, dict], tables: Sequence[str], command: str = "") -> str:
    modes = list(reports)
    base = modes[0]
    metric = reports[base]["config"]["metric"]
    lines = [
        f"# The routing benchmark under {' and '.join(modes)} retrieval",
        "",
        f"Same questions, KB passages, LLM and router; only the searches differ. {metric.upper()} in points; "
        f"tokens per question (prompt + completion); deltas and ratios against {base}.",
    ]
    if command:
        lines += ["", "```bash", command, "```"]
    for table in tables:
        rows = compare_rows(reports, table)
        if not rows:
            continue
        head = ["system", *(f"{m} {metric}" for m in modes), *(f"Δ {m}" for m in modes[1:])]
        head += [*(f"{m} tokens" for m in modes), *(f"{m}/{base} tokens" for m in modes[1:])]
        body = []
        for r in rows:
            cells = [r["system"], *(f"{100 * r[m]['score']:.1f}" for m in modes)]
            cells += [f"{100 * (r[m]['score'] - r[base]['score']):+.1f}" for m in modes[1:]]
            cells += [f"{r[m]['tokens']:,.0f}" for m in modes]
            cells += [f"{r[m]['tokens'] / max(r[base]['tokens'], 1e-9):.2f}" for m in modes[1:]]
            body.append(cells)
        lines += ["", f"## {table} ({rows[0]['n']} questions)", "", *markdown_table(head, body)]
    return "\n".join(lines) + "\n"


def write_comparison(reports: Mapping[str, dict], out: str | Path, command: str = "") -> Path:
    from engine.floor.base.files import atomic_write_json, atomic_write_text

    out = Path(out)
    first = next(iter(reports.values()))
    tables = [t for t in first["systems"] if t != "pooled"] + ["pooled"]
    atomic_write_json(
        out / "retrieval.json",
        {"modes": list(reports), "command": command, "tables": {t: compare_rows(reports, t) for t in tables}},
    )
    path = out / "retrieval.md"
    atomic_write_text(path, render(reports, ["pooled", *tables[:-1]], command))
    return path
