"""The summary tree over a knowledge base (RAPTOR-style) and its full build.

Level 0 is the chunks. Level 1 clusters the chunk embeddings; every cluster becomes a node with
a summary and a vector (hierarchy.layers.nodes: for extractive layers the mean of its chunks'
vectors, for LLM-written ones the summary's embedding); the node vectors are clustered again,
and so on until a level holds at most MAX_TOP nodes. Every node keeps its children (chunk ids
at level 1, node ids above) and its parent.

Clustering (hierarchy.layers.clustering): k = round(m / CLUSTER_SIZE) clusters at every level.
Ward rather than RAPTOR's GMM: it keeps a question's supporting passages together more often and
its clusters stay small enough for one summary to cover.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from hierarchy.layers.clustering import cluster as cluster_rows
from hierarchy.layers.clustering import cluster_method
from hierarchy.layers.nodes import (
    LEXICAL,
    Node,
    SummaryRun,
    normalize,
    run_cost,
    summarize_level,
)

if TYPE_CHECKING:  # pragma: no cover
    from engine.floor.llm.base import LLM
    from hierarchy.kb import KnowledgeBase

FORMAT_VERSION = 1  # of meta.json and the files it names
CLUSTER_SIZE = 10  # target chunks (or nodes) per cluster: a 100-word summary can still cover ~10 passages
MAX_TOP = 8  # stop adding levels once a level is this small
NEW_CLUSTER_PERCENTILE = 5.0
DEFAULT_NEW_CLUSTER_COS = 0.3  # used when the build had no cluster of 2+ members to measure


@dataclass
class Layers:
    """A loaded tree. levels[l-1] lists level l's node ids in index order; vectors[l-1] holds
    their embeddings (same order). Treat as read-only: load_layers caches it."""

    nodes: dict[str, Node]
    levels: list[list[str]]
    vectors: list[np.ndarray]
    meta: dict
    _rows: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._rows = {nid: i for ids in self.levels for i, nid in enumerate(ids)}

    @property
    def top(self) -> int:
        """Number of summary levels (0 when the KB was empty)."""
        return len(self.levels)

    def vector(self, node_id: str) -> np.ndarray:
        return self.vectors[self.nodes[node_id].level - 1][self._rows[node_id]]

    def assignment(self) -> dict[str, str]:
        """chunk id -> level-1 node id."""
        return {c: nid for nid in (self.levels[0] if self.levels else []) for c in self.nodes[nid].children}

    def chunks_under(self, node_id: str) -> list[str]:
        n = self.nodes[node_id]
        if n.level == 1:
            return list(n.children)
        return [c for ch in n.children for c in self.chunks_under(ch)]

    def structure(self) -> list[dict[str, list[str]]]:
        """Per level {node id: children}, the tree without its summaries."""
        return [{nid: list(self.nodes[nid].children) for nid in ids} for ids in self.levels]


# ------------------------------------------------------------------------------ clustering


def cluster(vectors: np.ndarray, size: int = CLUSTER_SIZE, seed: int = 0) -> list[list[int]]:
    """Groups of row indices, each sorted, groups ordered by their first row: k = round(m / size)
    of them, by Ward up to WARD_MAX items and by two stages above (hierarchy.layers.clustering).
    A set too small for two clusters, or of at most MAX_TOP items, is one group."""
    return cluster_rows(vectors, size, seed, min_items=MAX_TOP)


def node_id(level: int, i: int) -> str:
    return f"L{level}-{i:06d}"


def canonical(nodes: dict[str, Node], rows: dict[str, int]) -> None:
    """Children in a canonical order (chunk order in the KB, node ids above), parents set."""
    for n in nodes.values():
        if n.level == 1:
            n.children.sort(key=lambda c: rows.get(c, math.inf))
        else:
            n.children.sort()
            for ch in n.children:
                nodes[ch].parent = n.id


def assemble(nodes: dict[str, Node], vecs: dict[str, np.ndarray], meta: dict, dim: int) -> Layers:
    top = max((n.level for n in nodes.values()), default=0)
    levels = [sorted(i for i, n in nodes.items() if n.level == lvl) for lvl in range(1, top + 1)]
    vectors = [
        np.stack([vecs[i] for i in ids]).astype(np.float32) if ids else np.zeros((0, dim), np.float32) for ids in levels
    ]
    for n in nodes.values():
        if n.level == top:
            n.parent = None
    return Layers(nodes=nodes, levels=levels, vectors=vectors, meta=meta)


def layers_from_structure(
    kb: "KnowledgeBase",
    structure: Sequence[dict[str, Sequence[str]]],
    *,
    summarizer: str = "extractive",
    llm: "LLM | None" = None,
    show_progress: bool = False,
    scoring: str = LEXICAL,
    node_vectors: str | None = None,
) -> Layers:
    """Recompute every summary and embedding of a given tree (per level {node id: children}).

    This is what a rebuild over the same assignment gives; incremental updates must equal it."""
    run = SummaryRun(kb, summarizer, llm, show_progress, scoring=scoring, node_vectors=node_vectors)
    nodes = {nid: Node(nid, lvl, list(ch)) for lvl, level in enumerate(structure, 1) for nid, ch in level.items()}
    canonical(nodes, run.rows)
    vecs: dict[str, np.ndarray] = {}
    for lvl, level in enumerate(structure, 1):
        summarize_level(run, nodes, vecs, sorted(level), lvl)
    return assemble(nodes, vecs, {"summarizer": summarizer}, kb.embedder.dim)


# ------------------------------------------------------------------------------ build


def _new_cluster_threshold(kb: "KnowledgeBase", nodes: dict[str, Node], rows: dict[str, int]) -> float:
    """5th percentile of leave-one-out member-to-centroid cosines: a member compared with its
    cluster's centroid without itself is in the position of a newly added chunk (the inclusive
    cosine, inflated by the member's own vector, would send added chunks to new clusters)."""
    sims = []
    for n in nodes.values():
        if n.level == 1 and len(n.children) >= 2:
            v = kb.vectors[[rows[c] for c in n.children]]
            rest = normalize(v.sum(axis=0, keepdims=True) - v)
            sims.append(np.einsum("ij,ij->i", v, rest))
    if not sims:
        return DEFAULT_NEW_CLUSTER_COS
    return float(np.percentile(np.concatenate(sims), NEW_CLUSTER_PERCENTILE))


