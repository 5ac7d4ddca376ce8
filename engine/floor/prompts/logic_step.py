"""The logic route's rank step: one call answers every sub-question of a rank and (rolling
memory) rewrites the memory, as one JSON object; and the reading of a reply cut off inside it."""

from __future__ import annotations

import json
import re

from engine.floor.prompts.passages import passages_section, with_data_rule


def step_system(memory_words: int, with_memory: bool, short: bool = False) -> str:
    if short:
        s = (
            'Answer the sub-questions from the passages and notes, in JSON. "answers": for each id, the answer '
            "alone as the passages write it, a short phrase (a name, a place, a number, a full date), or unknown "
            "if they do not say."
        )
        if with_memory:
            s += (
                f' "memory": the facts from the notes and passages that help answer the main question, at most '
                f"{memory_words} words, names and dates exactly as written."
            )
        return s
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
    body += passages_section(passages) + "\n\nSub-questions:\n" + "\n".join(f"{i}: {q}" for i, q in subqs)
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


# The short prompt's example: two sub-questions of one rank, a name and a full date. With a
# name-only example the small model cut dates to their year; without one it answered worse.
_STEP_EXAMPLE_SHORT = (
    "Who was born first, the director of film Jaws or Alfred Hitchcock?",
    "",
    "[1] Jaws: Jaws is a 1975 film directed by Steven Spielberg.\n"
    "[2] Alfred Hitchcock: Alfred Hitchcock (13 August 1899 - 29 April 1980) was an English filmmaker.",
    [("q1", "Who is the director of film Jaws?"), ("q2", "When was Alfred Hitchcock born?")],
    {"q1": "Steven Spielberg", "q2": "13 August 1899"},
    "Jaws (1975) was directed by Steven Spielberg. Alfred Hitchcock was born on 13 August 1899.",
)


def step_messages(
    main: str,
    notes: str,
    passages: str,
    subqs: list[tuple[str, str]],
    memory_words: int,
    with_memory: bool,
    short: bool = False,
) -> list[dict]:
    """One call per rank: answer every sub-question of the rank, and (rolling memory) write
    the new memory = query-oriented summary of old notes + new passages."""
    system = {"role": "system", "content": with_data_rule(step_system(memory_words, with_memory, short))}
    eq, en, ep, es, ea, em = _STEP_EXAMPLE_SHORT if short else _STEP_EXAMPLE
    ex_reply = {"memory": em, "answers": ea} if with_memory else {"answers": ea}
    return [
        system,
        {"role": "user", "content": _step_user(eq, en, ep, es, with_memory)},
        # the short example in compact JSON: fewer tokens (the long one keeps its cached form)
        {"role": "assistant", "content": json.dumps(ex_reply, separators=(",", ":") if short else None)},
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


_CUT_MEMORY = re.compile(r'\s*\{\s*"memory"\s*:\s*"((?:[^"\\]|\\.)*)')


def salvage_memory(text: str) -> str | None:
    """The memory a step reply cut off at the token limit had written so far (its schema puts
    "memory" first): its whole sentences, each repeated one kept once (a runaway memory repeats
    itself).
    None when the reply does not open with a memory string or already closed it (then the cut
    fell in the answers, and the memory alone would not help)."""
    m = _CUT_MEMORY.match(text or "")
    if m is None or text[m.end() :].startswith('"'):
        return None
    raw = m.group(1)
    raw = raw[:-1] if raw.endswith("\\") and not raw.endswith("\\\\") else raw
    try:
        memory = json.loads(f'"{raw}"')
    except json.JSONDecodeError:
        memory = raw.replace('\\"', '"')
    sentences = [x for x in re.split(r"(?<=[.!?])\s+", " ".join(memory.split())) if x]
    if len(sentences) > 1 and sentences[-1][-1] not in ".!?":
        sentences.pop()  # the cut fell inside it
    kept: list[str] = []
    for sentence in sentences:
        if sentence not in kept:
            kept.append(sentence)
    return " ".join(kept)
