"""The logic route: LogicRAG query-time DAG reasoning (AAAI 2026), every mechanism of the paper.

1. decompose the question into sub-questions with dependencies (few-shot, JSON schema);
2. check the DAG (unique ids, existing references, acyclic); regenerate once with the error
   stated; then repair (drop dangling refs / back edges), flagged;
3. solve rank by rank (rank = longest path from a source). *Graph pruning*: the sub-questions of
   one rank share ONE retrieval (their rewritten questions joined, k * len(rank) chunks, i.e. the
   same evidence budget as one retrieval per node) and ONE structured LLM call;
4. *context-aware retrieval*: a node with parents is rewritten with their answers first
   (`#qN` placeholders filled directly at zero tokens; otherwise a small LLM rewrite call);
5. *context pruning*: that same per-rank call also writes the rolling memory
   (`{"memory": ..., "answers": {...}}`): a query-oriented summary of old memory + new chunks,
   capped at `memory_words`. One call instead of two: the answers need the same reading of the
   same passages, and on the local model every call re-reads the prompt (~54 tokens/s);
6. *sampling without replacement*: chunk ids already retrieved for this question are excluded;
7. *self-reflection*: a structured sufficiency check may add sub-questions (with dependencies on
   existing ids), which are then solved; bounded by `max_rounds` and the budget. Every node is
   retrieved for before any reflection, so "sufficient" never means "answered from nothing";
8. final answer with the shared answer-only prompt over memory (context) + sub-answers (notes).
Every fallback is visible in trace["flags"].
"""
from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING

from engine import dag as D
from engine import prompts as P
from engine.errors import LLMError, StructuredOutputError
from engine.llm import LLM, Stopwatch, call_llm, flag
from engine.routes.chunk import clean_answer
from engine.routes.common import check_question
from engine.types import Answer, RetrievedChunk, Usage

if TYPE_CHECKING:
    from hierarchy.kb import KnowledgeBase

ANSWER_MAX_TOKENS = 32
DECOMPOSE_MAX_TOKENS = 320
REWRITE_MAX_TOKENS = 48
REFLECT_MAX_TOKENS = 160
MAX_NODES = 10  # decomposition (<= 5) plus what reflection may add; a hard stop for runaway plans


@dataclass
class LogicConfig:
    """Knobs of the logic route. The four switches exist for ablations; all on = the paper."""

    k: int = field(default=3, metadata={"help": "chunks retrieved per sub-question (a merged rank gets k x its size)"})
    max_rounds: int = field(default=3, metadata={"help": "self-reflection rounds at most (each may add sub-questions)"})
    merge_same_rank: bool = field(default=True, metadata={
        "help": "graph pruning: one retrieval + one LLM call per topological rank (off: per sub-question)"})
    rolling_memory: bool = field(default=True, metadata={
        "help": "context pruning: keep a query-oriented summary instead of raw chunks (off: raw chunks concatenated)"})
    without_replacement: bool = field(default=True, metadata={
        "help": "never retrieve a chunk twice for one question, so later retrievals bring new evidence"})
    reflection: bool = field(default=True, metadata={
        "help": "after the DAG is solved, check sufficiency and add sub-questions if evidence is missing"})
    memory_words: int = field(default=150, metadata={"help": "cap of the rolling memory in words (~ tokens * 0.75)"})
    final_chunks: int = field(default=0, metadata={
        "help": "raw chunks of the last hop (the DAG's single sink) shown to the final answer beside the memory; "
                "0 = memory only, as the paper (3 measured on 100 mixed questions: F1 48.4 vs 49.2, +11% prompt tokens)"})
    direct_single_hop: bool = field(default=True, metadata={
        "help": "a plan of one node restating the question (one lookup) is answered as the chunk route does: "
                "one retrieval, one answer over the raw chunks; off: step call, memory and reflection as for any DAG"})
    max_llm_calls: int = field(default=12, metadata={"help": "budget: LLM calls per question (final answer included)"})
    max_prompt_tokens: int = field(default=12000, metadata={"help": "budget: prompt tokens per question"})
    max_seconds: float = field(default=300, metadata={"help": "budget: wall seconds per question"})

    def __post_init__(self) -> None:
        if (self.k < 1 or self.max_rounds < 0 or self.memory_words < 10 or self.max_llm_calls < 1
                or self.final_chunks < 0):
            raise ValueError(f"bad LogicConfig: k >= 1, max_rounds >= 0, memory_words >= 10, "
                             f"max_llm_calls >= 1 and final_chunks >= 0 are required (got {self})")

    def fingerprint(self) -> str:
        """Short hash of every setting: results made under other settings are not reused."""
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha1(blob).hexdigest()[:10]

    @classmethod
    def help(cls) -> dict[str, str]:
        return {f.name: f.metadata.get("help", "") for f in fields(cls)}


