"""The logic route's prompts (LogicRAG: decomposition, rewrite, reflection; the rank step is in
engine.floor.prompts.logic_step), each with its JSON schema. Tuned on Qwen2.5-Coder-1.5B: short system
text, concrete few-shots, JSON constrained by a schema, answers as short phrases."""

from __future__ import annotations

import json
from dataclasses import dataclass

DECOMPOSE_MAX_ITEMS = 5

DECOMPOSE_SYSTEM = (
    "Split the question into sub-questions. Each sub-question asks ONE fact about ONE named "
    "thing, so one search answers it. A thing described through another (the director of film "
    "X, the father of Y, the performer of song Z) gets its own sub-question first. Write #q1 "
    "where the answer of q1 goes and list q1 in depends_on. Only a question about one named "
    "thing stays one sub-question; otherwise no sub-question repeats the whole question. Never "
    "add a sub-question that only compares answers."
)

DECOMPOSE_EXAMPLES: list[tuple[str, list[tuple[str, str, list[str]]]]] = [
    ("Who wrote the novel Dracula?", [("q1", "Who wrote the novel Dracula?", [])]),
    (
        "What is the date of birth of the performer of song Hello?",
        [("q1", "Who is the performer of song Hello?", []), ("q2", "What is the date of birth of #q1?", ["q1"])],
    ),
    (
        "Who is older, Ann Lee or Tom Ford?",
        [("q1", "When was Ann Lee born?", []), ("q2", "When was Tom Ford born?", [])],
    ),
    (
        "Are the directors of films Jaws and Amelie from the same country?",
        [
            ("q1", "Who is the director of film Jaws?", []),
            ("q2", "Who is the director of film Amelie?", []),
            ("q3", "Which country is #q1 from?", ["q1"]),
            ("q4", "Which country is #q2 from?", ["q2"]),
        ],
    ),
    (
        "Which film has the director who died later, Vertigo or Metropolis?",
        [
            ("q1", "Who is the director of film Vertigo?", []),
            ("q2", "Who is the director of film Metropolis?", []),
            ("q3", "When did #q1 die?", ["q1"]),
            ("q4", "When did #q2 die?", ["q2"]),
        ],
    ),
    (
        "Who is the paternal grandfather of Anne Boleyn?",
        [("q1", "Who is the father of Anne Boleyn?", []), ("q2", "Who is the father of #q1?", ["q1"])],
    ),
    (
        "What is the capital of the country where the composer of Carmen was born?",
        [
            ("q1", "Who is the composer of Carmen?", []),
            ("q2", "In which country was #q1 born?", ["q1"]),
            ("q3", "What is the capital of #q2?", ["q2"]),
        ],
    ),
]


# The short decomposition prompt (LogicConfig.short_prompts): one example per plan shape that the
# benchmarks ask (one lookup, 2- and 3-hop chains, comparison, comparison through a bridge).
DECOMPOSE_SYSTEM_SHORT = (
    "Split the question into sub-questions, each asking one fact about one named thing. A thing "
    "described through another (the director of film X) gets its own sub-question first: write #q1 "
    "for the answer of q1 and list q1 in depends_on. A question about one named thing stays whole. "
    "Never add a sub-question that only compares answers."
)
SHORT_EXAMPLES = (
    "Who wrote the novel Dracula?",
    "What is the date of birth of the performer of song Hello?",
    "Who is older, Ann Lee or Tom Ford?",
    "Which film has the director who died later, Vertigo or Metropolis?",
    "What is the capital of the country where the composer of Carmen was born?",
)


def plan_json(nodes: list[tuple[str, str, list[str]]]) -> str:
    # compact separators: fewer prompt tokens per example, and the model copies the style
    return json.dumps(
        {"subquestions": [{"id": i, "question": q, "depends_on": d} for i, q, d in nodes]}, separators=(",", ":")
    )


def decompose_messages(question: str, short: bool = False) -> list[dict]:
    """The plan prompt: the example plans as chat turns in JSON (short: the short prompt's five)."""
    system = DECOMPOSE_SYSTEM_SHORT if short else DECOMPOSE_SYSTEM
    msgs: list[dict] = [{"role": "system", "content": system}]
    for q, nodes in DECOMPOSE_EXAMPLES:
        if not short or q in SHORT_EXAMPLES:
            msgs += [{"role": "user", "content": f"Question: {q}"}, {"role": "assistant", "content": plan_json(nodes)}]
    msgs.append({"role": "user", "content": f"Question: {question}"})
    return msgs


def retry_turn(question: str, bad_reply: str, problems: list[str], rule: str) -> dict:
    """The last turn of a regeneration: the question again, with the earlier plan and its error."""
    return {
        "role": "user",
        "content": (
            f"Question: {question}\n(An earlier plan for this question was wrong: {'; '.join(problems)}. "
            f"Each sub-question {rule}. Earlier plan: {bad_reply})"
        ),
    }


