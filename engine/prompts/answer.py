"""The answer-only prompt shared by the chunk, summary and logic routes' final answers, and the
numbered passage format every prompt shows retrieved chunks in."""

from __future__ import annotations

from engine.base.types import RetrievedChunk

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
