"""Router labels from answered list questions: the rows `bench global-lists-answer` keeps become
answer-label rows (training.labels), so the router learns which route serves a question about a
whole corpus.

Each question needs every route's answer in results.jsonl: chunk, logic, and the summary route's
global mode (`global`), which is what the summary route answers a list question with
(SummaryConfig(mode="auto"), engine.core.routes.summary_config.mode_for). A route's score is the F1 of
the set its answer lists (training.global_qa.list_score: recall and precision against the gold set
computed from the documents), its cost the answer's measured usage.

    python -m training.global_qa.list_labels --set-file training/data/global_lists/npm.jsonl \
        --results docs/results/global_lists/tune/results.jsonl [--set-file ... ] --half tune \
        --out training/data/labels/answer_lists.jsonl

Only the tune half goes into labels by default: the judge half judges the router trained on them.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from engine.core.routes.summary_config import GLOBAL_MODE
from engine.floor.base.errors import LogicRouteError
from training.fitting.set_priors import LIST_SET_PREFIX

# label route -> the bench system whose answer it is
ROUTE_SYSTEMS = {"chunk": "chunk", "summary": "global", "logic": "logic"}
COST_KEYS = ("llm_calls", "tokens", "prompt_tokens", "completion_tokens", "cached_calls", "seconds")


def label_row(
    q: Mapping, vocabulary: Mapping, answers: Mapping[str, Mapping], *, lam: float, tau: float, llm: str
) -> dict:
    """One label row from one question (a line of a list file) and each route's stored answer row."""
    from training.global_qa.list_score import score
    from training.labels.labels import _preferred, route_cost

    scores, costs, texts = {}, {}, {}
    for route, row in answers.items():
        scores[route] = round(score(row.get("text") or "", q, vocabulary).f1, 4)
        costs[route] = {key: row.get(key, 0) for key in COST_KEYS}
        texts[route] = row.get("text") or ""
    scal = {r: route_cost(costs[r]) for r in scores}
    return {
        "id": q["id"],
        "dataset": LIST_SET_PREFIX + str(q.get("corpus") or "docs"),
        "index": None,
        "question": q["question"],
        "type": q.get("family", ""),
        "answers": [g["name"] for g in q["gold"]],
        "scores": scores,
        "costs": costs,
        **_preferred(scores, scal, lam, tau),
        "all_zero": max(scores.values()) <= 1e-9,
        "scorer": "answer",
        "metric": "list_f1",
        "llm": llm,
        "lam": lam,
        "tau": tau,
        "k": 3,
        "style": "reader",
        "corpus": q.get("corpus", ""),
        "half": q.get("half", ""),
        "answers_pred": texts,
        "summary_mode": GLOBAL_MODE,
    }


def label_rows(
    set_files: Sequence[str | Path],
    results: Sequence[str | Path],
    half: str,
    lam: float = 0.1,
    tau: float = 0.1,
    llm: str = "local:qwen2.5-coder-1.5b",
) -> tuple[list[dict], list[str]]:
    """(label rows, ids skipped): a question is labelled when every route's answer is stored
    without an error in one of `results` (the last row of a key wins, as the bench reads them)."""
    from training.common.jsonl_store import JsonlStore
    from training.global_qa.list_answer import row_key
    from training.global_qa.list_questions import load

    stored: dict[tuple[str, str, str], dict] = {}
    for path in results:
        stored.update(JsonlStore(path, key=row_key, strict=True).by_key)
    rows, skipped = [], []
    for path in set_files:
        questions, vocabulary = load(path)
        name = Path(path).stem
        for q in questions:
            if half != "all" and q.get("half") != half:
                continue
            answers = {route: stored.get((name, system, q["id"])) for route, system in ROUTE_SYSTEMS.items()}
            if any(a is None or a.get("error") for a in answers.values()):
                skipped.append(q["id"])
                continue
            rows.append(label_row(q, vocabulary, answers, lam=lam, tau=tau, llm=llm))
    return rows, skipped


def main(argv: Sequence[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(prog="python -m training.global_qa.list_labels", description=__doc__.split("\n\n")[0])
    p.add_argument("--set-file", action="append", required=True, help="a list-question file (repeat)")
    p.add_argument("--results", action="append", required=True, help="a bench global-lists-answer results.jsonl")
    p.add_argument("--half", default="tune", choices=("tune", "judge", "all"))
    p.add_argument("--out", required=True, help="label file to write (JSONL, replaced atomically)")
    p.add_argument("--llm", default=None, help="the LLM the answers were made with (default: the local model)")
    a = p.parse_args(argv)
    from engine.floor.base.files import atomic_write_text
    from engine.floor.llm.base import DEFAULT_LLM

    rows, skipped = label_rows(a.set_file, a.results, a.half, llm=a.llm or DEFAULT_LLM)
    if not rows:
        raise LogicRouteError(f"no question of the {a.half} half has every route's answer in {', '.join(a.results)}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(Path(a.out), "".join(json.dumps(r) + "\n" for r in rows))
    oracle: dict[str, int] = {}
    for r in rows:
        oracle[r["oracle"]] = oracle.get(r["oracle"], 0) + 1
    print(f"{len(rows)} label rows -> {a.out} (oracle {oracle}); {len(skipped)} questions lack an answer")
    return rows


if __name__ == "__main__":
    main()
