"""Writing the routing benchmark's report: markdown tables, the cost-quality and route
distribution plots (matplotlib, imported on use), report.json, and the pooled lines printed by
`logicroute benchmark`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path


def markdown_table(head: Sequence[str], rows: Sequence[Sequence]) -> list[str]:
    """A Markdown table's lines: the header, its rule, one line per row (cells as str() gives them)."""
    return [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *("| " + " | ".join(map(str, r)) + " |" for r in rows),
    ]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _share(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _num(x: float | None, nd: int = 2) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def systems_table(table: dict[str, dict], routes: Sequence[str], order: Sequence[str]) -> list[str]:
    head = [
        "system",
        "EM",
        "F1",
        "Acc",
        "LLM calls",
        "prompt tok",
        "compl tok",
        "s / q",
        "LLM s / q uncached",
        *[f"% {r}" for r in routes],
        "errors",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in order:
        row = table.get(s)
        if not row or not row.get("n"):
            continue
        cells = [
            s,
            _pct(row["em"]),
            _pct(row["f1"]),
            _pct(row["string_acc"]),
            _num(row["llm_calls"]),
            f"{row['prompt_tokens']:.0f}",
            f"{row['completion_tokens']:.0f}",
            _num(row["seconds"]),
            _num(row.get("llm_seconds_uncached")),
            *[f"{100 * row['routes'].get(r, 0.0):.0f}" for r in routes],
            str(row["errors"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def render_markdown(report: dict) -> str:
    """The routing benchmark's report.md: the header, each scope's systems, the cost-quality sweep,
    the confusion matrices, the LLM router's timings, the notes."""
    md = _header(report)
    for scope, table in report["systems"].items():
        n = next(iter(table.values()))["n"]
        md += [f"## {scope} ({n} questions)", "", *systems_table(table, report["routes"], report["systems_order"]), ""]
    md += _cost_quality_section(report.get("cost_quality") or {}, report["config"]["metric"])
    md += _confusion_section(report.get("confusion") or {})
    md += _llm_router_section(report)
    if report.get("notes"):
        md += ["## Notes", "", *[f"- {n}" for n in report["notes"]], ""]
    md += [
        "Plots: `cost_quality.png`, `route_distribution.png`. Per-question results: `report.json` "
        "(`per_question`) and `results.jsonl`.",
        "",
    ]
    return "\n".join(md)


def _header(report: dict) -> list[str]:
    """The title and the run's settings."""
    cfg = report["config"]
    kb_note = f" (passages of the first {int(cfg['kb_questions'])} questions)" if cfg.get("kb_questions") else ""
    return [
        "# Routing benchmark",
        "",
        f"LLM `{cfg['llm_spec']}`, top-k {cfg['k']}, {cfg['n'] or 'all'} questions per file from offset "
        f"{cfg['offset']}, {'one KB per dataset' if cfg['kb_per_dataset'] else 'one KB over all datasets'}"
        f"{kb_note}, "
        f"router `{(report.get('router') or {}).get('checkpoint', 'none')}`, oracle/cost-quality metric "
        f"`{cfg['metric']}`, seed {cfg['seed']}.",
        "",
        "EM, F1 and Acc (LogicRAG's string accuracy) in %; costs are means per question (routing included: "
        "MLP seconds, LLM router call, self-checks; escalation: both answers); `% route`: share sent there.",
        "",
    ]


def _cost_quality_section(cq: dict, metric: str) -> list[str]:
    """RouteLLM's cost-quality figures per scope ([] without them)."""
    if not cq:
        return []
    md = [
        "## Cost-quality (RouteLLM): logic = strong, chunk = weak",
        "",
        f"Threshold sweep on P(logic); quality = mean {metric}. APGR = average performance gap "
        "recovered over the share of logic calls (random routing: 0.50); CPT(x%) = share of logic calls "
        "needed to recover x% of the gap. APGR above 1 means the mix beats logic alone; '-' = logic is "
        "not better than chunk here, so there is no gap to recover.",
        "",
        "| scope | weak | strong | oracle (share) | router AUC | router APGR | router CPT(50%) | "
        "router CPT(80%) | oracle APGR |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for scope, a in cq.items():
        r = a.get("router") or {}
        md.append(
            f"| {scope} | {_pct(a['weak'])} | {_pct(a['strong'])} | {_pct(a['oracle_point']['quality'])} "
            f"({_share(a['oracle_point']['share'])}) | {_pct(r.get('auc'))} | {_num(r.get('apgr'))} | "
            f"{_share(r.get('cpt50'))} | {_share(r.get('cpt80'))} | {_num(a['oracle'].get('apgr'))} |"
        )
    md.append("")
    return md


def _confusion_section(confusion: dict) -> list[str]:
    """One confusion matrix (chosen route against the oracle's) per scope and system."""
    md: list[str] = []
    for scope, cms in confusion.items():
        for name, cm in cms.items():
            md += [
                f"### {scope}: {name.replace('_vs_', ' vs ')} (rows: chosen, columns: oracle; agreement "
                f"{_pct(cm['agreement'])}%)",
                "",
                "| | " + " | ".join(cm["labels"]) + " |",
                "|---|" + "---|" * len(cm["labels"]),
            ]
            for lab, row in zip(cm["labels"], cm["matrix"]):
                md.append(f"| **{lab}** | " + " | ".join(str(v) for v in row) + " |")
            md.append("")
    return md


def _llm_router_section(report: dict) -> list[str]:
    """The LLM router's decisions and timings beside the MLP router's ([] when it did not run)."""
    lr = report.get("llm_router")
    if not lr:
        return []
    mlp = (
        f"; the MLP router takes {report['router']['seconds_per_question'] * 1000:.1f} ms per question (batched)"
        if report.get("router")
        else ""
    )
    return [
        "## The LLM as router",
        "",
        f"{lr['decisions']} decisions ({lr['uncached']} uncached, {lr['errors']} failed): median "
        f"{lr['median_seconds']:.2f} s, mean {lr['mean_seconds']:.2f} s per decision"
        + mlp
        + "."
        + (f" {lr['note']}." if lr.get("note") else ""),
        "",
    ]


ROUTE_COLORS = {"chunk": "#4C72B0", "summary": "#55A868", "logic": "#C44E52"}


def plot_cost_quality(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cq = report["cost_quality"]
    metric = report["config"]["metric"]
    scopes = list(cq)
    cols = min(3, len(scopes))
    rows = math.ceil(len(scopes) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 4 * rows), squeeze=False)
    for ax, scope in zip(axes.flat, scopes):
        a = cq[scope]
        if a.get("router"):
            pts = a["router"]["points"]
            ax.plot(
                [p["share"] for p in pts],
                [p["quality"] for p in pts],
                "-o",
                ms=3,
                color="#C44E52",
                label=f"router sweep (APGR {_num(a['router']['apgr'])})",
            )
        pts = a["oracle"]["points"]
        ax.plot([p["share"] for p in pts], [p["quality"] for p in pts], "--", color="#8172B2", label="oracle ordering")
        ax.plot([0, 1], [a["weak"], a["strong"]], ":", color="grey", label="random")
        ax.scatter([0], [a["weak"]], marker="s", color=ROUTE_COLORS["chunk"], zorder=3, label="weak: chunk")
        ax.scatter([1], [a["strong"]], marker="s", color=ROUTE_COLORS["logic"], zorder=3, label="strong: logic")
        op = a["oracle_point"]
        ax.scatter([op["share"]], [op["quality"]], marker="*", s=120, color="#8172B2", zorder=3, label="oracle")
        for s, p in a.get("points", {}).items():
            if s in ("router", "llm_router"):
                ax.scatter(
                    [p["share"]],
                    [p["quality"]],
                    marker="^" if s == "router" else "v",
                    s=60,
                    zorder=3,
                    label=f"{s} (3 routes)",
                )
        ax.set_title(f"{scope} (n={a['n']})")
        ax.set_xlabel("share of logic calls")
        ax.set_ylabel(metric)
        ax.set_xlim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    for ax in list(axes.flat)[len(scopes) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_route_distribution(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    routes = report["routes"]
    systems = [s for s in ("router", "oracle", "llm_router", "random") if s in report["systems_order"]]
    scopes = list(report["systems"])
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(scopes) * len(systems) / 2), 4))
    width = 0.8 / max(len(systems), 1)
    for si, s in enumerate(systems):
        xs = [i + (si - (len(systems) - 1) / 2) * width for i in range(len(scopes))]
        bottom = [0.0] * len(scopes)
        for r in routes:
            vals = [report["systems"][sc][s]["routes"].get(r, 0.0) for sc in scopes]
            ax.bar(
                xs,
                vals,
                width * 0.95,
                bottom=bottom,
                color=ROUTE_COLORS.get(r),
                edgecolor="white",
                label=r if si == 0 else None,
            )
            bottom = [b + v for b, v in zip(bottom, vals)]
        for x in xs:
            ax.text(x, 1.01, s, rotation=90, ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(scopes)))
    ax.set_xticklabels(scopes)
    ax.set_ylim(0, 1.35)
    ax.set_ylabel("share of questions")
    ax.set_title("route distribution per dataset (bars: " + ", ".join(systems) + ")")
    ax.legend(loc="upper right", fontsize=8, ncol=len(routes))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(report: dict, out: str | Path, plots: bool = True) -> dict[str, Path]:
    """report.json, report.md, cost_quality.png (when the analysis ran), route_distribution.png."""
    from engine.floor.base.files import atomic_write_json, atomic_write_text

    out = Path(out)
    paths = {"json": out / "report.json", "md": out / "report.md"}
    atomic_write_json(paths["json"], report)
    atomic_write_text(paths["md"], render_markdown(report))
    if not plots:
        return paths
    if report.get("cost_quality"):
        paths["cost_quality"] = out / "cost_quality.png"
        plot_cost_quality(report, paths["cost_quality"])
    paths["routes"] = out / "route_distribution.png"
    plot_route_distribution(report, paths["routes"])
    return paths


def pooled_lines(report: dict) -> list[str]:
    """The pooled table and its cost-quality line, for the terminal."""
    lines = systems_table(report["systems"]["pooled"], report["routes"], report["systems_order"])
    a = (report.get("cost_quality") or {}).get("pooled")
    if a and a.get("router"):
        r = a["router"]
        lines.append(
            f"cost-quality (logic vs chunk, {report['config']['metric']}): weak {_pct(a['weak'])}, strong "
            f"{_pct(a['strong'])}, router APGR {_num(r['apgr'])}, CPT(50%) {_share(r['cpt50'])}, "
            f"CPT(80%) {_share(r['cpt80'])}"
        )
    return lines


def summary_lines(report: dict, out: str | Path, retrieval: str | None = None) -> list[str]:
    """What `logicroute benchmark` prints at the end of a run: the pooled table, notes, the report's path."""
    n = report["systems"]["pooled"][report["systems_order"][0]]["n"]
    lines = [
        f"{retrieval + ' retrieval, ' if retrieval else ''}pooled, {n} questions "
        f"({report['answered_this_run']} route answers made in this run, {report['seconds']:.0f}s):",
        *pooled_lines(report),
        *(f"note: {note}" for note in report.get("notes", [])),
        f"report: {Path(out) / 'report.md'}",
    ]
    return lines
