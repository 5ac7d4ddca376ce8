"""The answer-only prompt shared by the chunk, summary and logic routes' final answers, in two
styles, and the numbered passage format every prompt shows retrieved chunks in.

- short: the answer phrase alone (a name, a date, a number), what EM/F1 benchmarks score;
- reader: plain sentences citing passages as [n], and a fixed reply when the passages do not
  hold the answer (instead of a guess), for people and for sentence-answer sets.
"""

from __future__ import annotations

from engine.floor.base.errors import LogicRouteError
from engine.floor.prompts.passages import passages_section, with_data_rule

# The short style's rule on its own: `bench peers` gives it to the peer systems as well.
SHORT_ANSWER_RULE = (
    "Reply with the answer alone: "
    "a short phrase such as a name, a date, a number or a place, with no explanation and no "
    "full sentence. Answer 'yes' or 'no' only when the question is a yes/no question."
)
ANSWER_SYSTEM = (
    "You answer questions using only the given passages. "
    + SHORT_ANSWER_RULE
    + " If the passages do not contain the answer, give your best guess from them."
)

# The one example both styles show of an answer that takes two passages.
_TWO_HOP_EXAMPLE = {
    "role": "user",
    "content": (
        passages_section(
            "[1] Inception: Inception is a 2010 film directed by Christopher Nolan.\n"
            "[2] Christopher Nolan: Christopher Nolan (born 30 July 1970) is a British-American filmmaker."
        )
        + "\n\nQuestion: When was the director of Inception born?\nAnswer:"
    ),
}

ANSWER_FEWSHOT = [
    {
        "role": "user",
        "content": (
            passages_section(
                "[1] Marie Curie: Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in Physics in 1903."
            )
            + "\n\nQuestion: In which city was Marie Curie born?\nAnswer:"
        ),
    },
    {"role": "assistant", "content": "Warsaw"},
    {
        "role": "user",
        "content": (
            passages_section(
                "[1] The Nile: The Nile is about 6,650 km long.\n[2] The Amazon: The Amazon is about 6,400 km long."
            )
            + "\n\nQuestion: Is the Amazon longer than the Nile?\nAnswer:"
        ),
    },
    {"role": "assistant", "content": "no"},
    _TWO_HOP_EXAMPLE,
    {"role": "assistant", "content": "30 July 1970"},
]


NOT_IN_DOCUMENTS = "Not in the indexed documents."
READER_SYSTEM = (
    "You answer questions using only the given passages. Answer in one to five plain sentences: "
    "the answer first, then the facts from the passages that support it, each followed by the number "
    "of its passage in brackets, like [2]. Cover every part of the question, and combine facts from "
    "several passages when the question needs them. Only when no passage says anything that answers "
    "the question, reply exactly: " + NOT_IN_DOCUMENTS
)

READER_FEWSHOT = [
    {
        "role": "user",
        "content": (
            passages_section(
                "[1] Marie Curie: Marie Curie was born in Warsaw in 1867.\n[2] Nobel Prize: In 1903 the Nobel Prize "
                "in Physics went to Marie Curie, Pierre Curie and Henri Becquerel."
            )
            + "\n\nQuestion: Where was Marie Curie born, and which prize did she win in 1903?\nAnswer:"
        ),
    },
    {
        "role": "assistant",
        "content": "Marie Curie was born in Warsaw [1]. In 1903 she won the Nobel Prize in Physics, shared with "
        "Pierre Curie and Henri Becquerel [2].",
    },
    _TWO_HOP_EXAMPLE,
    {
        "role": "assistant",
        "content": "The director of Inception, Christopher Nolan [1], was born on 30 July 1970 [2].",
    },
    {
        "role": "user",
        "content": (
            passages_section("[1] The Nile: The Nile is about 6,650 km long.")
            + "\n\nQuestion: How deep is the Nile?\nAnswer:"
        ),
    },
    {"role": "assistant", "content": NOT_IN_DOCUMENTS},
]

ANSWER_STYLES = ("short", "reader")


def check_style(style: str) -> str:
    if style not in ANSWER_STYLES:
        raise LogicRouteError(f"unknown answer style {style!r}; choose {', '.join(ANSWER_STYLES)}")
    return style


def answer_messages(question: str, context: str, notes: str = "", style: str = "short") -> list[dict]:
    """Answer-only prompt over a context block (passages, summaries or memory), in `style`."""
    body = passages_section(context) + "\n\n"
    if notes:
        body += f"Notes:\n{notes}\n\n"
    body += f"Question: {question}\nAnswer:"
    if check_style(style) == "reader":
        system, shots = READER_SYSTEM, READER_FEWSHOT
    else:
        system, shots = ANSWER_SYSTEM, ANSWER_FEWSHOT
    return [{"role": "system", "content": with_data_rule(system)}, *shots, {"role": "user", "content": body}]
