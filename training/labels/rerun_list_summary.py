"""The summary column of label rows whose question asks for a list, answered again as the summary
route answers it now.

The summary route answers a question asking for a list in its global mode
(SummaryConfig(mode="auto"), engine.routes.summary_config.mode_for); label rows made before that
hold the descent's answer. This runs the summary route again (its default settings, the row's
style and k) on exactly those rows, scores the answer with the row's metric, and recomputes the
row's preference and oracle; every other row is copied. The replaced answer is kept as
"summary_descend" (score, cost, text), so both stay comparable question by question.

    python -m training.labels.rerun_list_summary --labels training/data/labels/answer_medical.jsonl \
        --kb runs/labels_kb/medical --out training/data/labels/answer_medical.jsonl

Resumable: a row already marked "summary_mode": "global" is kept; the file is rewritten
atomically after every answer.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from pathlib import Path


def needs_rerun(row: dict) -> bool:
    from hierarchy.question_structure import answer_shape

    return (
        "summary" in row.get("scores", {})
        and row.get("summary_mode") != "global"
        and (answer_shape(row["question"]) == "list")
    )


def rerun_row(row: dict, answer: Callable[[str, str, int], object]) -> dict:
    """`row` with its summary column from `answer(question, style, k)` (an Answer)."""
    from training.common.answer_scores import metric_fn
    from training.labels.labels import _preferred, route_cost

    ans = answer(row["question"], row.get("style", "short"), int(row.get("k", 3)))
    u = ans.usage
    old = {
        "score": row["scores"]["summary"],
        "cost": row["costs"]["summary"],
        "text": (row.get("answers_pred") or {}).get("summary"),
    }
    scores = {**row["scores"], "summary": round(float(metric_fn(row["metric"])(ans.text, row["answers"])), 4)}
    costs = {
        **row["costs"],
        "summary": {
            "llm_calls": u.llm_calls,
            "tokens": u.total_tokens,
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "cached_calls": u.cached_calls,
            "seconds": round(u.seconds or 0.0, 3),
        },
    }
    scal = {r: route_cost(costs[r]) for r in scores}
    out = {**row, "scores": scores, "costs": costs, "summary_descend": old, "summary_mode": "global"}
    out.update(_preferred(scores, scal, float(row.get("lam", 0.1)), float(row.get("tau", 0.1))))
    out["all_zero"] = max(scores.values()) <= 1e-9
    out["answers_pred"] = {**(row.get("answers_pred") or {}), "summary": ans.text}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m training.labels.rerun_list_summary", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--labels", required=True, help="label file to read")
    p.add_argument("--kb", required=True, help="the KB its rows were answered on")
    p.add_argument("--out", required=True, help="label file to write (may be --labels)")
    p.add_argument("--llm", default=None, help="local:MODEL, openai:MODEL (default: the local model)")
    a = p.parse_args(argv)
    from engine.base.files import atomic_write_text
    from engine.base.progress import progress_bar
    from engine.embedder import get_embedder
    from engine.llm.factory import DEFAULT_LLM, make_llm
    from engine.routes import RouteContext, answer_on, make_route
    from hierarchy.kb import KnowledgeBase
    from training.labels.labels import read_labels

    rows = read_labels(a.labels)
    kb = KnowledgeBase.open(a.kb, get_embedder())
    llm = make_llm(a.llm or DEFAULT_LLM)
    route = make_route("summary", None)

    def answer(question: str, style: str, k: int):
        return answer_on(route, question, RouteContext(kb, llm, k, style))

    todo = [i for i, r in enumerate(rows) if needs_rerun(r)]
    bar = progress_bar(len(todo), "rerun list summary", "row", True)
    for i in todo:
        rows[i] = rerun_row(rows[i], answer)
        atomic_write_text(Path(a.out), "".join(json.dumps(r) + "\n" for r in rows))
        bar.update(1)
    bar.close()
    if not todo:
        atomic_write_text(Path(a.out), "".join(json.dumps(r) + "\n" for r in rows))
    print(f"{len(todo)} of {len(rows)} rows answered again on the summary route -> {a.out}")
    return len(todo)


if __name__ == "__main__":
    main()
