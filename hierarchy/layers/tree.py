"""The summary tree over a knowledge base (RAPTOR-style) and its full build.

Level 0 is the chunks. Level 1 clusters the chunk embeddings; every cluster becomes a node
whose summary is embedded with the KB's embedder; the node embeddings are clustered again,
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
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.base.errors import LogicRouteError
from engine.base.progress import progress_bar
from engine.base.trace import Trace
from engine.base.types import Usage
from hierarchy.layers.clustering import cluster as cluster_rows
from hierarchy.layers.clustering import cluster_method
from hierarchy.summarize import SUMMARIZERS, Unit, extractive_batch, llm_summary, render_units

if TYPE_CHECKING:  # pragma: no cover
    from engine.llm.base import LLM
    from hierarchy.kb import KnowledgeBase

FORMAT_VERSION = 1  # of meta.json and the files it names
CLUSTER_SIZE = 10  # target chunks (or nodes) per cluster: a 100-word summary can still cover ~10 passages
MAX_TOP = 8  # stop adding levels once a level is this small
LEVEL1_WORDS = 100  # summary word budgets
UPPER_WORDS = 150
NEW_CLUSTER_PERCENTILE = 5.0
DEFAULT_NEW_CLUSTER_COS = 0.3  # used when the build had no cluster of 2+ members to measure
EXTRACTIVE_BATCH = 64  # clusters per batched sentence encode, at most
# Past CENTRAL_ABOVE chunks an extractive level-1 summary picks its sentences from the
# CENTRAL_CHUNKS of its chunks nearest the node's centroid: it embeds every sentence it may pick,
# which is what makes a large build slow. Below it every chunk is read (the cap costs a little
# answer coverage); the same threshold as the stores' exact search.
CENTRAL_CHUNKS = 4
CENTRAL_ABOVE = 20_000
PROGRESS_STEPS = 20  # batches per level, at least, when a level has that many clusters


@dataclass
class Node:
    id: str
    level: int
    children: list[str]
    parent: str | None = None
    units: list[Unit] = field(default_factory=list)

    @property
    def text(self) -> str:
        return render_units(self.units)


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


def normalize(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n == 0, 1.0, n)


# ------------------------------------------------------------------------------ summarizing


class SummaryRun:
    """What summarizing needs: the KB, the summarizer, the LLM and the running cost."""

    def __init__(
        self,
        kb: "KnowledgeBase",
        summarizer: str,
        llm: "LLM | None",
        show_progress: bool,
        words: tuple[int, int] = (LEVEL1_WORDS, UPPER_WORDS),
    ) -> None:
        if summarizer not in SUMMARIZERS:
            raise LogicRouteError(f"unknown summarizer {summarizer!r}: choose one of {', '.join(SUMMARIZERS)}")
        self.kb = kb
        self.summarizer = summarizer
        self.llm = llm
        self.show_progress = show_progress
        self.words = words
        self.usage = Usage()
        self.trace = Trace()  # call_llm books the summaries' calls here
        self.sentence_cache: dict[str, np.ndarray] = {}
        self.rows = {c: i for i, c in enumerate(kb.chunk_ids)}
        self.embedded = 0
        self.cpu0 = time.process_time()  # CPU seconds say more than wall time on a shared machine

    def encode(self, texts: list[str]) -> np.ndarray:
        self.embedded += len(texts)
        return self.kb.embedder.encode(texts)


def summarize_level(
    run: SummaryRun, nodes: dict[str, Node], vecs: dict[str, np.ndarray], ids: Sequence[str], level: int
) -> None:
    """(Re)compute units and embeddings of the given nodes of one level, in place."""
    ids = list(ids)
    if not ids:
        return
    max_words = run.words[0] if level == 1 else run.words[1]
    kb = run.kb

    def passages(n: Node, central: int = 0, center: np.ndarray | None = None) -> list[tuple[str, str]]:
        """The node's text: its chunks (level 1; with `central`, only that many nearest its
        centroid `center`, in their order) or its children's summary sentences."""
        if level == 1:
            kids = list(n.children)
            if central and len(kids) > central:
                v = kb.vectors[[run.rows[c] for c in kids]]
                nearest = np.argsort(-(v @ center), kind="stable")[:central]
                kids = [kids[i] for i in sorted(nearest)]
            return [(kb.chunks[c].title, kb.chunks[c].text) for c in kids]
        return [(u[0], u[1]) for ch in n.children for u in nodes[ch].units]

    def centroid(n: Node) -> np.ndarray:
        if level == 1:
            v = kb.vectors[[run.rows[c] for c in n.children]]
        else:
            v = np.stack([vecs[ch] for ch in n.children])
        return normalize(v.mean(axis=0))

    bar = progress_bar(len(ids), f"summaries level {level} ({run.summarizer})", "node", run.show_progress)
    try:
        if run.summarizer == "extractive":
            # about PROGRESS_STEPS batches per level, so the bar moves on a small KB too
            step = max(1, min(EXTRACTIVE_BATCH, -(-len(ids) // PROGRESS_STEPS)))
            for s in range(0, len(ids), step):
                part = [nodes[i] for i in ids[s : s + step]]
                central = CENTRAL_CHUNKS if len(kb) > CENTRAL_ABOVE else 0
                centers = [centroid(n) for n in part]
                jobs = [(passages(n, central, c), c) for n, c in zip(part, centers)]
                for n, units in zip(part, extractive_batch(jobs, run.encode, max_words, run.sentence_cache)):
                    n.units = units
                bar.update(len(part))
        else:
            for i in ids:
                n = nodes[i]
                n.units = llm_summary(passages(n), run.llm, max_words, usage=run.usage, trace=run.trace)
                bar.update(1)
    finally:
        bar.close()
    texts = [nodes[i].text or nodes[i].id for i in ids]  # an empty summary still needs a vector
    for i, v in zip(ids, run.encode(texts)):
        vecs[i] = np.asarray(v, dtype=np.float32)


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
) -> Layers:
    """Recompute every summary and embedding of a given tree (per level {node id: children}).

    This is what a rebuild over the same assignment gives; incremental updates must equal it."""
    run = SummaryRun(kb, summarizer, llm, show_progress)
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
) -> Layers:
    """A full build in memory: cluster level by level and summarize every node. The build's
    cost is in meta["build"]."""
    t0 = time.perf_counter()
    run = SummaryRun(kb, summarizer, llm, show_progress)
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
        item_vecs = np.stack([vecs[i] for i in ids])
    meta = {
        "version": FORMAT_VERSION,
        "summarizer": summarizer,
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


def run_cost(run: SummaryRun, t0: float, **extra: Any) -> dict:
    """The cost of a build or an update so far, with `extra` entries first."""
    u = run.usage
    return {
        **extra,
        "summarizer": run.summarizer,
        "seconds": round(time.perf_counter() - t0, 3),
        "cpu_seconds": round(time.process_time() - run.cpu0, 3),
        "llm_calls": u.llm_calls,
        "cached_calls": u.cached_calls,
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.total_tokens,
        "embedded_texts": run.embedded,
        "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
