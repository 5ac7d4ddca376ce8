"""The logic route's plan: a DAG of sub-questions. Decomposition (one structured LLM call,
regenerated once when invalid), validation, repair, the fixes for the small model's usual plan
faults, and topological ranks.

A plan is a list of `SubQuestion`s. Dependencies are the explicit `depends_on` ids plus every
`#qN` placeholder in the question text (a placeholder *is* a reference to an earlier answer).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import networkx as nx

from engine.core.routes.logic.config import BudgetExhausted
from engine.floor.base.errors import StructuredOutputError
from engine.floor.base.trace import Trace
from engine.floor.llm.base import flag
from engine.floor.prompts.logic import PlanPrompt
from engine.floor.question.parse import Question, as_question

if TYPE_CHECKING:
    from engine.floor.base.types import Completion

# A budgeted LLM call, `call(messages, *, purpose, schema, max_tokens)`; it raises BudgetExhausted.
LLMCall = Callable[..., "Completion"]

DECOMPOSE_MAX_TOKENS = 320

# '#q1', also the '{q1}' / '[q1]' / '<q1>' spellings a small model sometimes writes instead.
_PLACEHOLDER = re.compile(r"#(q\d+)\b|\{(q\d+)\}|\[(q\d+)\]|<(q\d+)>")


@dataclass
class SubQuestion:
    id: str
    question: str
    depends_on: list[str] = field(default_factory=list)
    origin: str = "decomposition"  # "decomposition" | "reflection" | "fallback"
    rank: int = 0
    rewritten: str | None = None  # question with the parents' answers filled in
    rewrite: str = "none"  # "none" | "placeholder" (0 tokens) | "llm"
    query: str | None = None  # the text actually sent to retrieval (merged for a rank)
    answer: str | None = None
    chunk_ids: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def placeholders(text: str) -> list[str]:
    """Ids referenced as placeholders in `text`, in order of first appearance."""
    seen: list[str] = []
    for m in _PLACEHOLDER.finditer(text):
        i = next(g for g in m.groups() if g)
        if i not in seen:
            seen.append(i)
    return seen


def substitute(text: str, values: dict[str, str]) -> str:
    """Replace each placeholder whose id is in `values`; leave the others untouched."""

    def repl(m: re.Match) -> str:
        i = next(g for g in m.groups() if g)
        return values[i] if i in values else m.group(0)

    return _PLACEHOLDER.sub(repl, text)


def all_refs(node: SubQuestion) -> list[str]:
    """Explicit dependencies plus placeholder references, without duplicates."""
    out = list(dict.fromkeys(node.depends_on))
    for i in placeholders(node.question):
        if i not in out:
            out.append(i)
    return out


def plan_problems(nodes: list[SubQuestion], known: set[str] = frozenset()) -> list[str]:
    """Everything wrong with a plan, as sentences a model can act on. `known` = ids of nodes
    that already exist (reflection adds nodes to a solved DAG)."""
    problems: list[str] = []
    ids = [n.id for n in nodes]
    for i in sorted({i for i in ids if ids.count(i) > 1 or i in known}):
        problems.append(f"id {i} is used more than once")
    valid = set(ids) | set(known)
    for n in nodes:
        for d in all_refs(n):
            if d == n.id:
                problems.append(f"{n.id} depends on itself")
            elif d not in valid:
                problems.append(f"{n.id} refers to {d}, which does not exist")
    if not problems:
        g = build_graph(nodes)
        try:
            cycle = nx.find_cycle(g)
            path = " -> ".join([u for u, _ in cycle] + [cycle[0][0]])
            problems.append(f"the dependencies form a cycle ({path}); a sub-question can only use earlier answers")
        except nx.NetworkXNoCycle:
            pass
    return problems


def build_graph(nodes: list[SubQuestion], existing: nx.DiGraph | None = None) -> nx.DiGraph:
    """Edges parent -> child for every reference to a node that exists."""
    g = nx.DiGraph() if existing is None else existing.copy()
    for n in nodes:
        g.add_node(n.id)
    for n in nodes:
        for d in all_refs(n):
            if d in g and d != n.id:
                g.add_edge(d, n.id)
    return g


def repair(nodes: list[SubQuestion], known: set[str] = frozenset()) -> tuple[list[SubQuestion], list[str]]:
    """Make a plan valid without another LLM call: rename duplicate ids, drop dangling
    references and self-references, then drop back edges (references to a node listed later)
    that would close a cycle. Returns the repaired nodes and what was dropped (for flags)."""
    dropped: list[str] = []
    used = set(known)
    out: list[SubQuestion] = []
    for n in nodes:
        n = SubQuestion(**{**asdict(n), "depends_on": list(n.depends_on)})
        if n.id in used:
            new = _fresh_id(used | {m.id for m in nodes})
            dropped.append(f"duplicate id {n.id} renamed {new}")
            n.id = new
        used.add(n.id)
        out.append(n)
    valid = used
    order = {n.id: i for i, n in enumerate(out)}
    for n in out:
        keep = []
        for d in all_refs(n):
            if d == n.id:
                dropped.append(f"self-reference {n.id}->{d}")
            elif d not in valid:
                dropped.append(f"dangling reference {n.id}->{d}")
            else:
                keep.append(d)
        n.depends_on = keep
    # forward edges (parent listed earlier, or an already solved node) can never form a cycle;
    # add them first, then each back edge only if it keeps the graph acyclic
    g = nx.DiGraph()
    g.add_nodes_from(valid)
    edges = [(d, n.id) for n in out for d in n.depends_on]
    edges.sort(key=lambda e: order.get(e[0], -1) >= order[e[1]])
    for u, v in edges:
        if nx.has_path(g, v, u):
            dropped.append(f"back edge {u}->{v}")
            child = next(n for n in out if n.id == v)
            child.depends_on.remove(u)
        else:
            g.add_edge(u, v)
    # a placeholder whose edge was dropped cannot be filled: say what it stood for instead
    qtext = {n.id: " ".join(_PLACEHOLDER.sub("that", n.question).split()) for n in out}
    for n in out:
        stale = {
            i: f"(the answer to: {qtext[i]})" if i in qtext else ""
            for i in placeholders(n.question)
            if i not in n.depends_on
        }
        if stale:
            n.question = " ".join(substitute(n.question, stale).split())
    return out, dropped


def _fresh_id(used: set[str]) -> str:
    i = 1
    while f"q{i}" in used:
        i += 1
    return f"q{i}"


def next_ids(used: set[str], n: int) -> list[str]:
    out: list[str] = []
    for _ in range(n):
        out.append(_fresh_id(used | set(out)))
    return out


def topological_ranks(g: nx.DiGraph) -> dict[str, int]:
    """rank = length of the longest path from a source (sources have rank 0).
    Raises networkx.NetworkXUnfeasible on a cycle."""
    rank: dict[str, int] = {}
    for v in nx.topological_sort(g):
        preds = list(g.predecessors(v))
        rank[v] = 1 + max(rank[p] for p in preds) if preds else 0
    return rank


def rank_groups(rank: dict[str, int], only: set[str] | None = None) -> list[list[str]]:
    """Node ids grouped by rank, ascending; ids in a group keep a stable (sorted-by-number) order."""
    groups: dict[int, list[str]] = {}
    for v, r in rank.items():
        if only is None or v in only:
            groups.setdefault(r, []).append(v)
    return [sorted(groups[r], key=id_order_key) for r in sorted(groups)]


def id_order_key(i: str) -> tuple[int, str]:
    """Sort key of a node id: q2 before q10, ids of another form last."""
    m = re.fullmatch(r"q(\d+)", i)
    return (int(m.group(1)), i) if m else (10**9, i)


def add_nodes(nodes: dict[str, SubQuestion], new: list[SubQuestion]) -> None:
    """Add `new` to the DAG `nodes` (id -> node) and set every node's rank again."""
    for n in new:
        nodes[n.id] = n
    g = build_graph(list(nodes.values()))
    for v, r in topological_ranks(g).items():
        nodes[v].rank = r


