"""A Mermaid flowchart of a logic-route trace (`logicroute ask --trace-format mermaid`)."""

from __future__ import annotations


def _mm(text: str, limit: int = 80) -> str:
    """`text` on one line, cut to `limit` characters, escaped for a quoted Mermaid label."""
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
