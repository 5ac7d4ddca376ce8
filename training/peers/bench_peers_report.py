"""The report of `logicroute bench peers`: one table per data set in the LogicRAG paper's shape
(indexing tokens and time, per-query tokens and time, F1 and string accuracy), every system's
settings, and its errors. Written as docs/results/peers/<set>.md and .json."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, replace
from pathlib import Path

from engine.floor.base.files import atomic_write_json, atomic_write_text
from training.bench.bench_report import markdown_table
from training.common.answer_scores import answer_scores, answer_text
from training.peers.bench_peers_compare import by_type_lines, comparison_lines, comparisons, f1_by_type

COLUMNS = (
    "system",
    "questions",
    "errors",
    "index LLM calls",
    "index tokens",
    "index min",
    "LLM calls/q",
    "tokens/q",
    "s/q",
    "EM",
    "F1",
    "Acc",
)


def _mean(rows: list[dict], key: str) -> float:
    return sum(r.get(key) or 0 for r in rows) / len(rows) if rows else 0.0


def _per(index_rows: list[dict], key: str) -> float:
    """Per passage indexed: what sizes a longer run."""
    n = sum(r["passages"] for r in index_rows)
    return round(sum(r[key] for r in index_rows) / n, 2) if n else 0.0


def scored_again(run):
    """`run` with every answer scored again from its reply: a row keeps the scores of the code that
    wrote it (a long build's answers are written by the process that started it), and one report
    scores every system's replies by one rule. A failed answer's reply is "" and scores 0."""
    rows = [{**r, **answer_scores("" if r.get("error") else r["pred"], r["golds"])} for r in run.answer_rows]
    return replace(run, answer_rows=rows)


def system_row(run) -> dict:
    """One system's figures; scores over every question it was asked, a failed one scoring 0."""
    ix, ans = run.index_rows, run.answer_rows
    return {
        "system": run.name,
        "questions": len(ans),
        "errors": sum(1 for r in ans if r.get("error")),
        "index_llm_calls": sum(r["llm_calls"] for r in ix),
        "index_prompt_tokens": sum(r["prompt_tokens"] for r in ix),
        "index_completion_tokens": sum(r["completion_tokens"] for r in ix),
        "index_minutes": round(sum(r["seconds"] for r in ix) / 60, 2),
        "index_passages": sum(r["passages"] for r in ix),
        "index_calls_per_passage": _per(ix, "llm_calls"),
        "index_tokens_per_passage": round(_per(ix, "prompt_tokens") + _per(ix, "completion_tokens"), 1),
        "index_seconds_per_passage": _per(ix, "seconds"),
        "index_errors": sum(r["errors"] for r in ix),
        "index_failed_calls": sum(r.get("failed_calls", 0) for r in ix),
        "index_cached_calls": sum(r.get("cached_calls", 0) for r in ix),
        "llm_calls_per_q": round(_mean(ans, "llm_calls"), 2),
        "prompt_tokens_per_q": round(_mean(ans, "prompt_tokens"), 1),
        "completion_tokens_per_q": round(_mean(ans, "completion_tokens"), 1),
        "seconds_per_q": round(_mean(ans, "seconds"), 2),
        "em": round(100 * _mean(ans, "em"), 1),
        "f1": round(100 * _mean(ans, "f1"), 1),
        "string_acc": round(100 * _mean(ans, "string_acc"), 1),
        # replies with a reference list after the answer (LightRAG's prompt asks for one): not scored
        "replies_with_references": sum(1 for r in ans if answer_text(r["pred"]) != r["pred"]),
        "settings": run.settings,
        "error": run.error,
    }


def summarize(name, cfg, items, passages, runs, llm_name: str, notes: list[str], seconds: float) -> dict:
    cfg_d = {k: v for k, v in asdict(cfg).items() if k != "show_progress"}
    runs = [scored_again(r) for r in runs]
    return {
        "dataset": name,
        "questions": len(items),
        "passages": len(passages),
        "llm": llm_name,
        "config": cfg_d,
        "systems": [system_row(r) for r in runs],
        "comparisons": comparisons(runs),
        "f1_by_type": f1_by_type(items, runs),
        "notes": notes,
        "seconds": round(seconds, 1),
        # wall times depend on what else the machine ran: the load says how busy it was
        "machine": f"{os.cpu_count()} CPUs, load average at the end {os.getloadavg()[0]:.1f}",
    }


def _cells(s: dict) -> list:
    tokens_q = s["prompt_tokens_per_q"] + s["completion_tokens_per_q"]
    index_tokens = s["index_prompt_tokens"] + s["index_completion_tokens"]
    return [
        s["system"],
        s["questions"],
        s["errors"],
        s["index_llm_calls"],
        f"{index_tokens:,}",
        s["index_minutes"],
        s["llm_calls_per_q"],
        f"{tokens_q:,.0f}",
        s["seconds_per_q"],
        s["em"],
        s["f1"],
        s["string_acc"],
    ]


def report_markdown(report: dict, command: str) -> str:
    lines = [
        f"# bench peers: {report['dataset']}",
        "",
        f"`{command}`",
        "",
        f"{report['questions']} questions, one KB of {report['passages']} passages (their passages and "
        f"distractors), every system on {report['llm']}, the MiniLM embedder where the system takes an "
        "embedding function, short answers; EM/F1/Acc in %, a failed answer scoring 0. Tokens are prompt + "
        "completion as the LLM counted them; index figures are the whole build, summed over its resumed parts. "
        f"Machine: {report.get('machine', '?')}.",
        "",
        *markdown_table(COLUMNS, [_cells(s) for s in report["systems"]]),
        "",
        *(
            f"- {s['system']} per passage indexed: {s['index_calls_per_passage']} LLM calls, "
            f"{s['index_tokens_per_passage']:,.0f} tokens, {s['index_seconds_per_passage']} s"
            + (
                f" ({s['index_cached_calls']} of {s['index_llm_calls']} calls replayed from the LLM call cache, "
                "timed at their first run)"
                if s.get("index_cached_calls")
                else ""
            )
            for s in report["systems"]
            if s["index_llm_calls"]
        ),
        "",
        *comparison_lines(report.get("comparisons", [])),
        "",
        *by_type_lines(report.get("f1_by_type", [])),
        "",
        "## Settings",
        "",
    ]
    for s in report["systems"]:
        lines.append(f"- **{s['system']}**: `{json.dumps(s['settings'], sort_keys=True)}`")
    broken = [
        s for s in report["systems"] if s.get("error") or s["errors"] or s["index_errors"] or s["index_failed_calls"]
    ]
    if broken:
        lines += ["", "## Errors", ""]
        for s in broken:
            parts = [s["error"] or ""]
            if s["index_errors"]:
                parts.append(f"{s['index_errors']} of {s['index_passages']} passages failed to index")
            if s["index_failed_calls"]:
                parts.append(f"{s['index_failed_calls']} indexing LLM calls failed")
            if s["errors"]:
                parts.append(f"{s['errors']} of {s['questions']} answers failed")
            lines.append(f"- {s['system']}: " + "; ".join(p for p in parts if p))
    cut = [
        f"{s['system']}: {s['replies_with_references']} of {s['questions']} replies end in a reference list, "
        "scored without it (citation material, as inline [n] markers are)"
        for s in report["systems"]
        if s.get("replies_with_references")
    ]
    if report["notes"] or cut:
        lines += ["", "## Notes", "", *(f"- {n}" for n in [*report["notes"], *cut])]
    return "\n".join(lines) + "\n"


def write_report(report: dict, folder: str | Path, command: str) -> Path:
    """<folder>/<set>.md and .json (atomic writes); returns the Markdown file."""
    md = Path(folder) / f"{report['dataset']}.md"
    atomic_write_text(md, report_markdown(report, command))
    atomic_write_json(md.with_suffix(".json"), {**report, "command": command})
    return md
