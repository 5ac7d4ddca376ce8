"""The per-query sub-question DAG of the logic route (LogicRAG): validation, repair,
topological ranks, placeholder substitution and a Mermaid rendering of a trace.

A plan is a list of `SubQuestion`s. Dependencies are the explicit `depends_on` ids plus every
`#qN` placeholder in the question text (a placeholder *is* a reference to an earlier answer).
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

import networkx as nx

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
        stale = {i: f"(the answer to: {qtext[i]})" if i in qtext else "" for i in placeholders(n.question)
                 if i not in n.depends_on}
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
    return [sorted(groups[r], key=_id_key) for r in sorted(groups)]


def _id_key(i: str) -> tuple[int, str]:
    m = re.fullmatch(r"q(\d+)", i)
    return (int(m.group(1)), i) if m else (10**9, i)


# ---------------------------------------------------------------- mermaid


def _mm(text: str, limit: int = 80) -> str:
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    # '#' first: the other escapes introduce it ('#q1' placeholders of unsolved nodes stay literal)
    return text.replace("#", "#35;").replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")


def trace_to_mermaid(trace: dict) -> str:
    """A Mermaid flowchart of a logic-route trace: the question, one box per sub-question
    (rewritten text and answer), dependency edges, ranks as subgraphs, and the final answer.
    Nodes added by self-reflection are dashed."""
    dag = trace.get("dag") or {}
    nodes = dag.get("nodes") or []
    lines = ["flowchart TD"]
    lines.append(f'  Q(["{_mm(trace.get("question", "question"), 120)}"])')
    by_rank: dict[int, list[dict]] = {}
    for n in nodes:
        by_rank.setdefault(int(n.get("rank", 0)), []).append(n)
    for r in sorted(by_rank):
        lines.append(f'  subgraph rank{r}["rank {r}"]')
        for n in by_rank[r]:
            text = n.get("rewritten") or n.get("question", "")
            ans = n.get("answer")
            label = f"{n['id']}: {_mm(text)}" + (f"<br/>→ {_mm(ans, 60)}" if ans else "")
            lines.append(f'    {n["id"]}["{label}"]')
        lines.append("  end")
    parents = {v for _, v in dag.get("edges", [])}
    for n in nodes:
        if n["id"] not in parents:
            lines.append(f"  Q --> {n['id']}")
    for u, v in dag.get("edges", []):
        lines.append(f"  {u} --> {v}")
    has_child = {u for u, _ in dag.get("edges", [])}
    lines.append(f'  A(["answer: {_mm(trace.get("answer", ""), 80)}"])')
    for n in nodes:
        if n["id"] not in has_child:
            lines.append(f"  {n['id']} --> A")
    added = [n["id"] for n in nodes if n.get("origin") == "reflection"]
    if added:
        lines.append("  classDef reflected stroke-dasharray: 5 5")
        lines.append(f"  class {','.join(added)} reflected")
    if trace.get("flags"):
        lines.append(f"  %% flags: {_mm('; '.join(trace['flags']), 300)}")
    return "\n".join(lines) + "\n"
