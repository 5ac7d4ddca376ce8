"""The bench logic report: per data set and question type, each system's scores and costs (means
per question), beside the paper's and the anchor's reference numbers (markdown and JSON)."""

from __future__ import annotations

from typing import Any

from training.common.answer_scores import METRICS

# What we compare against (the paper: gpt-4o-mini, all-MiniLM-L6-v2, top-3; the anchor: the
# released code on the local 1.5B model, first 20 2Wiki questions, see shared/ARCHITECTURE.md).
REFERENCE = {
    "paper (LogicRAG, gpt-4o-mini), 2Wiki": {"string_acc": 64.7, "tokens_per_query": 1778, "seconds_per_query": 9.8},
    "paper (vanilla RAG, gpt-4o-mini), 2Wiki": {"tokens_per_query": 490, "seconds_per_query": 4.3},
    "paper (HippoRAG2), 2Wiki": {"string_acc": 50.0},
    "paper: graph pruning": {
        "claim": "merging same-rank sub-questions about halves retrieval rounds on compositional questions"
    },
    "paper: sampling without replacement": {"claim": "about 35% fewer tokens at equal accuracy"},
    "anchor: released LogicRAG code, local 1.5B, 2Wiki first 20": {
        "string_acc": 5.0,
        "em": 5.0,
        "f1": 9.0,
        "prompt_tokens": 1019,
        "completion_tokens": 161,
        "llm_calls": 3.3,
        "seconds_per_query": 31,
    },
    "anchor: vanilla RAG few-shot answer-only, local 1.5B, 2Wiki first 20": {
        "string_acc": 10.0,
        "em": 10.0,
        "f1": 17.2,
        "prompt_tokens": 636,
        "completion_tokens": 4,
        "llm_calls": 1,
        "seconds_per_query": 7,
    },
}


_COSTS = (
    "llm_calls",
    "prompt_tokens",
    "prompt_tokens_evaluated",
    "completion_tokens",
    "seconds",
    "llm_seconds_uncached",
    "retrieval_rounds",
)


def _cost(row: dict, name: str) -> float:
    # a row written before prompt_tokens_evaluated existed: every prompt token was evaluated
    if name == "prompt_tokens_evaluated":
        return row.get(name, row["prompt_tokens"])
    return row[name]


def _aggregate(rows: list[dict]) -> dict:
    n = len(rows)
    if not n:
        return {"n": 0}
    out: dict[str, Any] = {"n": n}
    for m in METRICS:
        out[m] = round(100 * sum(r[m] for r in rows) / n, 1)
    for c in _COSTS:
        out[c] = round(sum(_cost(r, c) for r in rows) / n, 2)
    out["tokens"] = round(out["prompt_tokens"] + out["completion_tokens"], 1)
    # cached calls cost 0 s: latency is only meaningful over runs that made every call for real
    cold = [r["seconds"] for r in rows if r["cached_calls"] == 0]
    out["seconds_uncached"] = round(sum(cold) / len(cold), 2) if cold else None
    out["n_uncached"] = len(cold)
    out["flagged"] = round(100 * sum(1 for r in rows if r["flags"]) / n, 1)
    out["cached_share"] = round(sum(r["cached_calls"] for r in rows) / max(1, sum(r["llm_calls"] for r in rows)), 2)
    return out


def _by_call(rows: list[dict]) -> dict:
    """Per call kind, the mean calls and prompt tokens per question, over the rows that record
    their calls (rows written before by_call existed are left out; "n" says how many count)."""
    rows = [r for r in rows if "by_call" in r]
    if not rows:
        return {}
    kinds = sorted({k for r in rows for k in r["by_call"]})
    out: dict[str, Any] = {"n": len(rows)}
    for k in kinds:
        got = [r["by_call"].get(k, [0, 0, 0]) for r in rows]
        out[k] = {
            "calls": round(sum(g[0] for g in got) / len(rows), 2),
            "prompt_tokens": round(sum(g[1] for g in got) / len(rows), 1),
        }
    return out


def build_report(rows: list[dict], llm_spec: str, n: int, systems_order: tuple[str, ...]) -> dict:
    report: dict[str, Any] = {"llm": llm_spec, "n_per_dataset": n, "datasets": {}, "reference": REFERENCE}
    for ds in sorted({r["dataset"] for r in rows}):
        d_rows = [r for r in rows if r["dataset"] == ds]
        systems = [s for s in systems_order if any(r["system"] == s for r in d_rows)]
        types = sorted({r["type"] for r in d_rows})
        report["datasets"][ds] = {
            "overall": {s: _aggregate([r for r in d_rows if r["system"] == s]) for s in systems},
            "by_call": {s: _by_call([r for r in d_rows if r["system"] == s]) for s in systems},
            "per_type": {
                t: {s: _aggregate([r for r in d_rows if r["system"] == s and r["type"] == t]) for s in systems}
                for t in types
            },
        }
    return report


