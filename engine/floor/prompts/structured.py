"""What a structured call adds to its messages (engine/floor/llm/structured.py): the schema stated in
the system message, for an endpoint that cannot be given it as a response format, and the retry
that quotes why a reply failed validation."""

from __future__ import annotations

import json


def schema_instruction(schema: dict) -> str:
    """One line that states the schema, compact: it rides along in every call of a structured
    job, so each byte costs prompt tokens on every question."""
    return "Reply with JSON matching this schema: " + json.dumps(schema, separators=(",", ":"), ensure_ascii=False)


def with_schema_instruction(messages: list[dict], schema: dict) -> list[dict]:
    """`messages` with the schema line appended to the system message (a system message of its
    own in front when there is none): the job's own instructions stay first."""
    line = schema_instruction(schema)
    if messages and messages[0].get("role") == "system":
        first = messages[0]
        return [{**first, "content": f"{first['content']}\n\n{line}"}, *messages[1:]]
    return [{"role": "system", "content": line}, *messages]


def retry_instruction(error: str) -> str:
    """The user turn after a reply that failed validation; `error` says how ('not valid JSON
    (...)', 'does not match the schema at ...')."""
    return f"Your reply {error}. Reply again with one JSON object that matches the schema, and nothing else."