# ---------------------------------------------------------------- decomposition


def _parse_plan(items: list[dict]) -> list[SubQuestion]:
    """Sub-questions of a reply's items (PlanPrompt.items)."""
    return [
        SubQuestion(
            id=s["id"].strip(),
            question=" ".join(s["question"].split()),
            depends_on=[d.strip() for d in s.get("depends_on", [])],
        )
        for s in items
    ]


def _one_node(question: str) -> list[SubQuestion]:
    return [SubQuestion(id="q1", question=question, origin="fallback")]


def plan_from_form(question: str | Question) -> tuple[str, list[SubQuestion]] | None:
    """(the form's name, its plan) when engine.floor.question.forms reads one off the question and it is a valid
    DAG, else None: the LLM decomposes."""
    got = as_question(question).form_plan
    if got is None:
        return None
    nodes = [
        SubQuestion(id=f"q{i}", question=t, depends_on=sorted(set(placeholders(t))), origin="form")
        for i, t in enumerate(got[1], 1)
    ]
    return (got[0], nodes) if not plan_problems(nodes) else None


def decompose(question: str, call: LLMCall, trace: Trace, prompt: PlanPrompt | None = None) -> list[SubQuestion]:
    """The question's plan: decomposed, regenerated once with its problems stated, repaired if
    still invalid. A malformed decomposition gives a one-node plan (origin "fallback").
    `prompt`: the decomposition's prompt and reply form (engine.floor.prompts.logic.PlanPrompt)."""
    prompt = prompt or PlanPrompt()
    schema = prompt.schema()
    try:
        c = call(prompt.messages(question), purpose="decompose", schema=schema, max_tokens=DECOMPOSE_MAX_TOKENS)
    except StructuredOutputError as e:
        flag(trace, f"decomposition malformed after retry ({e}): one-node DAG (chunk-route behaviour)")
        return _one_node(question)
    nodes = _drop_compare_only(trace, _parse_plan(prompt.items(c.data)))
    problems = plan_problems(nodes)
    if problems:
        flag(trace, "invalid plan regenerated: " + "; ".join(problems))
        try:
            c2 = call(
                prompt.retry_messages(question, c.text, problems),
                purpose="decompose-retry",
                schema=schema,
                max_tokens=DECOMPOSE_MAX_TOKENS,
            )
            nodes2 = _drop_compare_only(trace, _parse_plan(prompt.items(c2.data)))
        except StructuredOutputError as e:
            flag(trace, f"regenerated plan malformed ({e}): repairing the first plan")
            nodes2 = nodes
        except BudgetExhausted:
            nodes2 = nodes  # no budget for the retry: repair what we have
        if plan_problems(nodes2):
            nodes2, dropped = repair(nodes2)
            flag(trace, "plan still invalid after regeneration, repaired: " + "; ".join(dropped))
        nodes = nodes2
    return _move_copies_last(question, trace, nodes)