def _md_table(stats: dict[str, dict], cols: list[str]) -> list[str]:
    lines = ["| system | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for s, a in stats.items():
        lines.append(f"| {s} | " + " | ".join(str(a.get(c, "")) for c in cols) + " |")
    return lines


def _by_call_table(by_call: dict[str, dict]) -> list[str]:
    """Where each system's prompt tokens go: per call kind, prompt tokens per question (calls per
    question in brackets)."""
    by_call = {s: b for s, b in by_call.items() if b}
    if not by_call:
        return []
    kinds = sorted({k for b in by_call.values() for k in b if k != "n"})
    lines = [
        "Prompt tokens sent per question, by call (calls per question in brackets):",
        "",
        "| system | n | " + " | ".join(kinds) + " |",
        "|---" * (len(kinds) + 2) + "|",
    ]
    for s, b in by_call.items():
        cells = [f"{b[k]['prompt_tokens']:,.0f} ({b[k]['calls']})" if k in b else "" for k in kinds]
        lines.append(f"| {s} | {b['n']} | " + " | ".join(cells) + " |")
    return lines + [""]


def report_markdown(report: dict) -> str:
    cols = [
        "n",
        "string_acc",
        "em",
        "f1",
        "llm_calls",
        "prompt_tokens",
        "prompt_tokens_evaluated",
        "completion_tokens",
        "seconds",
        "llm_seconds_uncached",
        "seconds_uncached",
        "n_uncached",
        "retrieval_rounds",
        "flagged",
    ]
    out = [
        f"# Logic route benchmark ({report['llm']}, "
        + (
            f"questions {report['offset']}-{report['offset'] + report['n_per_dataset'] - 1} of each dataset; "
            if report.get("offset")
            else f"first {report['n_per_dataset']} questions per dataset; "
        )
        + "musique-34hop: the first half as many 3-hop and 4-hop questions)",
        "",
        "Scores in %, costs per question (means). Token counts of cached calls are the original ones; "
        "their seconds are 0, so read latency from `llm_seconds_uncached` (the LLM seconds of every call "
        "as it took when it was made, cache hits included) or `seconds_uncached` (mean wall over the "
        "`n_uncached` runs that made every call for real). `prompt_tokens_evaluated`: of the prompt tokens "
        "sent, those the model computed (the local model reuses the state of a shared prompt prefix).",
        "",
    ]
    for ds, kb in report.get("kb", {}).items():
        which = (
            f"every 3- and 4-hop question ({kb['questions']})"
            if ds == "musique-34hop"
            else f"the file's first {kb['questions']} questions"
        )
        out.append(f"KB {ds}: the {kb['passages']} passages of {which}.")
    out.append("")
    for ds, d in report["datasets"].items():
        out += [f"## {ds}", ""] + _md_table(d["overall"], cols) + [""]
        out += _by_call_table(d.get("by_call", {}))
        out += [f"### {ds} per question type", ""]
        for t, stats in d["per_type"].items():
            out += (
                [f"**{t}**", ""]
                + _md_table(stats, ["n", "string_acc", "f1", "tokens", "llm_calls", "retrieval_rounds"])
                + [""]
            )
        o = d["overall"]
        if "logic" in o and "logic-no-merge" in o and o["logic-no-merge"].get("retrieval_rounds"):
            ratio = o["logic"]["retrieval_rounds"] / o["logic-no-merge"]["retrieval_rounds"]
            out += [
                f"Graph pruning: retrieval rounds with merging / without = {ratio:.2f} "
                "(paper: about 0.5 on compositional questions).",
                "",
            ]
        if "logic" in o and "logic-with-replacement" in o and o["logic-with-replacement"].get("tokens"):
            ratio = o["logic"]["tokens"] / o["logic-with-replacement"]["tokens"]
            out += [f"Sampling without replacement: tokens with / without = {ratio:.2f} (paper: about 0.65).", ""]
    out += ["## Reference numbers", "", "| source | numbers |", "|---|---|"]
    for k, v in report["reference"].items():
        out.append(f"| {k} | " + ", ".join(f"{a}: {b}" for a, b in v.items()) + " |")
    return "\n".join(out) + "\n"
