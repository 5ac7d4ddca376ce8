"""The logic route's per-question state and what every solving step does with it: an LLM call
behind the per-question budget and a retrieval without replacement; plus the small readers of
the state that the solving loop and the final answer share."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field

from engine.core.budget import Budget
from engine.core.routes.common import says_unknown
from engine.core.routes.logic.config import LOGIC_CAPS, BudgetExhausted, LogicConfig, TimeExhausted, TokensExhausted
from engine.core.routes.logic.plan import SubQuestion, id_order_key, normalize
from engine.floor.base.trace import Trace
from engine.floor.base.types import RetrievedChunk, Usage
from engine.floor.llm.base import (
    LLM,
    RESERVE_SHARE,
    Stopwatch,
    call_llm,
    estimate_prompt_tokens,
    solving,
    solving_time_up,
    stopped_words,
)
from engine.floor.question.parse import Question, read_question


@dataclass
class SolveState:
    """Everything one question's solving reads and writes."""

    question: str
    kb: object
    llm: LLM
    cfg: LogicConfig
    usage: Usage
    trace: Trace
    watch: Stopwatch
    nodes: dict[str, SubQuestion] = field(default_factory=dict)
    memory: str = ""
    raw: list[RetrievedChunk] = field(default_factory=list)  # every chunk retrieved, in order
    seen: list[str] = field(default_factory=list)  # chunk ids retrieved so far (exclusion list)
    rounds: int = 0  # retrieval rounds
    style: str = "short"  # the final answer's style (engine.floor.prompts.answer)
    final_passages: list[RetrievedChunk] = field(default_factory=list)  # what the final prompt numbered
    facts: str = ""  # LogicConfig.keep_facts: sentences kept from the passages read (grounding.py)
    limits: Budget = LOGIC_CAPS  # what this answer may spend (engine.core.routes.logic.config.caps)
    read: Question | None = None  # the question read once (its form, its question word); None: read here

    def __post_init__(self) -> None:
        if self.read is None:
            self.read = read_question(self.question)


def budgeted_call(
    st: SolveState,
    messages: list[dict],
    *,
    purpose: str,
    schema: dict | None = None,
    max_tokens: int,
    final: bool = False,
):
    """call_llm behind the per-question budget, a hard limit: a call that could pass a limit is
    not made (BudgetExhausted). A structured call may cost two calls (its one retry after a
    malformed reply), so it needs room for both; non-final calls also keep one call and its
    tokens in reserve for the final answer, so a budget stop still answers; for the same reason solving stops
    RESERVE_SHARE before the time limit, and its calls are cut there (engine.floor.llm.base.solving),
    while the final answer may run to the limit itself."""
    cap, u = st.limits, st.usage
    attempts = 1 if schema is None else 2
    needed = attempts + (0 if final else 1)
    if u.llm_calls + needed > cap.max_llm_calls:
        raise BudgetExhausted(f"budget exhausted (LLM calls {u.llm_calls}+{needed} > {cap.max_llm_calls})")
    # the tokens likewise: the final answer's prompt (the question, notes, a few passages) is about
    # the size of a step's, so a non-final call keeps room for one more of its own
    est = needed * estimate_prompt_tokens(messages)
    if u.prompt_tokens + est > cap.max_prompt_tokens:
        raise TokensExhausted(f"budget exhausted (prompt tokens {u.prompt_tokens}+~{est} > {cap.max_prompt_tokens})")
    seconds = cap.max_seconds if final else cap.max_seconds * (1 - RESERVE_SHARE)
    if st.watch.elapsed() >= seconds or (not final and solving_time_up()):
        raise TimeExhausted(f"budget exhausted ({stopped_words(cap.max_seconds)})")
    with nullcontext() if final else solving():
        return call_llm(
            st.llm, messages, purpose=purpose, usage=u, trace=st.trace, schema=schema, max_tokens=max_tokens
        )


def retrieve(st: SolveState, query: str, k: int, spare: Sequence[str] = ()) -> list[RetrievedChunk]:
    """One retrieval round; with `without_replacement` it skips every chunk already retrieved
    for this question, so a repeated search brings new evidence. With `reshow_best`, the best
    match of each query in `spare` (a rank's sub-questions) is shown again even when already
    retrieved: a later hop's one passage may have been read by an earlier hop."""
    exclude = list(st.seen) if st.cfg.mechanisms().without_replacement else []
    again: list[RetrievedChunk] = []
    if exclude and st.cfg.reshow_best and spare:
        batch = getattr(st.kb, "search_batch", None)
        best = batch(list(spare), k=1) if batch else [st.kb.search(q, k=1) for q in spare]
        for hits in best:
            if hits and hits[0].chunk_id in st.seen and all(c.chunk_id != hits[0].chunk_id for c in again):
                again.append(hits[0])
        again = again[:k]
    fresh = st.kb.search(query, k=k - len(again), exclude=exclude) if k > len(again) else []
    chunks = again + list(fresh)
    if again:
        st.trace.details.setdefault("reshown", []).extend(c.chunk_id for c in again)
    st.rounds += 1
    for c in chunks:
        st.raw.append(c)
        if c.chunk_id not in st.seen:
            st.seen.append(c.chunk_id)
    return chunks


def nodes_in_order(st: SolveState) -> list[SubQuestion]:
    return sorted(st.nodes.values(), key=lambda n: (n.rank, id_order_key(n.id)))


def unique_chunks(chunks: list[RetrievedChunk]) -> list[RetrievedChunk]:
    seen: set[str] = set()
    out = []
    for c in chunks:
        if c.chunk_id not in seen:
            seen.add(c.chunk_id)
            out.append(c)
    return out


def known_answer(n: SubQuestion) -> str:
    """The node's answer, or "" when it has none or said it does not know."""
    a = (n.answer or "").strip()
    return "" if not a or says_unknown(a) else a


def grounded(st: SolveState, n: SubQuestion) -> bool:
    """The node has an answer, and a chunk retrieved for it states that answer (word for word,
    ignoring case and punctuation): evidence that the answer was read, not guessed."""
    a = " ".join(normalize(known_answer(n)).split())
    if not a:
        return False
    mine = set(n.chunk_ids)
    return any(a in " ".join(normalize(f"{c.title} {c.text}").split()) for c in st.raw if c.chunk_id in mine)
