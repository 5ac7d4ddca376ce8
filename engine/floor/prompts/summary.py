"""The summary layers' prompt: an abstractive summary of one cluster (hierarchy/summarize.py)."""

from __future__ import annotations

from engine.floor.prompts.passages import passages_section, with_data_rule

SUMMARY_SYSTEM = (
    "You summarize a group of related passages for a search index. Keep the key facts: names, "
    "dates, numbers, places and what connects them. Write plain sentences in one paragraph, no "
    "lists, no headings, no opinions, nothing that the passages do not say."
)

SUMMARY_FEWSHOT = [
    {
        "role": "user",
        "content": (
            passages_section(
                "[1] Marie Curie: Marie Curie was born in Warsaw in 1867. She won the Nobel Prize in "
                "Physics in 1903 with Pierre Curie and Henri Becquerel.\n[2] Pierre Curie: Pierre Curie (1859-1906) "
                "was a French physicist. He married Marie Sklodowska in 1895."
            )
            + "\n\nSummarize the passages in at most 40 words, keeping key facts, names, dates and numbers.\nSummary:"
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
    body = passages_section("\n".join(f"[{i}] {p}" for i, p in enumerate(passages, 1)))
    body += (
        f"\n\nSummarize the passages in at most {max_words} words, keeping key facts, names, dates "
        "and numbers.\nSummary:"
    )
    return [
        {"role": "system", "content": with_data_rule(SUMMARY_SYSTEM)},
        *SUMMARY_FEWSHOT,
        {"role": "user", "content": body},
    ]
