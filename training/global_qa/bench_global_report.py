"""The bench global report: systems x question types x (ROUGE-L, coverage, tokens, seconds), the
layer build costs side by side, and every system against the chunk route question by question
(mean difference, paired bootstrap 95% interval, wins / losses / ties), markdown and JSON."""

from __future__ import annotations

from typing import Any

import numpy as np

from training.bench.bench_report import markdown_table
from training.global_qa.bench_global_routed import DERIVED, shares_markdown

SCORES = ("rouge_l", "coverage")  # the issue's sentence-answer scores; f1 rides along in the JSON
BASELINE = "chunk"
TIE = 1e-9  # two scores closer than this are a tie (float noise of the same text)


def aggregate(rows: list[dict]) -> dict:
    """Means per question: scores in %, tokens, calls and seconds; latency also over the
    answers that made every call for real (a cache hit answers in ~0 s)."""
    n = len(rows)
    if not n:
        return {"n": 0}
    mean = lambda key: sum(r.get(key) or 0 for r in rows) / n  # noqa: E731
    out: dict[str, Any] = {"n": n}
    for m in (*SCORES, "f1"):
        out[m] = round(100 * mean(m), 1)
    out["tokens"] = round(mean("prompt_tokens") + mean("completion_tokens"), 1)
    for c in ("prompt_tokens", "completion_tokens", "llm_calls", "seconds", "llm_seconds_uncached"):
        out[c] = round(mean(c), 2)
    cold = [r["seconds"] for r in rows if not r.get("cached_calls")]
    out["seconds_uncached"] = round(sum(cold) / len(cold), 2) if cold else None
    out["n_uncached"] = len(cold)
    out["errors"] = sum(1 for r in rows if r.get("error"))
    shown = [r["context_words"] for r in rows if r.get("context_words") is not None]
    out["context_words"] = round(sum(shown) / len(shown), 1) if shown else None
    return out