class _Stop(Exception):
    """Internal: stop solving and answer from what was found (budget, LLM failure)."""


@dataclass
class _State:
    question: str
    kb: object
    llm: LLM
    cfg: LogicConfig
    usage: Usage
    trace: dict
    watch: Stopwatch
    nodes: dict[str, D.SubQuestion] = field(default_factory=dict)
    memory: str = ""
    raw: list[RetrievedChunk] = field(default_factory=list)  # every chunk retrieved, in order
    seen: list[str] = field(default_factory=list)  # chunk ids retrieved so far (exclusion list)
    rounds: int = 0  # retrieval rounds


def answer_logic(question: str, kb: "KnowledgeBase", llm: LLM, config: LogicConfig | None = None) -> Answer:
    """Answer one question with query-time DAG reasoning. Raises BadQuestionError on an empty
    question; other failures fall back visibly (trace["flags"]) instead of raising, except an
    LLMError on the final answer when nothing at all was answered."""
    watch = Stopwatch()
    q = check_question(question)
    cfg = config or LogicConfig()
    usage = Usage()
    trace: dict = {"route": "logic", "question": q, "config": asdict(cfg), "llm_calls": [], "flags": [],
                   "dag": {"nodes": [], "edges": [], "ranks": []}, "steps": [], "memory": [], "reflection": []}
    st = _State(q, kb, llm, cfg, usage, trace, watch)
    try:
        plan = _decompose(st)
        _add_nodes(st, plan)
        # a plan of one node that restates the question = the decomposer judged it one lookup.
        # (One node that is only a first hop keeps the DAG: reflection can add the missing hop.)
        single = cfg.direct_single_hop and len(plan) == 1 and _is_copy(st.question, plan[0].question)
        if plan[0].origin == "fallback" or single:
            # one-node DAG = chunk-route behaviour: one retrieval, then the final answer. Why for
            # single lookups: the structured step + memory lose the exact phrase (measured,
            # SQuAD+NQ one-node plans: F1 63.4 through the DAG vs 71.8 direct)
            trace["single_hop"] = single
            n = plan[0]
            n.rewritten = n.query = st.question
            n.chunk_ids = [c.chunk_id for c in _retrieve(st, st.question, cfg.k)]
            st.trace["steps"].append({"nodes": [n.id], "rank": 0, "query": st.question, "k": cfg.k,
                                      "chunk_ids": n.chunk_ids})
        else:
            _solve_pending(st)
            if cfg.reflection:
                _reflect_loop(st)
    except _Stop as e:
        flag(trace, f"{e}: answered from the memory so far")
    except LLMError as e:  # mid-DAG failure of the backend: keep what was found
        flag(trace, f"LLM error mid-DAG ({e}): answered from the memory so far")
    text = _final_answer(st)
    for n in st.nodes.values():
        if (n.origin == "fallback" or trace.get("single_hop")) and n.answer is None:
            n.answer = text
    _record_dag(st)
    trace["answer"] = text
    trace["retrieval_rounds"] = st.rounds
    usage.seconds = watch.elapsed()
    return Answer(text=text, route="logic", usage=usage, trace=trace)


# ---------------------------------------------------------------- budget + calls