def decompose_retry_messages(question: str, bad_reply: str, problems: list[str], short: bool = False) -> list[dict]:
    """The regeneration after an invalid plan (cycle, dangling id, no real split). The small
    model loses the question in a multi-turn correction (it re-plans the few-shot questions),
    so the same single-turn prompt is sent again with the earlier plan and its error stated."""
    msgs = decompose_messages(question, short)
    msgs[-1] = retry_turn(question, bad_reply, problems, "may only depend on earlier ids")
    return msgs


@dataclass(frozen=True)
class PlanPrompt:
    """The decomposition's prompt, its schema and how its reply lists the sub-questions. The route
    sends this one; an experiment hands the route another (Mechanisms.plan_prompt)."""

    short: bool = False  # LogicConfig.short_prompts

    def messages(self, question: str) -> list[dict]:
        return decompose_messages(question, self.short)

    def retry_messages(self, question: str, bad_reply: str, problems: list[str]) -> list[dict]:
        return decompose_retry_messages(question, bad_reply, problems, self.short)

    def schema(self) -> dict:
        return decompose_schema()

    def items(self, data: dict) -> list[dict]:
        """The reply's sub-questions as objects with an id, a question and depends_on."""
        return data["subquestions"]


def decompose_schema(max_items: int = DECOMPOSE_MAX_ITEMS) -> dict:
    return {
        "type": "object",
        "properties": {
            "subquestions": {
                "type": "array",
                "minItems": 1,
                "maxItems": max_items,
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "pattern": "^q[0-9]{1,2}$"},
                        "question": {"type": "string", "minLength": 3, "maxLength": 300},
                        "depends_on": {
                            "type": "array",
                            "maxItems": 4,
                            "items": {"type": "string", "pattern": "^q[0-9]{1,2}$"},
                        },
                    },
                    "required": ["id", "question", "depends_on"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["subquestions"],
        "additionalProperties": False,
    }


REWRITE_SYSTEM = (
    "Rewrite the question so that it names the thing directly, using the facts. Reply with the rewritten question only."
)

REWRITE_FEWSHOT = [
    {
        "role": "user",
        "content": "Facts:\nWho is the director of film Jaws? Steven Spielberg\n\n"
        "Question: When was the director born?\nRewritten question:",
    },
    {"role": "assistant", "content": "When was Steven Spielberg born?"},
]


def rewrite_messages(question: str, facts: list[tuple[str, str]]) -> list[dict]:
    body = "Facts:\n" + "\n".join(f"{q} {a}" for q, a in facts) + f"\n\nQuestion: {question}\nRewritten question:"
    return [{"role": "system", "content": REWRITE_SYSTEM}, *REWRITE_FEWSHOT, {"role": "user", "content": body}]


REFLECT_SYSTEM = (
    "Check whether the facts found so far answer the main question. If they do, reply "
    '{"sufficient": true, "missing": []}. If a needed fact is missing or unknown, reply '
    '"sufficient": false and list at most 2 new sub-questions that would find it, each about one '
    "named thing; write #q1 to use the answer of q1 and list q1 in depends_on."
)

REFLECT_FEWSHOT = [
    {
        "role": "user",
        "content": "Main question: Where was the director of film Jaws born?\n\nFacts:\n"
        "q1: Who is the director of film Jaws? -> Steven Spielberg\n"
        "q2: Where was Steven Spielberg born? -> Cincinnati",
    },
    {"role": "assistant", "content": '{"sufficient":true,"missing":[]}'},
    {
        "role": "user",
        "content": "Main question: What is the date of birth of the performer of song Hello?\n\nFacts:\n"
        "q1: Who is the performer of song Hello? -> Adele",
    },
    {
        "role": "assistant",
        "content": '{"sufficient":false,"missing":[{"question":"What is the date of birth of '
        '#q1?","depends_on":["q1"]}]}',
    },
    {
        "role": "user",
        "content": "Main question: Who was born first, Ann Lee or Tom Ford?\n\nFacts:\n"
        "q1: When was Ann Lee born? -> 1936\n"
        "q2: When was Tom Ford born? -> unknown",
    },
    {
        "role": "assistant",
        "content": '{"sufficient":false,"missing":[{"question":"When was Tom Ford born?","depends_on":[]}]}',
    },
]


def reflect_messages(main: str, facts: list[tuple[str, str, str]], notes: str) -> list[dict]:
    body = f"Main question: {main}\n\nFacts:\n" + "\n".join(f"{i}: {q} -> {a}" for i, q, a in facts)
    if notes:
        body += f"\n\nNotes:\n{notes}"
    return [{"role": "system", "content": REFLECT_SYSTEM}, *REFLECT_FEWSHOT, {"role": "user", "content": body}]


def reflect_schema(max_missing: int = 2) -> dict:
    return {
        "type": "object",
        "properties": {
            "sufficient": {"type": "boolean"},
            "missing": {
                "type": "array",
                "maxItems": max_missing,
                "items": {
                    "type": "object",
                    "properties": {
                        "question": {"type": "string", "minLength": 3, "maxLength": 300},
                        "depends_on": {
                            "type": "array",
                            "maxItems": 4,
                            "items": {"type": "string", "pattern": "^q[0-9]{1,2}$"},
                        },
                    },
                    "required": ["question", "depends_on"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["sufficient", "missing"],
        "additionalProperties": False,
    }
