"""The logic route's prompts (LogicRAG: decomposition, rewrite, reflection; the rank step is in
engine.prompts.logic_step), each with its JSON schema. Tuned on Qwen2.5-Coder-1.5B: short system
text, concrete few-shots, JSON constrained by a schema, answers as short phrases."""

from __future__ import annotations

import json
from collections.abc import Sequence

DECOMPOSE_MAX_ITEMS = 5

DECOMPOSE_SYSTEM = (
    "Split the question into sub-questions. Each sub-question asks ONE fact about ONE named "
    "thing, so one search answers it. A thing described through another (the director of film "
    "X, the father of Y, the performer of song Z) gets its own sub-question first. Write #q1 "
    "where the answer of q1 goes and list q1 in depends_on. Only a question about one named "
    "thing stays one sub-question; otherwise no sub-question repeats the whole question. Never "
    "add a sub-question that only compares answers."
)

_DECOMPOSE_EXAMPLES: list[tuple[str, list[tuple[str, str, list[str]]]]] = [
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
_SHORT_EXAMPLES = (
    "Who wrote the novel Dracula?",
    "What is the date of birth of the performer of song Hello?",
    "Who is older, Ann Lee or Tom Ford?",
    "Which film has the director who died later, Vertigo or Metropolis?",
    "What is the capital of the country where the composer of Carmen was born?",
)


# The question-list plan (the plan_questions mechanism, for experiments): the reply is a JSON list of
# sub-question strings; ids follow their position and dependencies are the #qN placeholders, so the ids and
# depends_on lists (a third of the examples' tokens, and of the reply's) are never written.
DECOMPOSE_SYSTEM_QUESTIONS = (
    "Split the question into sub-questions, each asking one fact about one named thing. A thing "
    "described through another (the director of film X) gets its own sub-question first; a later "
    "sub-question writes #q1 for the answer of the first sub-question, #q2 for the second. A question "
    "about one named thing stays whole. Never add a sub-question that only compares answers."
)


def _plan_questions_json(nodes: list[tuple[str, str, list[str]]]) -> str:
    return json.dumps({"subquestions": [q for _, q, _ in nodes]}, separators=(",", ":"))


def _plan_json(nodes: list[tuple[str, str, list[str]]]) -> str:
    # compact separators: fewer prompt tokens per example, and the model copies the style
    return json.dumps(
        {"subquestions": [{"id": i, "question": q, "depends_on": d} for i, q, d in nodes]}, separators=(",", ":")
    )


def _plan_lines(nodes: list[tuple[str, str, list[str]]]) -> str:
    """A plan as text lines, "q2 (after q1): What is the date of birth of #q1?": the compact
    examples' form, a third of the tokens of the JSON the reply must use."""
    lines = []
    for i, q, d in nodes:
        after = f" (after {', '.join(d)})" if d else ""
        lines.append(f"{i}{after}: {q}")
    return "\n".join(lines)


# Every example plan's question, in the prompt's order: the pool the plan_examples mechanism (for
# experiments) picks from.
DECOMPOSE_EXAMPLE_QUESTIONS = tuple(q for q, _ in _DECOMPOSE_EXAMPLES)


def decompose_messages(
    question: str,
    short: bool = False,
    compact: bool = False,
    questions: bool = False,
    examples: Sequence[str] | None = None,
) -> list[dict]:
    """The plan prompt: the examples as chat turns in JSON, or (compact) as text lines inside the
    system message; the reply's form is the schema's either way. `questions`: the short prompt's
    examples as lists of sub-question strings (decompose_schema(questions=True)); compact does not
    apply to them. `examples`: show only the example plans of these questions (of
    DECOMPOSE_EXAMPLE_QUESTIONS, kept in the prompt's order) instead of the prompt's own set."""
    if questions:
        system, render = DECOMPOSE_SYSTEM_QUESTIONS, _plan_questions_json
    else:
        system, render = (DECOMPOSE_SYSTEM_SHORT if short else DECOMPOSE_SYSTEM), _plan_json
    short = short or questions
    wanted = set(examples) if examples is not None else set(_SHORT_EXAMPLES if short else DECOMPOSE_EXAMPLE_QUESTIONS)
    chosen = [(q, nodes) for q, nodes in _DECOMPOSE_EXAMPLES if q in wanted]
    if compact and not questions:
        shown = "\n\n".join(f"Question: {q}\n{_plan_lines(nodes)}" for q, nodes in chosen)
        system += f" In these examples, (after q1) means q1 is in depends_on:\n\n{shown}"
        return [{"role": "system", "content": system}, {"role": "user", "content": f"Question: {question}"}]
    msgs: list[dict] = [{"role": "system", "content": system}]
    for q, nodes in chosen:
        msgs += [{"role": "user", "content": f"Question: {q}"}, {"role": "assistant", "content": render(nodes)}]
    msgs.append({"role": "user", "content": f"Question: {question}"})
    return msgs


def decompose_retry_messages(
    question: str,
    bad_reply: str,
    problems: list[str],
    short: bool = False,
    compact: bool = False,
    questions: bool = False,
    examples: Sequence[str] | None = None,
) -> list[dict]:
    """The regeneration after an invalid plan (cycle, dangling id, no real split). The small
    model loses the question in a multi-turn correction (it re-plans the few-shot questions),
    so the same single-turn prompt is sent again with the earlier plan and its error stated."""
    msgs = decompose_messages(question, short, compact, questions, examples)
    rule = "may only use the answers of earlier ones" if questions else "may only depend on earlier ids"
    msgs[-1] = {
        "role": "user",
        "content": (
            f"Question: {question}\n(An earlier plan for this question was wrong: {'; '.join(problems)}. "
            f"Each sub-question {rule}. Earlier plan: {bad_reply})"
        ),
    }
    return msgs


def decompose_schema(max_items: int = DECOMPOSE_MAX_ITEMS, questions: bool = False) -> dict:
    if questions:
        item = {"type": "string", "minLength": 3, "maxLength": 300}
        plan = {"type": "array", "minItems": 1, "maxItems": max_items, "items": item}
        return {
            "type": "object",
            "properties": {"subquestions": plan},
            "required": ["subquestions"],
            "additionalProperties": False,
        }
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