def _call(st: _State, messages: list[dict], *, purpose: str, schema: dict | None = None, max_tokens: int,
          final: bool = False):
    """call_llm behind the per-question budget. Non-final calls keep one call in reserve for
    the final answer, so a budget stop still answers."""
    cfg, u = st.cfg, st.usage
    if not final:
        if u.llm_calls + 2 > cfg.max_llm_calls:
            raise _Stop(f"budget exhausted (LLM calls {u.llm_calls}/{cfg.max_llm_calls})")
        est = int(sum(len(m["content"].split()) for m in messages) / 0.75)
        if u.prompt_tokens + est > cfg.max_prompt_tokens:
            raise _Stop(f"budget exhausted (prompt tokens {u.prompt_tokens}+~{est} > {cfg.max_prompt_tokens})")
        if st.watch.elapsed() > cfg.max_seconds:
            raise _Stop(f"budget exhausted ({st.watch.elapsed():.0f}s > {cfg.max_seconds}s)")
    return call_llm(st.llm, messages, purpose=purpose, usage=u, trace=st.trace, schema=schema,
                    max_tokens=max_tokens)


# ---------------------------------------------------------------- decomposition


def _parse_plan(data: dict) -> list[D.SubQuestion]:
    return [D.SubQuestion(id=s["id"].strip(), question=" ".join(s["question"].split()),
                          depends_on=[d.strip() for d in s.get("depends_on", [])])
            for s in data["subquestions"]]


def _one_node(st: _State) -> list[D.SubQuestion]:
    return [D.SubQuestion(id="q1", question=st.question, origin="fallback")]


def _decompose(st: _State) -> list[D.SubQuestion]:
    schema = P.decompose_schema()
    try:
        c = _call(st, P.decompose_messages(st.question), purpose="decompose", schema=schema,
                  max_tokens=DECOMPOSE_MAX_TOKENS)
    except StructuredOutputError as e:
        flag(st.trace, f"decomposition malformed after retry ({e}): one-node DAG (chunk-route behaviour)")
        return _one_node(st)
    nodes = _drop_compare_only(st, _parse_plan(c.data))
    problems = D.plan_problems(nodes)
    if problems:
        flag(st.trace, "invalid plan regenerated: " + "; ".join(problems))
        try:
            c2 = _call(st, P.decompose_retry_messages(st.question, c.text, problems), purpose="decompose-retry",
                       schema=schema, max_tokens=DECOMPOSE_MAX_TOKENS)
            nodes2 = _drop_compare_only(st, _parse_plan(c2.data))
        except StructuredOutputError as e:
            flag(st.trace, f"regenerated plan malformed ({e}): repairing the first plan")
            nodes2 = nodes
        except _Stop:
            nodes2 = nodes  # no budget for the retry: repair what we have
        if D.plan_problems(nodes2):
            nodes2, dropped = D.repair(nodes2)
            flag(st.trace, "plan still invalid after regeneration, repaired: " + "; ".join(dropped))
        nodes = nodes2
    return _move_copies_last(st, nodes)


def _drop_compare_only(st: _State, nodes: list[D.SubQuestion]) -> list[D.SubQuestion]:
    """Drop a leaf that depends on 2+ answers without using any of them in its text ("Who is
    older?"): it has nothing to retrieve; the final answer does the comparison."""
    used = {d for n in nodes for d in D.all_refs(n)}
    keep = [n for n in nodes if not (len(n.depends_on) >= 2 and not D.placeholders(n.question) and n.id not in used)]
    if len(keep) < len(nodes) and keep:
        flag(st.trace, "compare-only sub-question dropped: " + ", ".join(n.id for n in nodes if n not in keep))
        return keep
    return nodes


def _is_copy(question: str, sub: str) -> bool:
    """`sub` says the same as `question` (>= 90% of the words of each, counted with repeats)."""
    a, b = Counter(_norm(question).split()), Counter(_norm(sub).split())
    common = sum((a & b).values())
    return bool(a) and common >= 0.9 * sum(a.values()) and common >= 0.9 * sum(b.values())


