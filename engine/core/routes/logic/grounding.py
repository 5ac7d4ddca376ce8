"""Keeping the logic route's answers tied to the passages it read (LogicConfig.keep_facts,
ground_retry, cite_passages).

- kept facts: the rolling memory is rewritten by the model at every rank, and a small model
  drops facts it will need later. The sentences of the passages read
  that name a sub-answer, or sit in a passage titled by one, are kept beside the memory, chosen by
  their closeness to the questions still open, within a token budget. No LLM call.
- supported sub-answers: a sub-answer whose names and numbers no passage shown for it contains
  is flagged; with ground_retry its sub-question is asked once more over every passage of the DAG.
- cited passages: a reader answer cites [n]; the final prompt then shows, numbered, the passage
  that states each sub-answer, so every [n] can point at a listed source.
"""

from __future__ import annotations

from dataclasses import replace

from engine.core.routes.logic.evidence import compress_chunks
from engine.core.routes.logic.plan import SubQuestion, normalize
from engine.core.routes.logic.state import SolveState, budgeted_call, known_answer, nodes_in_order, unique_chunks
from engine.floor.base.errors import LLMError, StructuredOutputError
from engine.floor.base.types import RetrievedChunk
from engine.floor.llm.base import flag
from engine.floor.prompts.logic_step import step_messages, step_schema
from engine.floor.prompts.passages import format_passages
from hierarchy.summarize import split_sentences

# Answers that are verdicts or counts the model computes, not phrases a passage states.
_VERDICTS = {"yes", "no", "true", "false", "unknown", "none"}
_STOP = {"the", "a", "an", "of", "in", "on", "at", "and", "or", "to", "for", "by", "with", "from", "is", "was"}
NAME_WORDS = 6  # a sub-answer longer than this is a description, not an entity to keep facts about
CITED_PER_NODE = 1


def _words(text: str) -> set[str]:
    return set(normalize(text).split())


def supported(answer: str, chunks: list[RetrievedChunk]) -> bool | None:
    """Whether one passage contains every content word of `answer` (its names and numbers),
    ignoring case and punctuation. None when there is nothing to check: no answer, "unknown",
    or a verdict such as yes / no that no passage states word for word."""
    want = _words(answer) - _STOP
    if not want or normalize(answer) in _VERDICTS:
        return None
    return any(want <= _words(f"{c.title} {c.text}") for c in chunks)


def node_chunks(st: SolveState, n: SubQuestion) -> list[RetrievedChunk]:
    mine = set(n.chunk_ids)
    return [c for c in unique_chunks(st.raw) if c.chunk_id in mine]


def unsupported_nodes(st: SolveState, group: list[SubQuestion]) -> list[SubQuestion]:
    return [n for n in group if supported(known_answer(n), node_chunks(st, n)) is False]


def check_support(st: SolveState, group: list[SubQuestion]) -> None:
    """Flag the rank's sub-answers no passage shown for them states; with ground_retry ask
    those sub-questions once more over every passage of the DAG, and keep a new answer that a
    passage states (the passage joins the node's chunks)."""
    bad = unsupported_nodes(st, group)
    if not bad:
        return
    ids = [n.id for n in bad]
    flag(st.trace, f"sub-answer of {', '.join(ids)} stated by none of its passages")
    if not st.cfg.ground_retry:
        return
    everything = unique_chunks(st.raw)
    texts = [(n.id, n.rewritten or n.question) for n in bad]
    msgs = step_messages(
        st.question, st.memory, format_passages(everything), texts, st.cfg.memory_words, False, st.cfg.short_prompts
    )
    try:
        c = budgeted_call(
            st, msgs, purpose="ground " + ",".join(ids), schema=step_schema(ids, 0, False), max_tokens=40 * len(ids)
        )
    except (StructuredOutputError, LLMError) as e:
        flag(st.trace, f"sub-answer of {', '.join(ids)} asked again over the DAG's passages: failed ({e})")
        return
    for n in bad:
        again = " ".join(str(c.data["answers"].get(n.id, "")).split())
        stating = [x for x in everything if supported(again, [x])]
        if again and stating:
            st.trace.details.setdefault("grounded_again", []).append({"id": n.id, "was": n.answer, "now": again})
            n.answer = again
            n.chunk_ids = list(dict.fromkeys([*n.chunk_ids, *(x.chunk_id for x in stating)]))


def kept_facts(st: SolveState) -> str:
    """The sentences of the passages read that name a sub-answer (or whose passage a sub-answer
    titles), closest to the open questions first, within LogicConfig.keep_facts tokens; as
    "Title: sentences" lines. "" when off or when nothing names a sub-answer."""
    budget = st.cfg.keep_facts
    names = [normalize(a) for n in nodes_in_order(st) if (a := known_answer(n)) and len(a.split()) <= NAME_WORDS]
    names = [x for x in names if x and x not in _VERDICTS]
    if not budget or not names:
        return ""
    candidates: list[RetrievedChunk] = []
    for c in unique_chunks(st.raw):
        about = any(x in normalize(c.title) for x in names)
        sentences = [s for s in split_sentences(c.text) if about or any(x in normalize(s) for x in names)]
        if sentences:
            candidates.append(replace(c, text=" ".join(sentences)))
    if not candidates:
        return ""
    open_questions = [n.rewritten or n.question for n in nodes_in_order(st) if not known_answer(n)]
    kept, _ = compress_chunks(candidates, [st.question, *open_questions], st.kb.embedder, budget)
    return "\n".join(f"{c.title}: {c.text}" if c.title else c.text for c in kept)


def notes_with_facts(st: SolveState) -> str:
    """The rolling memory, then the kept facts (what a step call and the final answer read)."""
    if not st.facts:
        return st.memory
    return f"{st.memory}\nFrom the passages read:\n{st.facts}".strip()


def cited_passages(st: SolveState) -> list[RetrievedChunk]:
    """For the reader style's final prompt: per answered sub-question in order, the passage
    that states its answer (else its best passage), once each."""
    out: list[RetrievedChunk] = []
    for n in nodes_in_order(st):
        if not known_answer(n):
            continue
        mine = node_chunks(st, n)
        stating = [c for c in mine if supported(n.answer or "", [c])] or mine
        for c in stating[:CITED_PER_NODE]:
            if all(c.chunk_id != o.chunk_id for o in out):
                out.append(c)
    return out
