"""The house drawn from its imports: every import between modules of logicroute's packages, each
module placed on its floor, counted by direction. An upward import is one from a lower floor to a
higher one; a cycle is one among the floors. Run from the repository root:

    PYTHONPATH=. .venv/bin/python docs/results/design/house.py
"""

from __future__ import annotations

import grimp
import networkx as nx

# top first, as the import contract "The house" in pyproject.toml lists them
FLOORS = ["logicroute", "training", "engine.face", "engine.core", "router", "hierarchy", "engine.floor"]


def floor_of(module: str) -> str | None:
    for f in FLOORS:
        if module == f or module.startswith(f + "."):
            return f
    return None  # engine itself (its lazy facade)


def main() -> None:
    graph = grimp.build_graph("engine", "hierarchy", "router", "training", "logicroute")
    counts: dict[tuple[str, str], int] = {}
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            a, b = floor_of(importer), floor_of(imported)
            if a and b and a != b:
                counts[(a, b)] = counts.get((a, b), 0) + 1
    rank = {f: i for i, f in enumerate(FLOORS)}
    up = {k: n for k, n in counts.items() if rank[k[0]] > rank[k[1]]}
    floors = nx.DiGraph(list(counts))
    print(f"{len(graph.modules)} modules; imports between floors, importer -> imported:")
    for (a, b), n in sorted(counts.items(), key=lambda kv: (rank[kv[0][0]], rank[kv[0][1]])):
        print(f"  {a:13} -> {b:13} {n:4}{'  UPWARD' if (a, b) in up else ''}")
    print(f"upward imports: {sum(up.values())}; cycles among the floors: {len(list(nx.simple_cycles(floors)))}")


if __name__ == "__main__":
    main()