def _move_copies_last(st: _State, nodes: list[D.SubQuestion]) -> list[D.SubQuestion]:
    """The small model's usual failure: q1 repeats the whole question and the real first hop
    comes after it ("q1: seat of the county where X is? q2: county where X is? (needs q1)").
    A regeneration does not fix it (measured), so the copy becomes the LAST node, depending on
    the others: it is then rewritten with their answers and retrieved for as the final hop."""
    copies = [n for n in nodes if _is_copy(st.question, n.question)] if len(nodes) > 1 else []
    if not copies or len(copies) == len(nodes):
        return nodes
    c = copies[0]
    rest = [n for n in nodes if n is not c]
    for n in rest:
        n.depends_on = [d for d in n.depends_on if d != c.id]
    used = {d for n in rest for d in n.depends_on}
    c.depends_on = [n.id for n in rest if n.id not in used]  # the sinks of the rest
    c.question = " ".join(D._PLACEHOLDER.sub("that", c.question).split())
    fixed, dropped = D.repair(rest + [c])
    flag(st.trace, f"{c.id} repeated the whole question: moved last, after {', '.join(c.depends_on)}"
         + (f" ({'; '.join(dropped)})" if dropped else ""))
    return fixed


def _add_nodes(st: _State, nodes: list[D.SubQuestion]) -> None:
    for n in nodes:
        st.nodes[n.id] = n
    g = D.build_graph(list(st.nodes.values()))
    for v, r in D.topological_ranks(g).items():
        st.nodes[v].rank = r


# ---------------------------------------------------------------- solving


def _solve_pending(st: _State) -> None:
    """Solve every unanswered node, rank by rank (parents always come first)."""
    g = D.build_graph(list(st.nodes.values()))
    ranks = D.topological_ranks(g)
    pending = {i for i, n in st.nodes.items() if n.answer is None}
    for group in D.rank_groups(ranks, only=pending):
        for i in group:
            _rewrite(st, st.nodes[i], g)
        if st.cfg.merge_same_rank:
            _solve_group(st, [st.nodes[i] for i in group])
        else:
            for i in group:
                _solve_group(st, [st.nodes[i]])


def _rewrite(st: _State, n: D.SubQuestion, g) -> None:
    """Context-aware retrieval: put the parents' answers into the question before searching."""
    parents = sorted(g.predecessors(n.id), key=D._id_key)
    if not parents:
        n.rewritten, n.rewrite = n.question, "none"
        return
    answers = {p: st.nodes[p].answer or "" for p in parents}
    refs = D.placeholders(n.question)
    if refs:
        # an unknown parent answer is replaced by what it asked for: better retrieval than "unknown"
        values = {i: _known(st.nodes[i]) or (st.nodes[i].rewritten or st.nodes[i].question).rstrip("?")
                  for i in refs if i in st.nodes}
        n.rewritten, n.rewrite = " ".join(D.substitute(n.question, values).split()), "placeholder"
        if all(p in refs for p in parents):
            return
    # a parent used without a placeholder ("When was the director born?"): ask the model
    facts = [(st.nodes[p].rewritten or st.nodes[p].question, answers[p]) for p in parents]
    try:
        c = _call(st, P.rewrite_messages(n.rewritten or n.question, facts), purpose=f"rewrite {n.id}",
                  max_tokens=REWRITE_MAX_TOKENS)
        text = _first_line(c.text)
    except _Stop:
        raise
    except LLMError as e:
        flag(st.trace, f"rewrite of {n.id} failed ({e}): parents' answers appended instead")
        text = ""
    if not text:
        text = f"{n.rewritten or n.question} ({'; '.join(a for a in answers.values() if a)})"
    n.rewritten, n.rewrite = text, "llm"


def _retrieve(st: _State, query: str, k: int) -> list[RetrievedChunk]:
    exclude = list(st.seen) if st.cfg.without_replacement else []
    chunks = list(st.kb.search(query, k=k, exclude=exclude))
    st.rounds += 1
    for c in chunks:
        st.raw.append(c)
        if c.chunk_id not in st.seen:
            st.seen.append(c.chunk_id)
    return chunks


