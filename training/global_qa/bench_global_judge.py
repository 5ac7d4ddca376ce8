"""The optional LLM judge of `logicroute bench global --judge N`: the answers of the first N
questions of each type, every system, graded correct or not against the reference answer
(judge_prompt.py, a JSON verdict). Judging costs are booked apart from answering: each
verdict is one line of judge.jsonl with its own calls and tokens, never added to an answer's.
How far the verdicts can be trusted is reported beside them: how well ROUGE-L ranks the answers
the judge called correct above the others (AUC), on the same sample.

Resumable: a verdict is kept per (judge LLM, system, question, settings, answer text); an answer
written again is judged again.
"""

from __future__ import annotations

from typing import Any

from engine.floor.base.errors import LLMError, StructuredOutputError
from engine.floor.base.files import content_hash
from engine.floor.base.trace import Trace
from engine.floor.base.types import Usage

JUDGE_MAX_TOKENS = 16


def judge_key(r: dict) -> tuple:
    return r["judge_llm"], r["system"], r["qid"], r["cfg"], r["answer_sha"]


def sample(rows: list[dict], per_type: int) -> list[dict]:
    """The answer rows of the first `per_type` questions of each type (in row order), every system."""
    keep: dict[str, list[str]] = {}
    for r in rows:
        qids = keep.setdefault(r["type"], [])
        if r["qid"] not in qids and len(qids) < per_type:
            qids.append(r["qid"])
    return [r for r in rows if r["qid"] in keep.get(r["type"], [])]


def judge_answers(rows: list[dict], golds: dict[str, str], llm, store, per_type: int) -> list[dict]:
    """A verdict row for every answer of the sample (made now, or read from `store`); answers that
    failed are not judged. A judge call that fails leaves the verdict None, with its error."""
    from engine.floor.llm.base import call_llm
    from training.global_qa.judge_prompt import JUDGE_SCHEMA, judge_messages

    out = []
    for r in sample(rows, per_type):
        if r.get("error"):
            continue
        key = {"judge_llm": llm.name, "system": r["system"], "qid": r["qid"], "cfg": r["cfg"]}
        key["answer_sha"] = content_hash(r["pred"])[:16]
        old = store.get(judge_key(key))
        if old is not None:
            out.append(old)
            continue
        usage, trace, verdict, error = Usage(), Trace(), None, None
        try:
            c = call_llm(
                llm,
                judge_messages(r["question"], golds[r["qid"]], r["pred"]),
                purpose="judge",
                usage=usage,
                trace=trace,
                schema=JUDGE_SCHEMA,
                max_tokens=JUDGE_MAX_TOKENS,
            )
            verdict = bool(c.data["correct"])
        except (StructuredOutputError, LLMError) as e:
            error = f"{type(e).__name__}: {e}"
        row = key | {
            "type": r["type"],
            "correct": verdict,
            "rouge_l": r["rouge_l"],
            "error": error,
            "llm_calls": usage.llm_calls,
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
        }
        store.append(row)
        out.append(row)
    return out


def auc(scores: list[float], labels: list[bool]) -> float | None:
    """P(score of a random positive > that of a random negative), ties half: how well the score
    ranks the judge's "correct" answers first (0.5 = no agreement). None without both kinds."""
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return round(wins / (len(pos) * len(neg)), 3)


def judge_report(verdicts: list[dict], systems, types) -> dict:
    """Accuracy (% judged correct) per type and system, the judge's own cost, and its agreement
    with ROUGE-L."""
    done = [v for v in verdicts if v["correct"] is not None]
    per_type: dict[str, Any] = {}
    for t in types:
        per_type[t] = {}
        for s in systems:
            mine = [v for v in done if v["type"] == t and v["system"] == s]
            if mine:
                per_type[t][s] = {
                    "n": len(mine),
                    "accuracy": round(100 * sum(v["correct"] for v in mine) / len(mine), 1),
                }
    return {
        "judged": len(done),
        "failed": len(verdicts) - len(done),
        "cost": {k: sum(v[k] for v in verdicts) for k in ("llm_calls", "prompt_tokens", "completion_tokens")},
        "rouge_l_auc": auc([v["rouge_l"] for v in done], [v["correct"] for v in done]),
        "per_type": per_type,
    }


def judge_markdown(j: dict, llm_name: str) -> list[str]:
    from training.bench.bench_report import markdown_table

    cost = j["cost"]
    lines = [
        f"## LLM judge ({llm_name}): share of answers judged correct",
        "",
        f"{j['judged']} answers judged ({j['failed']} verdicts failed), at {cost['llm_calls']} calls and "
        f"{cost['prompt_tokens']:,} + {cost['completion_tokens']:,} tokens, booked apart from the answers. "
        f"Agreement with ROUGE-L: AUC {j['rouge_l_auc']} (0.5 = none; 1 = ROUGE-L ranks every answer the "
        "judge called correct above every other).",
        "",
    ]
    for t, per in j["per_type"].items():
        if per:
            lines += [f"**{t}**", ""]
            lines += markdown_table(
                ["system", "n", "judged correct %"], [[s, v["n"], v["accuracy"]] for s, v in per.items()]
            )
            lines.append("")
    return lines
