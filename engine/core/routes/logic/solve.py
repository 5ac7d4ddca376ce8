"""The logic route's solving: the DAG rank by rank with one retrieval and one structured call
per rank, the rolling memory and self-reflection (steps 3-7 of the package docstring), then the
final answer (final_answer.py). `answer_logic` answers one question (engine.core.routes.LogicRoute
is the registry's entry).
"""

from __future__ import annotations

from dataclasses import asdict
from functools import partial
from typing import TYPE_CHECKING

from engine.core.budget import Budget
from engine.core.routes.logic.config import BudgetExhausted, LogicConfig, TokensExhausted, caps
from engine.core.routes.logic.evidence import compress_chunks
from engine.core.routes.logic.final_answer import answer_sources, final_answer
from engine.core.routes.logic.grounding import check_support, kept_facts, node_chunks, notes_with_facts, supported
from engine.core.routes.logic.plan import (
    SubQuestion,
    add_nodes,
    build_graph,
    decompose,
    id_order_key,
    is_copy,
    next_ids,
    normalize,
    placeholders,
    plan_from_form,
    plan_problems,
    rank_groups,
    repair,
    substitute,
    topological_ranks,
)
from engine.core.routes.logic.state import (
    SolveState,
    budgeted_call,
    grounded,
    known_answer,
    nodes_in_order,
    retrieve,
    unique_chunks,
)
from engine.floor.base.errors import LLMError, StructuredOutputError
from engine.floor.base.trace import Trace
from engine.floor.base.types import Answer, Usage
from engine.floor.llm.base import LLM, Stopwatch, flag
from engine.floor.prompts.logic import PlanPrompt, reflect_messages, reflect_schema, rewrite_messages
from engine.floor.prompts.logic_step import salvage_memory, step_messages, step_schema
from engine.floor.prompts.passages import format_passages
from engine.floor.question.parse import Question, as_question, text_of

if TYPE_CHECKING:
    from hierarchy.kb import KnowledgeBase

REWRITE_MAX_TOKENS = 48
REFLECT_MAX_TOKENS = 160
MAX_NODES = 10  # decomposition (<= 5) plus what reflection may add; a hard stop for runaway plans


def answer_logic(
    q: str | Question,
    kb: "KnowledgeBase",
    llm: LLM,
    config: LogicConfig | None = None,
    style: str = "short",
    budget: Budget | None = None,
) -> Answer:
    """Answer one question with query-time DAG reasoning. `q` and `style` as check_question and
    check_style return them (the route registry's callers check them once); `budget`: what the
    answer may spend (engine.core.routes.logic.config.caps). Failures fall back visibly
    (trace.flags) instead of raising, except an LLMError on the final answer when nothing at
    all was answered."""
    watch = Stopwatch()
    read, q = as_question(q), text_of(q)
    cfg = config or LogicConfig()
    usage = Usage()
    trace = Trace(
        route="logic",
        question=q,
        dag={"nodes": [], "edges": [], "ranks": []},
        details={"config": asdict(cfg), "steps": [], "memory": [], "reflection": []},
    )
    st = SolveState(q, kb, llm, cfg, usage, trace, watch, style=style, limits=caps(cfg, budget), read=read)
    try:
        plan = _plan(st)
        add_nodes(st.nodes, plan)
        # a plan of one node that restates the question = the decomposer judged it one lookup.
        # (One node that is only a first hop keeps the DAG: reflection can add the missing hop.)
        single = cfg.mechanisms().direct_single_hop and len(plan) == 1 and is_copy(st.question, plan[0].question)
        if plan[0].origin == "fallback" or single:
            # one-node DAG = chunk-route behaviour: one retrieval, then the final answer. Why for
            # single lookups: the structured step + memory lose the exact phrase
            trace.details["single_hop"] = single
            n = plan[0]
            n.rewritten = n.query = st.question
            n.chunk_ids = [c.chunk_id for c in retrieve(st, st.question, cfg.k)]
            st.trace.details["steps"].append(
                {"nodes": [n.id], "rank": 0, "query": st.question, "k": cfg.k, "chunk_ids": n.chunk_ids}
            )
        else:
            _solve_pending(st)
            if cfg.mechanisms().reflection:
                _reflect_loop(st)
    except BudgetExhausted as e:
        flag(trace, f"{e}: answered from the memory so far")
    except LLMError as e:  # mid-DAG failure of the backend: keep what was found
        flag(trace, f"LLM error mid-DAG ({e}): answered from the memory so far")
    text = final_answer(st)
    for n in st.nodes.values():
        if (n.origin == "fallback" or trace.details.get("single_hop")) and n.answer is None:
            n.answer = text
    _record_dag(st)
    trace.details["answer"] = text
    trace.details["retrieval_rounds"] = st.rounds
    usage.seconds = watch.elapsed()
    return Answer(text=text, route="logic", usage=usage, trace=trace, sources=answer_sources(st))