def _solve_group(st: _State, group: list[D.SubQuestion]) -> None:
    """One retrieval and one structured call for a group of same-rank sub-questions."""
    cfg = st.cfg
    texts = [n.rewritten or n.question for n in group]
    query = " ".join(texts)
    k = cfg.k * len(group)
    chunks = _retrieve(st, query, k)
    for n in group:
        n.query = query
        n.chunk_ids = [c.chunk_id for c in chunks]
    step = {"nodes": [n.id for n in group], "rank": group[0].rank, "query": query, "k": k,
            "chunk_ids": [c.chunk_id for c in chunks]}
    st.trace["steps"].append(step)
    ids = [n.id for n in group]
    if cfg.rolling_memory:
        passages = P.format_passages(chunks)
        notes = st.memory
    else:  # raw chunks concatenated: everything retrieved so far is the context
        passages = P.format_passages(_dedup(st.raw))
        notes = ""
    msgs = P.step_messages(st.question, notes, passages, list(zip(ids, texts)), cfg.memory_words, cfg.rolling_memory)
    schema = P.step_schema(ids, cfg.memory_words, cfg.rolling_memory)
    max_tokens = 40 * len(ids) + (int(cfg.memory_words / 0.75) + 20 if cfg.rolling_memory else 10)
    try:
        c = _call(st, msgs, purpose="step " + ",".join(ids), schema=schema, max_tokens=max_tokens)
    except StructuredOutputError as e:
        # keep the evidence: a step without "memory" has its chunks passed raw to the final answer
        flag(st.trace, f"step {','.join(ids)} output malformed ({e}): its chunks kept raw, answers unknown")
        for n in group:
            n.answer = ""
        return
    for n in group:
        n.answer = _first_line(str(c.data["answers"].get(n.id, "")))
    if cfg.rolling_memory:
        st.memory = _cap(c.data.get("memory", ""), cfg.memory_words)
        step["memory"] = st.memory
        st.trace["memory"].append(st.memory)


# ---------------------------------------------------------------- reflection


def _reflect_loop(st: _State) -> None:
    for rnd in range(1, st.cfg.max_rounds + 1):
        facts = [(n.id, n.rewritten or n.question, n.answer or "unknown") for n in _ordered(st)]
        try:
            c = _call(st, P.reflect_messages(st.question, facts, st.memory), purpose=f"reflect {rnd}",
                      schema=P.reflect_schema(), max_tokens=REFLECT_MAX_TOKENS)
        except StructuredOutputError as e:
            flag(st.trace, f"reflection output malformed ({e}): stopped reflecting (every node was retrieved for)")
            return
        rec = {"round": rnd, "sufficient": bool(c.data["sufficient"]), "missing": c.data["missing"], "added": []}
        st.trace["reflection"].append(rec)
        if c.data["sufficient"] or not c.data["missing"]:
            return
        new = _new_nodes(st, c.data["missing"])
        if not new:
            rec["note"] = "every proposed sub-question was already asked"
            return
        rec["added"] = [n.id for n in new]
        _add_nodes(st, new)
        _solve_pending(st)
    flag(st.trace, f"reflection still insufficient after {st.cfg.max_rounds} rounds")


def _new_nodes(st: _State, missing: list[dict]) -> list[D.SubQuestion]:
    # a question already answered is not asked again; one answered "unknown" may be: sampling
    # without replacement makes the repeat retrieve new chunks (the paper's reason for it)
    answered = [n for n in st.nodes.values() if _known(n)]
    asked = {_norm(n.question) for n in answered} | {_norm(n.rewritten or "") for n in answered}
    room = MAX_NODES - len(st.nodes)
    out: list[D.SubQuestion] = []
    for m in missing:
        qtext = " ".join(m["question"].split())
        if _norm(qtext) in asked or len(out) >= room:
            continue
        asked.add(_norm(qtext))
        out.append(D.SubQuestion(id="", question=qtext, depends_on=list(m.get("depends_on", [])), origin="reflection"))
    if not out:
        return []
    for n, i in zip(out, D.next_ids(set(st.nodes), len(out))):
        n.id = i
    if D.plan_problems(out, known=set(st.nodes)):
        out, dropped = D.repair(out, known=set(st.nodes))
        flag(st.trace, "reflection sub-questions repaired: " + "; ".join(dropped))
    return out


# ---------------------------------------------------------------- final answer


