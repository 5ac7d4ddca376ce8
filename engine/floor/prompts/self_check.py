"""The escalation self-check (engine/core/pipeline.py): does the retrieved evidence support the answer?"""

from __future__ import annotations

from engine.floor.prompts.passages import passages_section, with_data_rule

SELF_CHECK_SCHEMA = {
    "type": "object",
    "properties": {"answered": {"type": "boolean"}},
    "required": ["answered"],
    "additionalProperties": False,
}
# One system line + two few-shots so the small local model learns both outcomes.
SELF_CHECK_SYSTEM = (
    "You check an answer. Say whether the passages state the fact that answers the question, so "
    'that the proposed answer is supported by them. Reply with JSON: {"answered": true} or {"answered": false}.'
)
_SELF_CHECK_FEWSHOT = [
    {
        "role": "user",
        "content": passages_section("[1] Marie Curie: Marie Curie was born in Warsaw in 1867.")
        + "\n\nQuestion: In which city was Marie Curie born?\nProposed answer: Warsaw",
    },
    {"role": "assistant", "content": '{"answered": true}'},
    {
        "role": "user",
        "content": passages_section("[1] Inception: Inception is a 2010 film directed by Christopher Nolan.")
        + "\n\nQuestion: When was the director of Inception born?\nProposed answer: 2010",
    },
    {"role": "assistant", "content": '{"answered": false}'},
]


def self_check_messages(question: str, answer: str, passages: str) -> list[dict]:
    body = passages_section(passages) + f"\n\nQuestion: {question}\nProposed answer: {answer}"
    return [
        {"role": "system", "content": with_data_rule(SELF_CHECK_SYSTEM)},
        *_SELF_CHECK_FEWSHOT,
        {"role": "user", "content": body},
    ]