def _drop_compare_only(trace: Trace, nodes: list[SubQuestion]) -> list[SubQuestion]:
    """Drop a leaf that depends on 2+ answers without using any of them in its text ("Who is
    older?"): it has nothing to retrieve; the final answer does the comparison."""
    used = {d for n in nodes for d in all_refs(n)}
    keep = [n for n in nodes if not (len(n.depends_on) >= 2 and not placeholders(n.question) and n.id not in used)]
    if len(keep) < len(nodes) and keep:
        flag(trace, "compare-only sub-question dropped: " + ", ".join(n.id for n in nodes if n not in keep))
        return keep
    return nodes


def is_copy(question: str, sub: str) -> bool:
    """`sub` says the same as `question` (>= 90% of the words of each, counted with repeats)."""
    a, b = Counter(normalize(question).split()), Counter(normalize(sub).split())
    common = sum((a & b).values())
    return bool(a) and common >= 0.9 * sum(a.values()) and common >= 0.9 * sum(b.values())


def _move_copies_last(question: str, trace: Trace, nodes: list[SubQuestion]) -> list[SubQuestion]:
    """The small model's usual failure: q1 repeats the whole question and the real first hop
    comes after it ("q1: seat of the county where X is? q2: county where X is? (needs q1)").
    A regeneration does not fix it, so the copy becomes the LAST node, depending on
    the others: it is then rewritten with their answers and retrieved for as the final hop."""
    copies = [n for n in nodes if is_copy(question, n.question)] if len(nodes) > 1 else []
    if not copies or len(copies) == len(nodes):
        return nodes
    c = copies[0]
    rest = [n for n in nodes if n is not c]
    for n in rest:
        n.depends_on = [d for d in n.depends_on if d != c.id]
    used = {d for n in rest for d in n.depends_on}
    c.depends_on = [n.id for n in rest if n.id not in used]  # the sinks of the rest
    c.question = " ".join(_PLACEHOLDER.sub("that", c.question).split())
    fixed, dropped = repair(rest + [c])
    flag(
        trace,
        f"{c.id} repeated the whole question: moved last, after {', '.join(c.depends_on)}"
        + (f" ({'; '.join(dropped)})" if dropped else ""),
    )
    return fixed


def normalize(text: str) -> str:
    """Lower case, letters, digits and spaces only: for comparing questions and answers."""
    return re.sub(r"[^a-z0-9 ]", "", text.lower()).strip()
