"""Prompts that write questions from a knowledge base's own chunks (`logicroute adapt`),
each with its JSON schema, and the closed-book prompt that checks a question cannot be answered
without passages. Written for Qwen2.5-Coder-1.5B: one short rule list, one concrete example per
prompt, answers as short spans copied from the passage.

A bridge is asked in two small pieces instead of the finished question, each from one passage:
how passage A describes the entity (link_messages) and a single-hop question on passage B, which
names the entity (single_messages); code puts the description in place of the name, so the
question never depends on the model hiding a name."""

from __future__ import annotations

import json

from engine.floor.prompts.passages import passages_section, with_data_rule

_SHORT = {"type": "string", "minLength": 1, "maxLength": 200}
_ANSWER = {"type": "string", "minLength": 1, "maxLength": 80}


def _schema(*names: str, answer: str = "answer") -> dict:
    props = {k: (_ANSWER if k == answer else _SHORT) for k in names}
    return {"type": "object", "properties": props, "required": list(names), "additionalProperties": False}


SINGLE_SCHEMA = _schema("question", "answer")
LINK_SCHEMA = _schema("description")
COMPARISON_SCHEMA = _schema("attribute", "value_a", "value_b", "question", "answer")
OVERVIEW_SCHEMA = _schema("question", "answer")


def _shot(user: str, reply: dict) -> list[dict]:
    return [{"role": "user", "content": user}, {"role": "assistant", "content": json.dumps(reply)}]


def _writing(system: str, shot: list[dict], user: str) -> list[dict]:
    """One writing call: its task under the data rule, its worked example, then the passages."""
    return [{"role": "system", "content": with_data_rule(system)}, *shot, {"role": "user", "content": user}]


SINGLE_SYSTEM = (
    "Write one question that the passage answers, and its answer. The answer is a short span "
    "copied from the passage: a name, a place, a date or a number. The question names the "
    "passage's subject as the passage names it and asks for one fact about it; it never asks "
    "for the subject's own name (no 'What is the name of the river?'). No yes/no questions."
)
_SINGLE_SHOT = _shot(
    passages_section("[1] Marie Curie: Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in 1903."),
    {"question": "In which city was Marie Curie born?", "answer": "Warsaw"},
)


def single_messages(title: str, text: str) -> list[dict]:
    return _writing(SINGLE_SYSTEM, _SINGLE_SHOT, passages_section(f"[1] {title}: {text}"))


# A bridge is written in two calls, each on one passage: the link (how passage 1 describes the
# entity) here, then a single-hop question on passage 2 (single_messages), which names the entity.
# Asked both at once, the small model often asked the first hop instead of the second.
LINK_SYSTEM = (
    'The passage is about SUBJECT and mentions ENTITY. Say what ENTITY is to SUBJECT, as "the <role> '
    'of SUBJECT" or "the <place/person/thing> where/who/that ... SUBJECT ...": name SUBJECT, never '
    "ENTITY, and use only facts of this passage."
)
_LINK_SHOT = _shot(
    passages_section("[1] Inception: Inception is a 2010 film directed by Christopher Nolan.")
    + "\n\nSUBJECT: Inception\nENTITY: Christopher Nolan",
    {"description": "the director of Inception"},
)


def link_messages(title_a: str, text_a: str, entity: str, subject: str | None = None) -> list[dict]:
    """`subject`: how chunk A's subject is named [default: its title]."""
    passage = passages_section(f"[1] {title_a}: {text_a}")
    return _writing(LINK_SYSTEM, _LINK_SHOT, f"{passage}\n\nSUBJECT: {subject or title_a}\nENTITY: {entity}")


COMPARISON_SYSTEM = (
    "Passages 1 and 2 are about two things of the same kind. Pick one attribute both passages "
    "give (a year, a date, a place, a size). Reply with: attribute; value_a and value_b, copied from "
    "passage 1 and passage 2; question, comparing the two by that attribute and naming both; answer, "
    "the name of the one that is right, or yes or no."
)
_COMPARISON_SHOT = _shot(
    passages_section(
        "[1] Marie Curie: Marie Curie was born in Warsaw in 1867.\n"
        "[2] Christopher Nolan: Christopher Nolan was born in London on 30 July 1970."
    ),
    {
        "attribute": "birth year",
        "value_a": "1867",
        "value_b": "1970",
        "question": "Who was born first, Marie Curie or Christopher Nolan?",
        "answer": "Marie Curie",
    },
)


def comparison_messages(title_a: str, text_a: str, title_b: str, text_b: str) -> list[dict]:
    passages = passages_section(f"[1] {title_a}: {text_a}\n[2] {title_b}: {text_b}")
    return _writing(COMPARISON_SYSTEM, _COMPARISON_SHOT, passages)


OVERVIEW_SYSTEM = (
    "The summary covers several documents. Write one broad question that the summary as a whole "
    "answers, such as what the documents have in common or what a topic covers, and its answer: a "
    "short phrase copied from the summary."
)
_OVERVIEW_SHOT = _shot(
    passages_section(
        "[1] Summary of Nile, Amazon, Danube: Three long rivers. The Nile flows through Egypt, the Amazon "
        "through Brazil, the Danube through Vienna. All three carry trade and feed farmland."
    ),
    {"question": "What do the rivers Nile, Amazon and Danube carry?", "answer": "trade"},
)


def overview_messages(titles: list[str], summary: str) -> list[dict]:
    return _writing(OVERVIEW_SYSTEM, _OVERVIEW_SHOT, passages_section(f"[1] Summary of {', '.join(titles)}: {summary}"))


CLOSED_BOOK_SYSTEM = (
    "Answer from what you know, with the answer alone: a short phrase such as a name, a date, a "
    "number or a place. If you do not know, give your best guess."
)
_CLOSED_BOOK_SHOT = [
    {"role": "user", "content": "Question: In which city was Marie Curie born?\nAnswer:"},
    {"role": "assistant", "content": "Warsaw"},
]


def closed_book_messages(question: str) -> list[dict]:
    """The question with no passages: a written question this answers right is no test of retrieval."""
    return [
        {"role": "system", "content": CLOSED_BOOK_SYSTEM},
        *_CLOSED_BOOK_SHOT,
        {"role": "user", "content": f"Question: {question}\nAnswer:"},
    ]