def _plan(st: SolveState) -> list[SubQuestion]:
    """The question's plan: read off its form (plan_forms), else decomposed by the LLM."""
    cfg = st.cfg
    form = plan_from_form(st.read) if cfg.plan_forms else None
    if form is not None:
        st.trace.details["plan_form"] = form[0]
        return form[1]
    hook = cfg.mechanisms().plan_prompt
    prompt = hook(st) if hook else PlanPrompt(cfg.short_prompts)
    return decompose(st.question, partial(budgeted_call, st), st.trace, prompt)


# ---------------------------------------------------------------- solving


def _solve_pending(st: SolveState) -> None:
    """Solve every unanswered node, rank by rank (parents always come first)."""
    g = build_graph(list(st.nodes.values()))
    ranks = topological_ranks(g)
    pending = {i for i, n in st.nodes.items() if n.answer is None}
    for group in rank_groups(ranks, only=pending):
        for i in group:
            _rewrite(st, st.nodes[i], g)
        if st.cfg.mechanisms().merge_same_rank:
            _solve_group(st, [st.nodes[i] for i in group])
        else:
            for i in group:
                _solve_group(st, [st.nodes[i]])


def _rewrite(st: SolveState, n: SubQuestion, g) -> None:
    """Context-aware retrieval: put the parents' answers into the question before searching."""
    parents = sorted(g.predecessors(n.id), key=id_order_key)
    if not parents:
        n.rewritten, n.rewrite = n.question, "none"
        return
    answers = {p: st.nodes[p].answer or "" for p in parents}
    refs = placeholders(n.question)
    if refs:
        # an unknown parent answer is replaced by what it asked for: better retrieval than "unknown"
        values = {
            i: known_answer(st.nodes[i]) or (st.nodes[i].rewritten or st.nodes[i].question).rstrip("?")
            for i in refs
            if i in st.nodes
        }
        n.rewritten, n.rewrite = " ".join(substitute(n.question, values).split()), "placeholder"
        if all(p in refs for p in parents):
            return
    # a parent used without a placeholder ("When was the director born?"): ask the model
    facts = [(st.nodes[p].rewritten or st.nodes[p].question, answers[p]) for p in parents]
    try:
        c = budgeted_call(
            st,
            rewrite_messages(n.rewritten or n.question, facts),
            purpose=f"rewrite {n.id}",
            max_tokens=REWRITE_MAX_TOKENS,
        )
        text = _first_line(c.text)
    except LLMError as e:  # a BudgetExhausted is not one: it stops solving
        flag(st.trace, f"rewrite of {n.id} failed ({e}): parents' answers appended instead")
        text = ""
    if not text:
        text = f"{n.rewritten or n.question} ({'; '.join(a for a in answers.values() if a)})"
    n.rewritten, n.rewrite = text, "llm"


