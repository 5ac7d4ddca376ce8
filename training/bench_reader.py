"""Reader-style answers measured (`logicroute bench-reader`): the answer people get from `ask`.

For questions with gold answers (a shared QA set, or the shipped demo corpus), one route in the
reader style. Per question: does the reply contain a gold answer (string accuracy: the
normalized gold inside the normalized reply, citation markers ignored), does it cite a passage
([n]), does it say "Not in the indexed documents", and does it say so wrongly: a gold answer is
in the passages it was shown. Rows are appended to results.jsonl (resumable); report.json and
report.md sum them up.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from engine.base.files import atomic_write_json, atomic_write_text, exclusive_folder
from engine.base.metrics import cites, string_acc
from engine.routes import run_route
from engine.routes.common import looks_unanswered
from training.jsonl_store import JsonlStore

DEMO = "demo"


def reader_row(qid: str, question: str, golds: Sequence[str], ans) -> dict:
    """One question's measures from its reader-style Answer."""
    shown = " ".join(s.text for s in ans.sources)
    gold_shown = bool(string_acc(shown, list(golds)))  # a gold answer inside the passages shown
    refused = looks_unanswered(ans.text) is not None
    return {
        "id": qid,
        "question": question,
        "answers": list(golds),
        "reply": ans.text,
        "route": ans.route,
        "contains_gold": string_acc(ans.text, list(golds)),
        "cites": cites(ans.text),
        "says_not_found": refused,
        "gold_in_passages": gold_shown,
        "wrongly_not_found": refused and gold_shown,
        "tokens": ans.usage.total_tokens,
        "completion_tokens": ans.usage.completion_tokens,
        "seconds": round(ans.usage.seconds, 3),
        "cached_calls": ans.usage.cached_calls,
    }


def summarize(rows: Sequence[dict]) -> dict:
    n = len(rows)

    def share(key: str) -> float:
        return round(sum(bool(r[key]) for r in rows) / n, 3) if n else 0.0

    shown = [r for r in rows if r["gold_in_passages"]]
    return {
        "n": n,
        "contains_gold": share("contains_gold"),
        "cites": share("cites"),
        "says_not_found": share("says_not_found"),
        "wrongly_not_found": share("wrongly_not_found"),
        "gold_in_passages": share("gold_in_passages"),
        "contains_gold_when_shown": round(sum(r["contains_gold"] for r in shown) / len(shown), 3) if shown else None,
        "tokens": round(sum(r["tokens"] for r in rows) / n, 1) if n else 0.0,
        "completion_tokens": round(sum(r["completion_tokens"] for r in rows) / n, 1) if n else 0.0,
    }


def demo_questions() -> tuple[list[tuple[str, str, list[str]]], Path]:
    """(id, question, gold answers) of the shipped demo, and its corpus file."""
    import json

    folder = Path(__file__).resolve().parents[1] / "engine" / "demo"
    lines = (folder / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    items = [json.loads(x) for x in lines if x.strip()]
    return [(f"demo-{i}", d["question"], list(d["answers"])) for i, d in enumerate(items)], folder / "corpus.jsonl"


def run_bench_reader(items, kb, llm, out: str | Path, *, route: str = "chunk", k: int = 3, progress: bool = True):
    """Answer `items` [(id, question, golds)] in reader style on `route`, appending rows to
    out/results.jsonl (rows already there are kept), then write report.json / report.md."""
    from tqdm import tqdm

    with exclusive_folder(out, "bench-reader run") as folder:
        store = JsonlStore(folder / "results.jsonl", key=lambda r: r["id"])
        todo = [it for it in items if it[0] not in store]
        t0 = time.perf_counter()
        for qid, question, golds in tqdm(todo, desc=f"reader answers ({route})", unit="q", disable=not progress):
            ans = run_route(route, question, kb, llm, k=k, style="reader")
            store.append(reader_row(qid, question, golds, ans))
        rows = [store.get(it[0]) for it in items]
        report = {"route": route, "k": k, "llm": getattr(llm, "name", "?"), **summarize(rows)}
        report["seconds_this_run"] = round(time.perf_counter() - t0, 1)
        atomic_write_json(folder / "report.json", report)
        atomic_write_text(folder / "report.md", format_report(report, rows))
        return report


def format_report(report: dict, rows: Sequence[dict]) -> str:
    lines = [
        f"# Reader-style answers: {report['n']} questions, {report['route']} route, {report['llm']}",
        "",
        "| contains a gold answer | cites a passage | says not in the documents | says so wrongly "
        "(gold in its passages) | gold in its passages | contains gold when shown | tokens / q |",
        "|---|---|---|---|---|---|---|",
        f"| {report['contains_gold']:.1%} | {report['cites']:.1%} | {report['says_not_found']:.1%} | "
        f"{report['wrongly_not_found']:.1%} | {report['gold_in_passages']:.1%} | "
        f"{(report['contains_gold_when_shown'] or 0):.1%} | {report['tokens']:,.0f} |",
        "",
        "| question | gold | reply |",
        "|---|---|---|",
    ]
    for r in rows[:40]:
        reply = r["reply"].replace("\n", " ").replace("|", "/")
        lines.append(f"| {r['question']} | {'; '.join(r['answers'][:2])} | {reply} |")
    return "\n".join(lines) + "\n"
