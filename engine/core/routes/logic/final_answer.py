"""The logic route's final answer (step 8 of the package docstring): the shared answer-only
prompt over the memory (context) and the sub-answers plus any computed comparison (notes); and
the sources the answer was built on."""

from __future__ import annotations

from engine.core.routes.common import ANSWER_MAX_TOKENS, clean_answer
from engine.core.routes.logic.compare import comparison_hint, computed_comparison
from engine.core.routes.logic.config import BudgetExhausted, TimeExhausted
from engine.core.routes.logic.grounding import cited_passages, notes_with_facts
from engine.core.routes.logic.plan import SubQuestion
from engine.core.routes.logic.state import (
    SolveState,
    budgeted_call,
    grounded,
    known_answer,
    nodes_in_order,
    retrieve,
    unique_chunks,
)
from engine.floor.base.errors import DeadlineError, LLMError
from engine.floor.base.types import Source
from engine.floor.llm.base import flag, stopped_words
from engine.floor.prompts.answer import answer_messages
from engine.floor.prompts.passages import format_passages


def final_answer(st: SolveState) -> str:
    """The answer text. Raises LLMError only when the answer call fails and no sub-question
    was answered (DeadlineError when the time limit left it unmade); otherwise a failed call
    returns the last known sub-answer, flagged."""
    cfg = st.cfg
    folded = _folded_answer(st)
    if folded:
        return folded
    if not any(known_answer(n) for n in st.nodes.values()) and st.question not in (
        s["query"] for s in st.trace.details["steps"]
    ):
        # stopped before any sub-answer: never answer from less than the chunk route would see
        got = retrieve(st, st.question, cfg.k)
        st.trace.details["steps"].append(
            {"nodes": [], "rank": None, "query": st.question, "k": cfg.k, "chunk_ids": [c.chunk_id for c in got]}
        )
    if cfg.mechanisms().rolling_memory and st.memory:
        context = notes_with_facts(st)
        # chunks of a step that never got summarised (stopped mid-rank) are still evidence
        summarised = {cid for s in st.trace.details["steps"] if "memory" in s for cid in s["chunk_ids"]}
        pending = [c for c in unique_chunks(st.raw) if c.chunk_id not in summarised]
        # a reader answer cites [n]: show, numbered, the passage stating each sub-answer
        cited = cited_passages(st) if cfg.cite_passages and st.style == "reader" else []
        pending_ids = {c.chunk_id for c in pending}
        extra = cfg.mechanisms().final_chunks
        raw = [c for c in extra(st) if c.chunk_id not in pending_ids] if extra else []
        shown = unique_chunks(cited + raw + pending)
        if shown:
            context += "\n" + format_passages(shown)
    else:
        shown = unique_chunks(st.raw)
        context = format_passages(shown)
    notes = _final_notes(st)
    try:
        c = budgeted_call(
            st,
            answer_messages(st.question, context, notes, style=st.style),
            purpose="answer",
            max_tokens=ANSWER_MAX_TOKENS[st.style],
            final=True,
        )
    except (LLMError, BudgetExhausted) as e:
        answered = [n for n in nodes_in_order(st) if known_answer(n)]
        if answered:
            flag(st.trace, f"final answer not made ({e}): last sub-answer returned")
            return answered[-1].answer or ""
        if isinstance(e, LLMError):
            raise
        if isinstance(e, TimeExhausted):  # nothing found and no time left: no answer, and an error says why
            raise DeadlineError(f"{stopped_words(st.limits.max_seconds)} before the logic route could answer") from None
        flag(st.trace, f"final answer not made ({e}): no answer")
        return ""
    st.final_passages = shown
    return clean_answer(c.text, st.style)


def _folded_answer(st: SolveState) -> str:
    """LogicConfig.fold_final: the short answer when the solved DAG already holds it, so the
    final call would only copy it: the date comparison computed in code, or the answer of the single
    last sub-question (every other node feeds it), when a retrieved passage states that answer
    and the question is not a yes/no one. "" = make the final call. Recorded in trace.details["final"]."""
    if not st.cfg.fold_final or st.style != "short" or st.trace.details.get("single_hop"):
        return ""
    known = [n for n in nodes_in_order(st) if known_answer(n)]
    sentence, answer = computed_comparison(st.question, st.nodes, known)
    # only a date choice is folded: a computed same-X check from two misread sub-answers can say
    # "yes" where the final call, shown it among the notes, still answers "no"
    if answer and answer not in ("yes", "no"):
        st.trace.details["comparison"] = sentence
        st.trace.details["final"] = {"folded": "the comparison computed in code"}
        ids = {cid for n in known for cid in n.chunk_ids}
        st.final_passages = [c for c in unique_chunks(st.raw) if c.chunk_id in ids]
        return answer
    last = sinks(st)
    if len(last) != 1 or st.read.word == "yesno" or not grounded(st, last[0]):
        return ""
    sink = last[0]
    st.trace.details["final"] = {"folded": f"the answer of {sink.id}, the single last sub-question"}
    st.final_passages = [c for c in unique_chunks(st.raw) if c.chunk_id in set(sink.chunk_ids)]
    return clean_answer(sink.answer or "", st.style)


def answer_sources(st: SolveState) -> list[Source]:
    """Every chunk retrieved for the question, once: first those the final prompt showed,
    numbered as it showed them, then the others (the sub-answers saw them; the final answer
    only through the memory) without a number. used_by: the sub-questions whose retrieval
    brought each chunk."""
    used_by: dict[str, list[str]] = {}
    for n in nodes_in_order(st):
        for cid in dict.fromkeys(n.chunk_ids):
            used_by.setdefault(cid, []).append(n.id)
    shown = {c.chunk_id for c in st.final_passages}
    out = [Source.of(i, c, used_by.get(c.chunk_id)) for i, c in enumerate(st.final_passages, 1)]
    out += [Source.of(None, c, used_by.get(c.chunk_id)) for c in unique_chunks(st.raw) if c.chunk_id not in shown]
    return out


def sinks(st: SolveState) -> list[SubQuestion]:
    """The DAG's last sub-questions: those no other sub-question depends on."""
    used = {d for n in st.nodes.values() for d in n.depends_on}
    return [n for n in st.nodes.values() if n.id not in used]


def _final_notes(st: SolveState) -> str:
    """Sub-answers as "question answer" lines, plus the comparison computed in code when one
    applies (compare.py says why); that line is also recorded in trace.details["comparison"]."""
    known = [n for n in nodes_in_order(st) if known_answer(n)]
    lines = [f"{n.rewritten or n.question} {n.answer}" for n in known]
    hint = comparison_hint(st.question, st.nodes, known)
    if hint:
        st.trace.details["comparison"] = hint
        lines.append(hint)
    return "\n".join(lines)
