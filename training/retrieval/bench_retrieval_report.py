"""The report of `logicroute bench retrieval` (training.retrieval.bench_retrieval): tables in Markdown,
written beside the JSON it is made from."""

from __future__ import annotations

from pathlib import Path

from engine.floor.base.files import atomic_write_bytes
from hierarchy.retrieval import DENSE, HYBRID, LEXICAL

METRICS = ("recall@3", "recall@10", "answer_in_context@3")
COMMAND = "logicroute bench retrieval"


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def qa_lines(qa: dict) -> list[str]:
    labels = list(qa["pooled"])
    out = [
        "| set | chunks | " + " | ".join(f"{m} {label}" for m in METRICS for label in labels) + " |",
        "|---|---|" + "---|" * (len(METRICS) * len(labels)),
    ]
    rows = [(name, s["chunks"], s) for name, s in qa["sets"].items()] + [("**pooled**", "", qa["pooled"])]
    for name, chunks, s in rows:
        out.append(f"| {name} | {chunks} | " + " | ".join(f"{s[label][m]}" for m in METRICS for label in labels) + " |")
    return out


def gain_lines(qa: dict, label: str, against: str = DENSE) -> list[str]:
    """`label` against `against`, recall@3 per set and pooled: the issue's bar."""
    out = []
    for name, s in [*qa["sets"].items(), ("pooled", qa["pooled"])]:
        d = round(s[label]["recall@3"] - s[against]["recall@3"], 1)
        out.append(f"- {name}: recall@3 {s[against]['recall@3']} -> {s[label]['recall@3']} ({d:+.1f})")
    return out


def grid_lines(dev: dict, top: int = 12) -> list[str]:
    out = [
        "| title weight | b | fusion | dense weight | rrf_k | recall@3 | recall@10 | answer in ctx@3 | per set r@3 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in dev["grid"][:top]:
        c = "" if r["fusion"] == "convex" else r["rrf_k"]
        w = r["dense_weight"] if r["fusion"] == "convex" else "1:1"
        per = ", ".join(f"{k} {v}" for k, v in r["sets"].items())
        out.append(
            f"| {r['title_weight']} | {r['b']} | {r['fusion']} | {w} | {c} | {r['recall@3']} | {r['recall@10']} "
            f"| {r['answer_in_context@3']} | {per} |"
        )
    return out


def docs_lines(docs: dict, questions) -> list[str]:
    out = [
        f"{docs['questions']} questions on {docs['folder']} ({docs['files']} Markdown files, {docs['chunks']} chunks): "
        + ", ".join(f"{m} hit@3 **{docs[m]['hit@3']}/{docs['questions']}**" for m in (DENSE, LEXICAL, HYBRID)),
        "",
        "| question | heading | dense | lexical | hybrid |",
        "|---|---|---|---|---|",
    ]
    for i, (q, f, h) in enumerate(questions):
        marks = " | ".join("yes" if docs[m]["found"][i] else "-" for m in (DENSE, LEXICAL, HYBRID))
        out.append(f"| {q} | `{f}` > {h} | {marks} |")
    return out


def scale_lines(scale: dict) -> list[str]:
    out = [
        "| chunks | store | dense p50 / p95 | lexical p50 / p95 | hybrid p50 / p95 | lexical build "
        "| first-search setup | lexical on disk (of the KB) | postings + index in memory |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in scale["sizes"]:
        lat = " | ".join(f"{r[m]['p50_ms']} / {r[m]['p95_ms']} ms" for m in (DENSE, LEXICAL, HYBRID))
        out.append(
            f"| {r['chunks']:,} | {r['store']} | {lat} | {r['lexical_build_seconds']} s "
            f"| {r['lexical_setup_seconds']} s | {_mb(r['disk'])} ({_mb(r['kb_disk'])}) "
            f"| {_mb(r['postings_memory'])} + {_mb(r['index_memory'])} |"
        )
    return out


def write_report(report: dict, path: Path) -> Path:
    from training.retrieval.doc_questions import DOC_QUESTIONS

    lines = [f"# Lexical + dense retrieval: `{COMMAND}`", ""]
    for part, run in report.get("runs", {}).items():
        lines.append(f"- {part}: `{run['command']}` ({run['machine']})")
    lines.append("")
    qa = report.get("qa")
    if qa:
        dev = qa["dev"]
        lines += ["## Shared QA sets (questions 0-199, one KB of their passages per set)", ""]
        lines += qa_lines(qa) + ["", f"Hybrid as shipped ({qa['shipped']}, {qa['analysis']}) against dense:", ""]
        lines += gain_lines(qa, HYBRID) + ["", "Against reciprocal-rank fusion (c 60, 1:1) of the same two lists:", ""]
        lines += gain_lines(qa, HYBRID, "hybrid rrf") + [""]
        lines += [
            f"### The grid the defaults come from: questions {dev['offset']}-{dev['offset'] + 199} of "
            f"{', '.join(dev['sets'])} (dense: recall@3 {dev['dense']['recall@3']}), best first",
            "",
        ]
        lines += grid_lines(dev) + [""]
    if report.get("docs"):
        lines += ["## Documentation questions", ""] + docs_lines(report["docs"], DOC_QUESTIONS) + [""]
    if report.get("scale"):
        s = report["scale"]
        lines += ["## Latency, build, disk and memory", "", f"Corpus: {s['corpus']}; {s['queries']} queries.", ""]
        lines += [f"- {n}" for n in s["notes"]] + scale_lines(s) + [""]
    lines += report.get("notes", [])
    atomic_write_bytes(path, ("\n".join(lines).rstrip() + "\n").encode("utf-8"))
    return path