def _solve_group(st: SolveState, group: list[SubQuestion]) -> None:
    """One retrieval and one structured call for a group of same-rank sub-questions."""
    cfg = st.cfg
    texts = [n.rewritten or n.question for n in group]
    query = " ".join(texts)
    k = cfg.k * len(group)
    before = (len(st.raw), len(st.seen), len(st.trace.details["steps"]))
    chunks = retrieve(st, query, k, spare=texts)
    for n in group:
        n.query = query
        n.chunk_ids = [c.chunk_id for c in chunks]
    step = {
        "nodes": [n.id for n in group],
        "rank": group[0].rank,
        "query": query,
        "k": k,
        "chunk_ids": [c.chunk_id for c in chunks],
    }
    st.trace.details["steps"].append(step)
    ids = [n.id for n in group]
    rolling = cfg.mechanisms().rolling_memory
    if rolling:
        shown = chunks
        budget = _evidence_budget(cfg, group)
        if budget:
            shown, step["evidence"] = compress_chunks(chunks, texts, st.kb.embedder, budget * len(group))
        passages = format_passages(shown)
        notes = notes_with_facts(st)
    else:  # raw chunks concatenated: everything retrieved so far is the context
        passages = format_passages(unique_chunks(st.raw))
        notes = ""
    msgs = step_messages(
        st.question, notes, passages, list(zip(ids, texts)), cfg.memory_words, rolling, cfg.short_prompts
    )
    schema = step_schema(ids, cfg.memory_words, rolling)
    max_tokens = 40 * len(ids) + (int(cfg.memory_words / 0.75) + 20 if rolling else 10)
    try:
        c = budgeted_call(st, msgs, purpose="step " + ",".join(ids), schema=schema, max_tokens=max_tokens)
        data = c.data
    except TokensExhausted:
        _unread(st, group, before)
        raise
    except StructuredOutputError as e:
        data = _after_cut_memory(st, e, msgs, ids) if rolling else None
        if data is None:
            # keep the evidence: a step without "memory" has its chunks passed raw to the final answer
            flag(st.trace, f"step {','.join(ids)} output malformed ({e}): its chunks kept raw, answers unknown")
            for n in group:
                n.answer = ""
            return
    for n in group:
        n.answer = _first_line(str(data["answers"].get(n.id, "")))
    if rolling:
        st.memory = _cap(data.get("memory", ""), cfg.memory_words)
        step["memory"] = st.memory
        st.trace.details["memory"].append(st.memory)
    check_support(st, group)
    if cfg.keep_facts:
        st.facts = step["facts"] = kept_facts(st)


def _unread(st: SolveState, group: list[SubQuestion], before: tuple[int, int, int]) -> None:
    """Undo the retrieval of a step the prompt-token limit refused: nobody read its passages, and
    shown raw to the final answer they would only make its prompt larger than the one the budget
    was checked for (engine.core.budget.check_a_call_fits: stopped at once, the final answer is the
    chunk route's prompt). `before`: the lengths of st.raw, st.seen and the trace's steps then."""
    raw, seen, steps = before
    del st.raw[raw:], st.seen[seen:], st.trace.details["steps"][steps:]
    st.rounds -= 1
    for n in group:
        n.query, n.chunk_ids = None, []


def _after_cut_memory(st: SolveState, e: StructuredOutputError, msgs: list[dict], ids: list[str]) -> dict | None:
    """A step reply cut off at the token limit inside its memory (the 1.5B model sometimes
    repeats itself there): keep the memory written so far, and ask the same prompt again for
    the answers alone (the prefix cache holds the prompt: a few tokens to evaluate). None when
    the reply was not cut inside the memory or the second call fails too."""
    last = e.completions[-1] if e.completions else None
    memory = salvage_memory(last.text) if last is not None and last.finish_reason == "length" else None
    if memory is None:
        return None
    memory = _cap(memory, st.cfg.memory_words)
    schema = step_schema(ids, st.cfg.memory_words, with_memory=False)
    try:
        c = budgeted_call(st, msgs, purpose="step-answers " + ",".join(ids), schema=schema, max_tokens=40 * len(ids))
    except StructuredOutputError as e2:
        flag(st.trace, f"step {','.join(ids)}: memory cut off at the token limit, answers asked again failed ({e2})")
        return None
    flag(
        st.trace,
        f"step {','.join(ids)}: memory cut off at the token limit; its first "
        f"{len(memory.split())} words kept, the answers asked again without it",
    )
    return {"memory": memory, "answers": c.data["answers"]}


def _evidence_budget(cfg: LogicConfig, group: list[SubQuestion]) -> int:
    """Evidence tokens a sub-question of this rank may see (0 = the whole chunks):
    form_evidence_tokens when every node comes from a form plan, else evidence_tokens."""
    if cfg.form_evidence_tokens and all(n.origin == "form" for n in group):
        return cfg.form_evidence_tokens
    return cfg.mechanisms().evidence_tokens