def _final_answer(st: _State) -> str:
    cfg = st.cfg
    if not any(_known(n) for n in st.nodes.values()) and st.question not in (s["query"] for s in st.trace["steps"]):
        # stopped before any sub-answer: never answer from less than the chunk route would see
        got = _retrieve(st, st.question, cfg.k)
        st.trace["steps"].append({"nodes": [], "rank": None, "query": st.question, "k": cfg.k,
                                  "chunk_ids": [c.chunk_id for c in got]})
    if cfg.rolling_memory and st.memory:
        context = st.memory
        # chunks of a step that never got summarised (stopped mid-rank) are still evidence
        summarised = {cid for s in st.trace["steps"] if "memory" in s for cid in s["chunk_ids"]}
        pending = [c for c in _dedup(st.raw) if c.chunk_id not in summarised]
        pending_ids = {c.chunk_id for c in pending}
        last_hop = [c for c in _last_hop_chunks(st) if c.chunk_id not in pending_ids]
        if pending or last_hop:
            context += "\n" + P.format_passages(last_hop + pending)
    else:
        context = P.format_passages(_dedup(st.raw))
    notes = _final_notes(st)
    try:
        c = _call(st, P.answer_messages(st.question, context, notes), purpose="answer",
                  max_tokens=ANSWER_MAX_TOKENS, final=True)
    except LLMError as e:
        answered = [n for n in _ordered(st) if _known(n)]
        if not answered:
            raise
        flag(st.trace, f"final answer failed ({e}): last sub-answer returned")
        return answered[-1].answer or ""
    return clean_answer(c.text)


def _last_hop_chunks(st: _State) -> list[RetrievedChunk]:
    """The raw chunks retrieved for the DAG's single sink, the hop that answers the question.

    Why it exists: the 150-word memory can drop the exact phrase the answer needs (SQuAD: memory
    "oil prices ... priced in terms of gold" lost "September 1971"). Measured, it did not pay (the
    wrong sub-answer in the notes wins), so it is off by default; direct_single_hop fixed those
    questions instead. Comparisons (several sinks) keep memory + computed notes only.
    """
    if st.cfg.final_chunks == 0:
        return []
    used = {d for n in st.nodes.values() for d in n.depends_on}
    sinks = [n for n in st.nodes.values() if n.id not in used and n.chunk_ids]
    if len(sinks) != 1:
        return []
    by_id = {c.chunk_id: c for c in st.raw}
    return [by_id[i] for i in sinks[0].chunk_ids if i in by_id][: st.cfg.final_chunks]


def _final_notes(st: _State) -> str:
    """Sub-answers as "question answer" lines, plus a computed comparison line when one applies.

    Why: comparisons are half of 2Wiki, and the small model fails them at the last step even
    with both facts in hand (measured: "born 6 October 1988" vs "born February 27, 1975" ->
    it names the younger one as older; "Indian" vs "Italian" -> "yes, same nationality"). Told
    the conclusion in words it copies it. So for "A or B?" questions whose compared facts are
    dates, and for "same X?" questions whose sub-questions asked for X, the comparison is
    computed here and stated; it is recorded in trace["comparison"]."""
    known = [n for n in _ordered(st) if _known(n)]
    lines = [f"{n.rewritten or n.question} {n.answer}" for n in known]
    hint = _date_choice(st, known) or _same_check(st, known)
    if hint:
        st.trace["comparison"] = hint
        lines.append(hint)
    return "\n".join(lines)


_EARLY = re.compile(r"\b(older|oldest|first|earlier|earliest|before)\b", re.I)
_LATE = re.compile(r"\b(younger|youngest|later|latest|last|recently|recent|newer|after)\b", re.I)


def _date_choice(st: _State, known: list[D.SubQuestion]) -> str:
    """"Who died first, A or B?" with a date found for each of A and B -> which one it is."""
    m = re.search(r",\s*(.+?)\s+or\s+(.+?)\s*\?\s*$", st.question)
    early, late = bool(_EARLY.search(st.question)), bool(_LATE.search(st.question))
    if not m or early == late:
        return ""
    options = [m.group(1).strip(), m.group(2).strip()]
    dated = [n for n in known if _date_key(n.answer or "")]
    picked: dict[str, D.SubQuestion] = {}
    for n in sorted(dated, key=lambda n: -n.rank):  # deepest facts first (bridge: the directors' dates)
        opts = [o for o in options if o not in picked and _mentions(st, n, o)]
        if len(opts) == 1:
            picked[opts[0]] = n
    if len(picked) != 2 or len({_date_key(n.answer or "") for n in picked.values()}) != 2:
        return ""
    order = sorted(options, key=lambda o: _date_key(picked[o].answer or ""))
    win = order[0] if early else order[1]
    return (f"Date comparison: {win} has the {'earlier' if early else 'later'} date "
            f"({picked[win].answer}), so the answer is {win}.")


