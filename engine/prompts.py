"""Every prompt in one place. Written for, and tested against, the small local model
(Qwen2.5-Coder-1.5B): few-shot, answer-only, yes/no only for yes/no questions."""

from __future__ import annotations

from collections.abc import Sequence

from engine.base.types import RetrievedChunk

# ---------------------------------------------------------------- answering (chunk/summary/final)

ANSWER_SYSTEM = (
    "You answer questions using only the given passages. Reply with the answer alone: "
    "a short phrase such as a name, a date, a number or a place, with no explanation and no "
    "full sentence. Answer 'yes' or 'no' only when the question is a yes/no question. "
    "If the passages do not contain the answer, give your best guess from them."
)

ANSWER_FEWSHOT = [
    {
        "role": "user",
        "content": (
            "Passages:\n[1] Marie Curie: Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1903.\n\n"  # noqa: E501 (prompt text)
            "Question: In which city was Marie Curie born?\nAnswer:"
        ),
    },
    {"role": "assistant", "content": "Warsaw"},
    {
        "role": "user",
        "content": (
            "Passages:\n[1] The Nile: The Nile is about 6,650 km long.\n[2] The Amazon: The Amazon is about 6,400 km long.\n\n"  # noqa: E501 (prompt text)
            "Question: Is the Amazon longer than the Nile?\nAnswer:"
        ),
    },
    {"role": "assistant", "content": "no"},
    {
        "role": "user",
        "content": (
            "Passages:\n[1] Inception: Inception is a 2010 film directed by Christopher Nolan.\n"
            "[2] Christopher Nolan: Christopher Nolan (born 30 July 1970) is a British-American filmmaker.\n\n"
            "Question: When was the director of Inception born?\nAnswer:"
        ),
    },
    {"role": "assistant", "content": "30 July 1970"},
]


def format_passages(chunks: list[RetrievedChunk]) -> str:
    return "\n".join(f"[{i}] {c.title}: {c.text}" if c.title else f"[{i}] {c.text}" for i, c in enumerate(chunks, 1))


def answer_messages(question: str, context: str, notes: str = "") -> list[dict]:
    """Answer-only prompt over a context block (passages, summaries or memory)."""
    body = f"Passages:\n{context}\n\n"
    if notes:
        body += f"Notes:\n{notes}\n\n"
    body += f"Question: {question}\nAnswer:"
    return [{"role": "system", "content": ANSWER_SYSTEM}, *ANSWER_FEWSHOT, {"role": "user", "content": body}]


# --- logic route (LogicRAG: decomposition, rewrite, rank step, reflection) -----------------
# Owned by the logic route. Tuned on Qwen2.5-Coder-1.5B: short system text, concrete
# few-shots, JSON constrained by a schema, answers as short phrases.

import json as _json  # noqa: E402  (kept inside the logic section: appended, not interleaved)

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


def _plan_json(nodes: list[tuple[str, str, list[str]]]) -> str:
    # compact separators: fewer prompt tokens per example, and the model copies the style
    return _json.dumps(
        {"subquestions": [{"id": i, "question": q, "depends_on": d} for i, q, d in nodes]}, separators=(",", ":")
    )


def decompose_messages(question: str) -> list[dict]:
    msgs: list[dict] = [{"role": "system", "content": DECOMPOSE_SYSTEM}]
    for q, nodes in _DECOMPOSE_EXAMPLES:
        msgs += [{"role": "user", "content": f"Question: {q}"}, {"role": "assistant", "content": _plan_json(nodes)}]
    msgs.append({"role": "user", "content": f"Question: {question}"})
    return msgs


def decompose_retry_messages(question: str, bad_reply: str, problems: list[str]) -> list[dict]:
    """The regeneration after an invalid plan (cycle, dangling id, no real split). The small
    model loses the question in a multi-turn correction (it re-plans the few-shot questions),
    so the same single-turn prompt is sent again with the earlier plan and its error stated."""
    msgs = decompose_messages(question)
    msgs[-1] = {
        "role": "user",
        "content": (
            f"Question: {question}\n(An earlier plan for this question was wrong: {'; '.join(problems)}. "
            f"Each sub-question may only depend on earlier ids. Earlier plan: {bad_reply})"
        ),
    }
    return msgs


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


def step_system(memory_words: int, with_memory: bool) -> str:
    s = (
        "You answer sub-questions of a main question from passages. Reply in JSON. "
        '"answers": for each sub-question id, the answer alone: a short phrase such as a name, '
        "a date, a place or a number, no sentence. If the passages and notes do not say, write unknown."
    )
    if with_memory:
        s += (
            f' "memory": the facts from the notes and the passages that help answer the main '
            f"question, in short sentences, at most {memory_words} words; only facts the notes or passages state; keep names and dates exactly."  # noqa: E501 (prompt text)
        )
    return s


def _step_user(main: str, notes: str, passages: str, subqs: list[tuple[str, str]], with_memory: bool) -> str:
    body = f"Main question: {main}\n\n"
    if with_memory:
        body += f"Notes:\n{notes or '(none yet)'}\n\n"
    body += f"Passages:\n{passages}\n\nSub-questions:\n" + "\n".join(f"{i}: {q}" for i, q in subqs)
    return body