# ---------------------------------------------------------------- reflection


def _reflect_loop(st: SolveState) -> None:
    for rnd in range(1, st.cfg.max_rounds + 1):
        if st.cfg.reflect_when_unsure and all(_settled(st, n) for n in st.nodes.values()):
            why = "answered" if st.cfg.reflect_unknown_only else "answered from a passage"
            st.trace.details["reflection"].append({"round": rnd, "skipped": f"every sub-question {why}"})
            return
        facts = [(n.id, n.rewritten or n.question, n.answer or "unknown") for n in nodes_in_order(st)]
        try:
            c = budgeted_call(
                st,
                reflect_messages(st.question, facts, st.memory if st.cfg.mechanisms().reflect_notes else ""),
                purpose=f"reflect {rnd}",
                schema=reflect_schema(),
                max_tokens=REFLECT_MAX_TOKENS,
            )
        except StructuredOutputError as e:
            flag(st.trace, f"reflection output malformed ({e}): stopped reflecting (every node was retrieved for)")
            return
        rec = {"round": rnd, "sufficient": bool(c.data["sufficient"]), "missing": c.data["missing"], "added": []}
        st.trace.details["reflection"].append(rec)
        if c.data["sufficient"] or not c.data["missing"]:
            return
        new = _new_nodes(st, c.data["missing"])
        if not new:
            rec["note"] = "every proposed sub-question was already asked"
            return
        rec["added"] = [n.id for n in new]
        add_nodes(st.nodes, new)
        _solve_pending(st)
    flag(st.trace, f"reflection still insufficient after {st.cfg.max_rounds} rounds")


def _settled(st: SolveState, n: SubQuestion) -> bool:
    """Nothing for reflection to find about this node (LogicConfig.reflect_when_unsure): it has
    an answer that a retrieved passage states, or with reflect_unknown_only any answer at all."""
    return bool(known_answer(n)) if st.cfg.reflect_unknown_only else grounded(st, n)


def _new_nodes(st: SolveState, missing: list[dict]) -> list[SubQuestion]:
    # a question already answered is not asked again; one answered "unknown" may be: sampling
    # without replacement makes the repeat retrieve new chunks (the paper's reason for it)
    answered = [n for n in st.nodes.values() if known_answer(n)]
    asked = {normalize(n.question) for n in answered} | {normalize(n.rewritten or "") for n in answered}
    room = MAX_NODES - len(st.nodes)
    out: list[SubQuestion] = []
    for m in missing:
        qtext = " ".join(m["question"].split())
        if normalize(qtext) in asked or len(out) >= room:
            continue
        asked.add(normalize(qtext))
        out.append(SubQuestion(id="", question=qtext, depends_on=list(m.get("depends_on", [])), origin="reflection"))
    if not out:
        return []
    for n, i in zip(out, next_ids(set(st.nodes), len(out))):
        n.id = i
    if plan_problems(out, known=set(st.nodes)):
        out, dropped = repair(out, known=set(st.nodes))
        flag(st.trace, "reflection sub-questions repaired: " + "; ".join(dropped))
    return out


# ---------------------------------------------------------------- helpers


def _record_dag(st: SolveState) -> None:
    g = build_graph(list(st.nodes.values()))
    st.trace.dag = {
        "nodes": [{**n.to_dict(), "supported": _supported(st, n)} for n in nodes_in_order(st)],
        "edges": [[u, v] for u, v in sorted(g.edges, key=lambda e: (id_order_key(e[0]), id_order_key(e[1])))],
        "ranks": rank_groups(topological_ranks(g)) if len(g) else [],
    }


def _supported(st: SolveState, n: SubQuestion) -> bool | None:
    """Whether a passage shown for the node states its answer (None: nothing to check, or a
    one-node plan whose answer is the final one)."""
    if n.origin == "fallback" or st.trace.details.get("single_hop"):
        return None
    return supported(n.answer or "", node_chunks(st, n))


def _cap(text: str, words: int) -> str:
    w = " ".join(str(text).split()).split(" ")
    return " ".join(w[:words]) if len(w) > words else " ".join(w)


def _first_line(text: str) -> str:
    t = (text or "").strip()
    return t.splitlines()[0].strip() if t else ""