def build_tree(
    kb: "KnowledgeBase",
    summarizer: str,
    llm: "LLM | None",
    show_progress: bool,
    *,
    cluster_size: int = CLUSTER_SIZE,
    seed: int = 0,
    scoring: str = LEXICAL,
    node_vectors: str | None = None,
) -> Layers:
    """A full build in memory: cluster level by level and summarize every node. The build's
    cost is in meta["build"]."""
    t0 = time.perf_counter()
    run = SummaryRun(kb, summarizer, llm, show_progress, scoring=scoring, node_vectors=node_vectors)
    nodes: dict[str, Node] = {}
    vecs: dict[str, np.ndarray] = {}
    cluster_seconds = 0.0
    # Level 1 groups chunks; each next level groups the level below, until one is small.
    items: list[str] = list(kb.chunk_ids)
    item_vecs = np.asarray(kb.vectors, dtype=np.float32) if len(items) else np.zeros((0, 1), np.float32)
    level = 0
    while items and (level == 0 or len(items) > MAX_TOP):
        level += 1
        tc = time.perf_counter()
        groups = cluster(item_vecs, cluster_size, seed)
        cluster_seconds += time.perf_counter() - tc
        ids = [node_id(level, i) for i in range(len(groups))]
        for nid, g in zip(ids, groups):
            nodes[nid] = Node(nid, level, [items[j] for j in g])
        canonical(nodes, run.rows)
        summarize_level(run, nodes, vecs, ids, level)
        items = ids
        # Ward on unit vectors, where Euclidean distance follows cosine (CHUNK_MEAN vectors are not)
        item_vecs = normalize(np.stack([vecs[i] for i in ids]))
    meta = {
        "version": FORMAT_VERSION,
        "summarizer": summarizer,
        "sentence_scoring": scoring if summarizer == "extractive" else None,
        "node_vectors": run.node_vectors,
        "llm": llm.name if summarizer == "llm" else None,
        "embedder": kb.embedder.id,
        "cluster_method": cluster_method(len(kb.chunk_ids)),
        "cluster_size": cluster_size,
        "max_top": MAX_TOP,
        "summary_words": list(run.words),
        "seed": seed,
        "new_cluster_threshold": _new_cluster_threshold(kb, nodes, run.rows),
        "next_id": {str(lvl): sum(1 for n in nodes.values() if n.level == lvl) for lvl in range(1, level + 1)},
        "since_build": {"added_chunks": 0, "removed_chunks": 0},
        "updates": [],
    }
    layers = assemble(nodes, vecs, meta, kb.embedder.dim)
    meta["build"] = run_cost(
        run,
        t0,
        mode="build",
        chunks=len(kb.chunk_ids),
        nodes_per_level=[len(x) for x in layers.levels],
        cluster_seconds=round(cluster_seconds, 3),
    )
    return layers
