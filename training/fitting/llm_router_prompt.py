"""The LLM as router: a baseline of the benchmark and of eval-router."""

from __future__ import annotations

import json
from collections.abc import Sequence

ROUTE_HELP = {
    "chunk": "one search, then one answer: for a question about one fact of one named thing",
    "summary": "starts from summaries of topics: for a broad question about a topic's overview",
    "logic": "splits the question into steps answered in order: for questions that chain facts "
    "(the director of the film that ...) or compare two things",
}
_ROUTER_EXAMPLES = [
    ("Who wrote the novel Dracula?", "chunk"),
    ("When was the director of film Jaws born?", "logic"),
    ("What are the main themes across these reports?", "summary"),
    ("Who was born first, Ann Lee or Tom Ford?", "logic"),
]


def llm_router_messages(question: str, routes: Sequence[str]) -> list[dict]:
    lines = "\n".join(f"- {r}: {ROUTE_HELP[r]}" for r in routes)
    system = (
        "You choose how a question-answering system answers a question from a document "
        f'collection. The routes:\n{lines}\nReply with JSON: {{"route": one of {list(routes)}}}.'
    )
    msgs = [{"role": "system", "content": system}]
    for q, r in _ROUTER_EXAMPLES:
        if r in routes:
            msgs += [
                {"role": "user", "content": f"Question: {q}"},
                {"role": "assistant", "content": json.dumps({"route": r})},
            ]
    msgs.append({"role": "user", "content": f"Question: {question}"})
    return msgs


def llm_router_schema(routes: Sequence[str]) -> dict:
    return {
        "type": "object",
        "properties": {"route": {"type": "string", "enum": list(routes)}},
        "required": ["route"],
        "additionalProperties": False,
    }
