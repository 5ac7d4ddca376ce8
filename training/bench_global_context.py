"""What each bench-global system shows the answering model, judged before any LLM call: per
question type, the share of the gold sentence answer's words that the passages shown hold
(coverage of the answer by the context, engine.base.metrics.coverage), and each system against
the chunk route question by question (paired bootstrap, as the answer report).

A system whose context holds less of the answer than the chunk route's can only beat chunk by
writing better from less; this check costs seconds, where the answers cost hours. It reads the
extractive layers (and the LLM-written ones when a run has built them); the logic route is left
out: its context depends on its own LLM calls.
"""

from __future__ import annotations

from typing import Any

from training.bench_global_report import BASELINE, paired
from training.bench_global_systems import SYSTEMS, system_settings
from training.bench_report import markdown_table


def context_systems(systems, built_layers) -> list[str]:
    """The systems whose context needs no LLM call and whose layers exist."""
    return [s for s in systems if SYSTEMS[s].route != "logic" and SYSTEMS[s].layers in built_layers]


def shown_context(system: str, settings: Any, question: str, kb, k: int) -> list:
    """The passages the system's answer call would be shown (engine.base.types.RetrievedChunk)."""
    if SYSTEMS[system].route == "chunk":
        return list(kb.search(question, k=k))
    from engine.routes.summary import summary_context

    return summary_context(question, kb, k=k, config=settings)[0]


def context_rows(cfg, questions: list, kbs: dict, systems: list[str]) -> list[dict]:
    """One row per (question, system): the words shown and their coverage of the gold answer."""
    from engine.base.metrics import coverage

    rows = []
    for q in questions:
        for s in systems:
            settings = system_settings(SYSTEMS[s], cfg.k, cfg.wide_chunks, cfg.logic_max_seconds)[0]
            shown = shown_context(s, settings, q.text, kbs[SYSTEMS[s].layers], cfg.k)
            text = " ".join(f"{c.title} {c.text}" if c.title else c.text for c in shown)
            rows.append(
                {
                    "system": s,
                    "qid": q.id,
                    "type": q.type,
                    "words": len(text.split()),
                    "coverage": coverage(text, q.answers),
                }
            )
    return rows


def context_report(rows: list[dict], systems: list[str], types, *, resamples: int, seed: int) -> dict:
    """{type: {system: {n, coverage (%), words, vs_chunk}}}: means per question, and the paired
    difference against the chunk route's context on the same questions."""
    by = {(r["system"], r["qid"]): r for r in rows}
    out: dict = {}
    for t in types:
        qids = list(dict.fromkeys(r["qid"] for r in rows if r["type"] == t))
        out[t] = {}
        for s in systems:
            mine = [by[s, q] for q in qids if (s, q) in by]
            if not mine:
                continue
            entry = {
                "n": len(mine),
                "coverage": round(100 * sum(r["coverage"] for r in mine) / len(mine), 1),
                "words": round(sum(r["words"] for r in mine) / len(mine), 1),
            }
            if s != BASELINE:
                both = [q for q in qids if (s, q) in by and (BASELINE, q) in by]
                entry["vs_chunk"] = paired(
                    [by[s, q]["coverage"] for q in both],
                    [by[BASELINE, q]["coverage"] for q in both],
                    resamples=resamples,
                    seed=seed,
                )
            out[t][s] = entry
    return out


def context_markdown(report: dict, about: dict[str, str]) -> str:
    lines = [
        "# What each system shows: coverage of the gold answer by its context (no LLM call)",
        "",
        "Per question type, the share of the gold answer's words (normalized, counted with repeats) that "
        "the passages shown to the answer call hold, and the words shown; against chunk, the mean "
        "difference in points with its paired bootstrap 95% interval and the questions won / lost / tied.",
        "",
    ]
    for t, per in report["per_type"].items():
        table = []
        for s, e in per.items():
            v = e.get("vs_chunk")
            versus = ""
            if v and v.get("n"):
                lo, hi = v["ci95"]
                versus = f"{v['mean_diff']:+.1f} ({lo:+.1f} to {hi:+.1f}); {v['wins']}/{v['losses']}/{v['ties']}"
            table.append([s, e["n"], e["coverage"], e["words"], versus, about.get(s, "")])
        lines += [f"## {t}", ""]
        lines += markdown_table(["system", "n", "coverage %", "words shown", "vs chunk", "what it shows"], table)
        lines.append("")
    return "\n".join(lines)