def paired(a: list[float], b: list[float], *, resamples: int = 10_000, seed: int = 0) -> dict:
    """a - b over the same questions: mean difference (points of %), the 2.5 / 97.5 percentiles of
    the means of `resamples` bootstrap draws of the questions, the share of draws <= 0, and how
    many questions a wins, loses and ties."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    n = len(d)
    if n == 0:
        return {"n": 0}
    rng = np.random.default_rng(seed)
    # Drawn in blocks so 10,000 x n indices never sit in memory at once.
    means = np.concatenate(
        [d[rng.integers(0, n, size=(min(1000, resamples - i), n))].mean(axis=1) for i in range(0, resamples, 1000)]
    )
    lo, hi = np.percentile(means, [2.5, 97.5])
    return {
        "n": n,
        "mean_diff": round(100 * float(d.mean()), 1),
        "ci95": [round(100 * float(lo), 1), round(100 * float(hi), 1)],
        "p_not_better": round(float((means <= 0).mean()), 4),
        "wins": int((d > TIE).sum()),
        "losses": int((d < -TIE).sum()),
        "ties": int((np.abs(d) <= TIE).sum()),
    }


def versus_baseline(rows: list[dict], systems, types, *, resamples: int, seed: int, metrics=SCORES) -> dict:
    """{type: {system: {metric: paired(system, chunk)}}} over the questions both answered."""
    by = {(r["system"], r["qid"]): r for r in rows}
    out: dict = {}
    for t in types:
        qids = list(dict.fromkeys(r["qid"] for r in rows if r["type"] == t))
        out[t] = {}
        for s in systems:
            if s == BASELINE:
                continue
            both = [q for q in qids if (s, q) in by and (BASELINE, q) in by]
            out[t][s] = {
                m: paired(
                    [by[s, q][m] for q in both], [by[BASELINE, q][m] for q in both], resamples=resamples, seed=seed
                )
                for m in metrics
            }
    return out


def build_report(rows: list[dict], systems, types, *, bootstrap: int = 10_000, seed: int = 0) -> dict:
    systems = [s for s in systems if any(r["system"] == s for r in rows)]
    report: dict[str, Any] = {
        "systems": systems,
        "types": list(types),
        "overall": {s: aggregate([r for r in rows if r["system"] == s]) for s in systems},
        "per_type": {
            t: {s: aggregate([r for r in rows if r["system"] == s and r["type"] == t]) for s in systems} for t in types
        },
    }
    if BASELINE in systems:
        report["vs_chunk"] = versus_baseline(rows, systems, types, resamples=bootstrap, seed=seed)
        report["verdict"] = verdict(report["vs_chunk"])
    return report


GLOBAL_TYPE = "Contextual Summarize"


def verdict(vs: dict) -> str:
    """One sentence on whether a summary-route system beats chunk on the global questions: its
    ROUGE-L interval must lie above 0."""
    on = vs.get(GLOBAL_TYPE)
    if not on:
        return f"no {GLOBAL_TYPE} questions were asked"
    summary = {
        s: v["rouge_l"]
        for s, v in on.items()
        if not s.startswith(("chunk", "logic")) and s not in DERIVED and v["rouge_l"]["n"]
    }
    if not summary:
        return "no summary-route system was run"
    best, v = max(summary.items(), key=lambda kv: kv[1]["mean_diff"])
    lo, hi = v["ci95"]
    head = (
        f"on {GLOBAL_TYPE}, {best} - chunk = {v['mean_diff']:+.1f} ROUGE-L points (95% CI {lo:+.1f} to {hi:+.1f}; "
        f"{v['wins']} wins, {v['losses']} losses, {v['ties']} ties of {v['n']})"
    )
    if lo > 0:
        return head + ": the summary route beats chunk"
    return head + ": no summary-route system beats chunk by more than the spread"


# ------------------------------------------------------------------------------ markdown

# The per-type table: (header, aggregate key). "words shown" is the passages' size in the answer
# prompt, to check that the one-call systems share one budget.
COLUMNS = (
    ("n", "n"),
    ("ROUGE-L", "rouge_l"),
    ("coverage", "coverage"),
    ("F1", "f1"),
    ("tokens", "tokens"),
    ("LLM calls", "llm_calls"),
    ("words shown", "context_words"),
    ("s", "seconds"),
    ("s uncached", "seconds_uncached"),
    ("LLM s uncached", "llm_seconds_uncached"),
    ("errors", "errors"),
)


def _cell(x) -> str:
    return "" if x is None else f"{x:g}" if isinstance(x, float) else str(x)


def _table(header: list[str], rows: list[list]) -> list[str]:
    return markdown_table(header, [[_cell(x) for x in r] for r in rows])


def _pivot(report: dict, metric: str) -> list[str]:
    types = report["types"]
    rows = [
        [s] + [report["per_type"][t][s].get(metric) for t in types] + [report["overall"][s].get(metric)]
        for s in report["systems"]
    ]
    return _table(["system", *types, "all"], rows)


# The build-cost table: (header, key of the build's cost record, hierarchy.layers.nodes.run_cost).
LAYER_COLUMNS = (
    ("nodes per level", "nodes_per_level"),
    ("LLM calls", "llm_calls"),
    ("cached", "cached_calls"),
    ("prompt tokens", "prompt_tokens"),
    ("completion tokens", "completion_tokens"),
    ("build min (wall)", "seconds"),
    ("build CPU min", "cpu_seconds"),
)


def _minutes(key: str, x):
    return round(x / 60, 2) if key.endswith("seconds") and x is not None else x


def _layer_table(report: dict) -> list[str]:
    rows = []
    for kind, c in report.get("layer_costs", {}).items():
        idx = (report.get("index_cost") or {}).get(kind) or {}
        rows.append([kind, *(_minutes(k, c.get(k)) for _, k in LAYER_COLUMNS), _minutes("seconds", idx.get("seconds"))])
    return _table(["layers", *(name for name, _ in LAYER_COLUMNS), "chunk index min"], rows)


def _versus_rows(report: dict, t: str) -> list[list]:
    out = []
    for s, v in report["vs_chunk"][t].items():
        line = [s]
        for m in SCORES:
            p = v[m]
            if not p["n"]:
                line += ["", ""]
                continue
            line += [
                f"{p['mean_diff']:+.1f} [{p['ci95'][0]:+.1f}, {p['ci95'][1]:+.1f}]",
                f"{p['wins']}/{p['losses']}/{p['ties']}",
            ]
        out.append(line)
    return out


def report_markdown(report: dict) -> str:
    n = report.get("questions_per_type", {})
    lines = [
        "# Global questions benchmark (GraphRAG-Bench)",
        "",
        f"LLM `{report.get('llm')}`, data `{report.get('data')}` ({report.get('kb', {}).get('chunks')} chunks of "
        f"one corpus), {report.get('style')} answer style, questions per type from offset {report.get('offset')}: "
        + ", ".join(f"{t} {k}" for t, k in n.items())
        + ".",
        "Scores in % (means per question), costs per question. Cached calls keep their tokens and cost ~0 s: "
        "read latency from `s uncached` (wall over answers that made every call) or `LLM s uncached`.",
        "",
        "## ROUGE-L by system and question type",
        "",
        *_pivot(report, "rouge_l"),
        "",
        "## Coverage by system and question type",
        "",
        *_pivot(report, "coverage"),
        "",
        "## Per type: scores and costs",
        "",
    ]
    for t in report["types"]:
        rows = [[s, *(report["per_type"][t][s].get(key) for _, key in COLUMNS)] for s in report["systems"]]
        lines += [f"**{t}**", "", *_table(["system", *(name for name, _ in COLUMNS)], rows), ""]
    if report.get("layer_costs"):
        lines += ["## Summary layers: build cost", "", *_layer_table(report), ""]
    if "vs_chunk" in report:
        lines += [
            "## Against the chunk route, question by question",
            "",
            "Mean difference in points, paired bootstrap 95% interval over the questions, and wins/losses/ties.",
            "",
            f"Verdict: {report['verdict']}.",
            "",
        ]
        for t in report["types"]:
            lines += [
                f"**{t}**",
                "",
                *_table(
                    ["system", "Δ ROUGE-L [95% CI]", "W/L/T", "Δ coverage [95% CI]", "W/L/T"], _versus_rows(report, t)
                ),
                "",
            ]
    routing = report.get("routing") or {}
    if routing.get("shares"):
        lines += [
            f"## The router's picks (checkpoint: {routing['checkpoint']})",
            "",
            "Questions sent to each route; the `router` rows above score the answers of the routes it picked.",
            "",
            *shares_markdown(routing["shares"]),
            "",
        ]
    elif routing:
        lines += ["## The router's picks", "", routing.get("error") or routing.get("skipped", ""), ""]
    if report.get("judge"):
        from training.global_qa.bench_global_judge import judge_markdown

        lines += judge_markdown(report["judge"], report.get("llm", ""))
    if report.get("systems_about"):
        lines += ["## Systems", "", *_table(["system", "what it does"], list(report["systems_about"].items())), ""]
    return "\n".join(lines)
