"""The leave-one-dataset-out report (training.fitting.lodo) as text: the markdown `eval-router --lodo`
prints, and the summary a checkpoint card keeps."""

from __future__ import annotations

from training.fitting.lodo import LLM_ROUTER
from training.fitting.lodo_cascade import (
    CHUNK_CASCADE,
    RETRY_CASCADE,
    ROUTER_CASCADE,
    ROUTER_FORMS,
    ROUTER_RETRY,
    ROUTER_RETRY_LOGIC,
)
from training.fitting.retrieval_signals import SIGNALS

CARD_SYSTEMS = (
    "router",
    ROUTER_FORMS,
    ROUTER_RETRY,
    ROUTER_RETRY_LOGIC,
    ROUTER_CASCADE,
    CHUNK_CASCADE,
    RETRY_CASCADE,
    "logreg",
    LLM_ROUTER,
    "always chunk",
    "always summary",
    "always logic",
    "oracle",
)


def lodo_summary(report: dict) -> dict:
    """What a checkpoint card keeps of a report: per left-out set and pooled, each system's
    n, score, tokens, calls and route shares."""
    tables = {**report["held_out"], "pooled": report["pooled"]}
    out = {d: {s: m for s, m in t.items() if s in CARD_SYSTEMS} for d, t in tables.items()}
    if "seed_spread" in report:
        out["seed_spread"] = {k: v for k, v in report["seed_spread"].items() if k != "pooled"}
    return out


def format_lodo(report: dict) -> str:
    """Markdown: one table per left-out data set, then the pooled table."""
    lines = []
    for title, table in [*((f"left out: {d}", t) for d, t in report["held_out"].items()), ("pooled", report["pooled"])]:
        n = next(iter(table.values()))["n"]
        lines += [
            f"### {title} ({n} questions)",
            "",
            "| system | score | tokens / q | LLM calls / q | agreement with oracle | route shares |",
            "|---|---|---|---|---|---|",
        ]
        for s, m in table.items():
            shares = ", ".join(f"{r} {v:.0%}" for r, v in m["shares"].items() if v)
            lines.append(
                f"| {s} | {m['score']} | {m['tokens']:,.0f} | {m['llm_calls']} | {m['agreement']} | {shares} |"
            )
        lines.append("")
    if report.get("confidence_thresholds"):
        fitted = ", ".join(f"{d} {t:.3f}" for d, t in report["confidence_thresholds"].items())
        lines += [
            f"{CHUNK_CASCADE} / {ROUTER_CASCADE} / {RETRY_CASCADE}: the chunk route / the router / the shipped "
            "default, then logic for a cheap answer whose confidence is below the threshold fitted on the other "
            f"sets (left out: threshold): {fitted}",
            "",
        ]
    if report.get("priors"):
        counts = ", ".join(f"{d} {n}" for d, n in report["priors"].items())
        lines += [f"router trained with set priors ({counts}); a fold trains on those of its training sets only", ""]
    spread = report.get("seed_spread")
    if spread:
        lines += [
            f"### router over seeds {', '.join(map(str, spread['seeds']))}: pooled {spread['mean']} "
            f"± {spread['std']} (min {spread['min']}, max {spread['max']})",
            "",
            "| left out | " + " | ".join(f"seed {s}" for s in spread["seeds"]) + " |",
            "|---|" + "---|" * len(spread["seeds"]),
        ]
        lines += [f"| {d} | " + " | ".join(map(str, v)) + " |" for d, v in spread["held_out"].items()]
        lines += ["| pooled | " + " | ".join(str(p["score"]) for p in spread["pooled"]) + " |", ""]
    ranking = report.get("logic_gain_ranking")
    if ranking:
        extra = [s for s in SIGNALS if any(f"auc_{s}" in m for m in ranking.values())]
        lines += [
            "### Does anything known before logic runs rank the questions it wins?",
            "",
            "ROC AUC over the left-out rows of the router's P(logic), of the chunk answer's lack of confidence"
            + (" and of the chunk route's retrieval signals" if extra else "")
            + ", for 'logic scores above chunk' (0.5 = chance; below 0.5: the signal's low end ranks them).",
            "",
            "| left out | n | logic better | chunk better | AUC P(logic) | AUC chunk unsure |"
            + "".join(f" AUC {s} |" for s in extra),
            "|---|---|---|---|---|---|" + "---|" * len(extra),
        ]
        lines += [
            f"| {d} | {m['n']} | {m['logic_better']} | {m['chunk_better']} | {m.get('auc_p_logic', '')} | "
            f"{m.get('auc_chunk_unsure', '')} |" + "".join(f" {m.get(f'auc_{s}', '')} |" for s in extra)
            for d, m in ranking.items()
        ]
        lines.append("")
    for d, sp in report.get("specialist", {}).items():
        n = sp["generalist"]["n"]
        lines += [
            f"### specialist on {d}: fine-tuned on {sp['n_tune']}, judged on the next {n}",
            "",
            "| system | score | tokens / q | route shares |",
            "|---|---|---|---|",
        ]
        for s, m in sp.items():
            if isinstance(m, dict):
                shares = ", ".join(f"{r} {v:.0%}" for r, v in m["shares"].items() if v)
                lines.append(f"| {s} | {m['score']} | {m['tokens']:,.0f} | {shares} |")
        lines.append("")
    return "\n".join(lines)