def _mentions(st: _State, n: D.SubQuestion, option: str) -> bool:
    """The option names this node or one of its ancestors (film -> its director -> his death)."""
    o = _norm(option)
    seen, todo = set(), [n.id]
    while todo:
        i = todo.pop()
        if i in seen or i not in st.nodes:
            continue
        seen.add(i)
        a = st.nodes[i]
        if o and o in _norm(f"{a.rewritten or a.question} {a.answer or ''}"):
            return True
        todo += a.depends_on
    return False


def _same_check(st: _State, known: list[D.SubQuestion]) -> str:
    """"Are A and B of the same nationality?" with the nationality of each found -> yes/no."""
    m = re.search(r"\bsame (\w+)", st.question, re.I)
    if not m:
        return ""
    attr = m.group(1).lower()[:6]  # "nationality" -> "nation", "country" -> "countr"
    asked = [n for n in known if attr in (n.rewritten or n.question).lower()]
    if len(asked) != 2:
        return ""
    a, b = (_norm(n.answer or "") for n in asked)
    same = a == b or a in b or b in a or (len(a.split()) == len(b.split()) == 1 and a[:4] == b[:4])
    return (f"The answers {asked[0].answer} and {asked[1].answer} are {'the same' if same else 'different'}, "
            f"so the answer is {'yes' if same else 'no'}.")


_MONTHS = {m: i for i, m in enumerate(["january", "february", "march", "april", "may", "june", "july", "august",
                                        "september", "october", "november", "december"], 1)}


def _date_key(text: str) -> tuple[int, int, int] | None:
    """(year, month, day) of a date written as '6 October 1988', 'February 27, 1975' or '1936'."""
    t = text.lower()
    years = re.findall(r"\b(1\d{3}|20\d{2})\b", t)
    if not years:
        return None
    month = next((i for m, i in _MONTHS.items() if m in t or re.search(rf"\b{m[:3]}\b", t)), 0)
    day = re.search(r"\b([0-3]?\d)(st|nd|rd|th)?\b(?!\d)", re.sub(r"\b(1\d{3}|20\d{2})\b", " ", t))
    return int(years[-1]), month, int(day.group(1)) if day and month else 0


# ---------------------------------------------------------------- helpers


def _record_dag(st: _State) -> None:
    g = D.build_graph(list(st.nodes.values()))
    st.trace["dag"] = {
        "nodes": [n.to_dict() for n in _ordered(st)],
        "edges": [[u, v] for u, v in sorted(g.edges, key=lambda e: (D._id_key(e[0]), D._id_key(e[1])))],
        "ranks": D.rank_groups(D.topological_ranks(g)) if len(g) else [],
    }


def _ordered(st: _State) -> list[D.SubQuestion]:
    return sorted(st.nodes.values(), key=lambda n: (n.rank, D._id_key(n.id)))


def _dedup(chunks: list[RetrievedChunk]) -> list[RetrievedChunk]:
    seen: set[str] = set()
    out = []
    for c in chunks:
        if c.chunk_id not in seen:
            seen.add(c.chunk_id)
            out.append(c)
    return out


def _cap(text: str, words: int) -> str:
    w = " ".join(str(text).split()).split(" ")
    return " ".join(w[:words]) if len(w) > words else " ".join(w)


def _first_line(text: str) -> str:
    t = (text or "").strip()
    return t.splitlines()[0].strip() if t else ""


_UNKNOWN = re.compile(r"\b(unknown|not (mentioned|provided|stated|given|specified)|no information|n/a)\b", re.I)


def _known(n: D.SubQuestion) -> str:
    """The node's answer, or "" when it has none or said it does not know."""
    a = (n.answer or "").strip()
    return "" if not a or _UNKNOWN.search(a) else a


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9 ]", "", text.lower()).strip()
