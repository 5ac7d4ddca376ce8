"""An Answer as JSON, the same for POST /query and the `logicroute` object of a chat completion:
text, route, probabilities, numbered sources, cost, flags, the model's confidence in a cheap
answer, and on the logic route the DAG with
each sub-question's answer and the sources it used."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.floor.base.types import Answer


def answer_json(ans: "Answer", *, with_trace: bool = False) -> dict:
    out = {
        "answer": ans.text,
        "route": ans.route,
        "route_probs": ans.route_probs,
        "decision": ans.trace.decision,
        "sources": [s.to_dict() for s in ans.sources],
        "usage": ans.usage.to_dict(),
        "flags": list(ans.flags),
        "ood": ans.trace.ood,
        # how sure the model was of a chunk/summary answer (local model; None when not reported)
        "confidence": ans.trace.confidence,
        "dag": dag_of(ans),
    }
    escalated = ans.trace.escalated_from
    if escalated:
        out["escalated_from"] = {k: escalated.get(k) for k in ("route", "text", "reason", "usage")}
    if with_trace:
        out["trace"] = ans.trace.to_dict()
    return out


def dag_of(ans: "Answer") -> dict | None:
    """The logic route's DAG as the page draws it: nodes (id, question as solved, answer, rank,
    parents, origin, the numbers of the sources its retrieval brought), edges and ranks. None
    on the other routes and for a logic answer that built no DAG. A node's `sources` are
    positions in the answer's `sources` list (0-based): a logic answer also lists, without a
    number, the chunks only its sub-questions saw."""
    dag = ans.trace.dag or {}
    nodes = dag.get("nodes") or []
    if not nodes:
        return None
    sources_of: dict[str, list[int]] = {}
    for i, s in enumerate(ans.sources):
        for node_id in s.used_by:
            sources_of.setdefault(node_id, []).append(i)
    return {
        "question": ans.trace.question,
        "nodes": [
            {
                "id": n.get("id"),
                "question": n.get("rewritten") or n.get("question", ""),
                "answer": n.get("answer"),
                "rank": n.get("rank", 0),
                "depends_on": list(n.get("depends_on") or []),
                "origin": n.get("origin"),
                "sources": sources_of.get(n.get("id"), []),
            }
            for n in nodes
        ],
        "edges": dag.get("edges") or [],
        "ranks": dag.get("ranks") or [],
    }