_STEP_EXAMPLE = (
    "Which film has the director who died later, Vertigo or Metropolis?",
    "Vertigo was directed by Alfred Hitchcock. Metropolis was directed by Fritz Lang.",
    "[1] Fritz Lang: Fritz Lang (5 December 1890 - 2 August 1976) was an Austrian-German filmmaker.\n"
    "[2] Alfred Hitchcock: Sir Alfred Hitchcock (13 August 1899 - 29 April 1980) was an English filmmaker.",
    [("q3", "When did Alfred Hitchcock die?"), ("q4", "When did Fritz Lang die?")],
    {"q3": "29 April 1980", "q4": "2 August 1976"},
    "Vertigo was directed by Alfred Hitchcock, who died on 29 April 1980. Metropolis was directed by "
    "Fritz Lang, who died on 2 August 1976.",
)


def step_messages(
    main: str, notes: str, passages: str, subqs: list[tuple[str, str]], memory_words: int, with_memory: bool
) -> list[dict]:
    """One call per rank: answer every sub-question of the rank, and (rolling memory) write
    the new memory = query-oriented summary of old notes + new passages."""
    eq, en, ep, es, ea, em = _STEP_EXAMPLE
    ex_reply = {"memory": em, "answers": ea} if with_memory else {"answers": ea}
    return [
        {"role": "system", "content": step_system(memory_words, with_memory)},
        {"role": "user", "content": _step_user(eq, en, ep, es, with_memory)},
        {"role": "assistant", "content": _json.dumps(ex_reply)},
        {"role": "user", "content": _step_user(main, notes, passages, subqs, with_memory)},
    ]


def step_schema(ids: list[str], memory_words: int, with_memory: bool) -> dict:
    answers = {
        "type": "object",
        "properties": {i: {"type": "string"} for i in ids},
        "required": list(ids),
        "additionalProperties": False,
    }
    props: dict = {}
    if with_memory:
        # memory first: the model writes the evidence down before it answers (cheap reasoning).
        # No maxLength: long bounds blow up llama.cpp's grammar; max_tokens + a word cap bound it.
        props["memory"] = {"type": "string"}
    props["answers"] = answers
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


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


# --- summaries (summary layers: abstractive cluster summaries, hierarchy/summarize.py) --------

SUMMARY_SYSTEM = (
    "You summarize a group of related passages for a search index. Keep the key facts: names, "
    "dates, numbers, places and what connects them. Write plain sentences in one paragraph, no "
    "lists, no headings, no opinions, nothing that the passages do not say."
)

SUMMARY_FEWSHOT = [
    {
        "role": "user",
        "content": (
            "Passages:\n[1] Marie Curie: Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in "
            "Physics in 1903 with Pierre Curie and Henri Becquerel.\n[2] Pierre Curie: Pierre Curie (1859-1906) "
            "was a French physicist. He married Marie Sklodowska in 1895.\n\n"
            "Summarize the passages in at most 40 words, keeping key facts, names, dates and numbers.\nSummary:"
        ),
    },
    {
        "role": "assistant",
        "content": (
            "Marie Curie, born in Warsaw in 1867, married French physicist Pierre Curie (1859-1906) in 1895; "
            "both shared the 1903 Nobel Prize in Physics with Henri Becquerel."
        ),
    },
]


def summary_messages(passages: list[str], max_words: int) -> list[dict]:
    """Abstractive summary of one cluster (its chunks, or its children's summaries)."""
    body = "Passages:\n" + "\n".join(f"[{i}] {p}" for i, p in enumerate(passages, 1))
    body += (
        f"\n\nSummarize the passages in at most {max_words} words, keeping key facts, names, dates "
        "and numbers.\nSummary:"
    )
    return [{"role": "system", "content": SUMMARY_SYSTEM}, *SUMMARY_FEWSHOT, {"role": "user", "content": body}]


# --- escalation self-check (engine/pipeline.py) ------------------------------------------------

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
        "content": "Passages:\n[1] Marie Curie: Marie Curie was born in Warsaw in 1867.\n\n"
        "Question: In which city was Marie Curie born?\nProposed answer: Warsaw",
    },
    {"role": "assistant", "content": '{"answered": true}'},
    {
        "role": "user",
        "content": "Passages:\n[1] Inception: Inception is a 2010 film directed by Christopher Nolan.\n\n"
        "Question: When was the director of Inception born?\nProposed answer: 2010",
    },
    {"role": "assistant", "content": '{"answered": false}'},
]


def self_check_messages(question: str, answer: str, passages: str) -> list[dict]:
    body = f"Passages:\n{passages}\n\nQuestion: {question}\nProposed answer: {answer}"
    return [{"role": "system", "content": SELF_CHECK_SYSTEM}, *_SELF_CHECK_FEWSHOT, {"role": "user", "content": body}]


# --- the LLM as router (a baseline of the benchmark and of eval-router) ---------------------------

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
                {"role": "assistant", "content": _json.dumps({"route": r})},
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
