"""Building the summary layers of a KB, and keeping them in step with its chunks.

Incremental update (`sync_layers`, called by hierarchy.indexing in the write transaction that
added or deleted documents): the chunks the layers
cover are compared with the KB's, so an update that died is caught up by the next one. A
removed chunk leaves its cluster (empty nodes are removed, up the tree);
an added chunk joins the level-1 cluster whose chunk centroid is nearest by cosine, or starts a
new cluster when that cosine is under `new_cluster_threshold` (the 5th percentile of
leave-one-out member-to-centroid cosines at build time); a new cluster hangs under the nearest
level-2 node. Only nodes whose children changed, and their ancestors, are re-summarized and
re-embedded. Because a node's summary depends only on its children, the result equals
`layers_from_structure` over the same tree, which recomputes every summary (the tests compare
the two).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.floor.base.errors import LogicRouteError
from hierarchy.layers.nodes import (
    LEVEL1_WORDS,
    LEXICAL,
    UPPER_WORDS,
    Node,
    SummaryRun,
    default_node_vectors,
    node_vectors_of,
    normalize,
    run_cost,
    scoring_of,
    summarize_level,
)
from hierarchy.layers.persist import (
    annotate_summary,
    covers,
    layers_dir,
    layers_key,
    load_layers,
    read_layers,
    read_meta,
    save_layers,
)
from hierarchy.layers.tree import (
    CLUSTER_SIZE,
    DEFAULT_NEW_CLUSTER_COS,
    Layers,
    assemble,
    build_tree,
    canonical,
    node_id,
)
from hierarchy.summarize import SUMMARIZERS

if TYPE_CHECKING:  # pragma: no cover
    from engine.floor.llm.base import LLM
    from hierarchy.kb import KnowledgeBase

MAX_UPDATES_KEPT = 20
_BUILD_LLMS: dict[str, Any] = {}  # layers folder -> the LLM its llm-summaries were built with


def build_layers(
    kb: "KnowledgeBase",
    summarizer: str = "extractive",
    llm: "LLM | None" = None,
    show_progress: bool = True,
    *,
    rebuild: bool = False,
    cluster_size: int = CLUSTER_SIZE,
    seed: int = 0,
    scoring: str = LEXICAL,
    node_vectors: str | None = None,
) -> dict:
    """Build (or bring up to date) the summary layers of `kb`; returns the cost.

    With layers already present, built with the same summarizer (and, for extractive ones, the
    same sentence scoring and node vectors: hierarchy.layers.tree), and rebuild=False, only the chunks
    added or deleted since are applied incrementally. Otherwise a full build."""
    if summarizer not in SUMMARIZERS:
        raise LogicRouteError(f"unknown summarizer {summarizer!r}: choose one of {', '.join(SUMMARIZERS)}")
    if not rebuild:
        old = load_layers(kb)
        same = old is not None and old.meta.get("summarizer") == summarizer
        kind = (scoring_of(old.meta), node_vectors_of(old.meta)) if same else None
        want = (scoring if summarizer == "extractive" else None, node_vectors or default_node_vectors(summarizer))
        if same and old.levels and kind == want:
            return sync_layers(kb, llm=llm) or {"mode": "unchanged"}
    if summarizer == "llm" and llm is None:
        from engine.floor.llm.factory import make_llm

        llm = make_llm()
    if summarizer == "llm":
        _BUILD_LLMS[layers_key(kb)] = llm  # later updates in this process summarize with the same LLM
    how = {"scoring": scoring, "node_vectors": node_vectors}
    layers = build_tree(kb, summarizer, llm, show_progress, cluster_size=cluster_size, seed=seed, **how)
    save_layers(kb, layers)
    return layers.meta["build"]


def sync_layers(kb: "KnowledgeBase", *, llm: "LLM | None" = None, show_progress: bool = False) -> dict | None:
    """Bring the saved layers up to date with the KB's chunks: the chunks they do not cover join,
    the chunks no longer in the KB leave (whatever change put them out of step, also one that
    died half-way). Returns the update's cost, or None when there are no layers or nothing to do."""
    meta = read_meta(layers_dir(kb))
    if meta is None:
        return None
    cost = None
    if meta.get("covers") != covers(kb.chunk_ids):  # cheap test first: the tree is read only when they differ
        layers = read_layers(kb)
        if layers is None:  # pragma: no cover - removed between the two reads
            return None
        have = layers.assignment()
        now = set(kb.chunk_ids)
        added = [c for c in kb.chunk_ids if c not in have]
        cost = _apply(kb, layers, added, sorted(set(have) - now), llm, show_progress)
        meta = read_meta(layers_dir(kb)) or {}  # what was saved (a rebuild saves other layers)
    if meta and (kb.manifest.get("summaries") or {}).get("generation") != meta.get("generation"):
        annotate_summary(kb, meta)  # the manifest entry of a save that died before recording it
    return cost if cost is None or cost.get("mode") != "unchanged" else None


def _apply(
    kb: "KnowledgeBase",
    layers: Layers,
    added_ids: Iterable[str],
    removed_ids: Iterable[str],
    llm: "LLM | None",
    show_progress: bool,
) -> dict:
    """Apply chunk additions/deletions to the saved layers; re-summarize only what changed."""
    meta = layers.meta
    base_generation = meta.get("generation")
    if not layers.levels:  # built over an empty KB: there is nothing to keep, build properly
        return build_layers(
            kb,
            meta.get("summarizer", "extractive"),
            llm,
            show_progress,
            rebuild=True,
            cluster_size=meta.get("cluster_size", CLUSTER_SIZE),
            seed=meta.get("seed", 0),
            scoring=scoring_of(meta) or LEXICAL,
            node_vectors=node_vectors_of(meta),
        )
    t0 = time.perf_counter()
    have = layers.assignment()
    rows = set(kb.chunk_ids)
    added_ids = [c for c in dict.fromkeys(added_ids) if c in rows and c not in have]
    removed_ids = [c for c in dict.fromkeys(removed_ids) if c in have]
    if not added_ids and not removed_ids:
        return {"mode": "unchanged", "seconds": round(time.perf_counter() - t0, 3), "llm_calls": 0, "total_tokens": 0}
    run = SummaryRun(
        kb,
        meta["summarizer"],
        _update_llm(kb, meta, llm),
        show_progress,
        tuple(meta.get("summary_words", (LEVEL1_WORDS, UPPER_WORDS))),
        scoring=scoring_of(meta) or LEXICAL,
        node_vectors=node_vectors_of(meta),
    )
    change = _Change(layers, run, {int(k): v for k, v in meta["next_id"].items()})
    change.remove_chunks(removed_ids)
    change.add_chunks(added_ids, float(meta.get("new_cluster_threshold", DEFAULT_NEW_CLUSTER_COS)))
    removed_nodes = change.drop_empty_nodes()
    canonical(change.nodes, run.rows)
    resummarized = change.resummarize()

    meta["next_id"] = {str(k): v for k, v in sorted(change.next_id.items())}
    sb = meta.setdefault("since_build", {"added_chunks": 0, "removed_chunks": 0})
    sb["added_chunks"] += len(change.added)
    sb["removed_chunks"] += len(change.removed)
    new = assemble(change.nodes, change.vecs, meta, kb.embedder.dim)
    cost = run_cost(
        run,
        t0,
        mode="incremental",
        added_chunks=len(change.added),
        removed_chunks=len(change.removed),
        new_clusters=change.new_nodes,
        removed_nodes=removed_nodes,
        resummarized_nodes=resummarized,
        nodes_per_level=[len(x) for x in new.levels],
    )
    meta["updates"] = (meta.get("updates") or [])[-(MAX_UPDATES_KEPT - 1) :] + [cost]
    save_layers(kb, new, base_generation=base_generation)
    return cost


def _update_llm(kb: "KnowledgeBase", meta: dict, llm: "LLM | None") -> "LLM | None":
    """The LLM that summarizes an update of llm-summaries: the given one, else the one they were
    built with in this process, else the one meta.json names."""
    if meta["summarizer"] != "llm" or llm is not None:
        return llm
    llm = _BUILD_LLMS.get(layers_key(kb))
    if llm is None:
        from engine.floor.llm.base import DEFAULT_LLM
        from engine.floor.llm.factory import make_llm

        llm = make_llm(meta.get("llm") or DEFAULT_LLM)
    return llm


@dataclass
class _Change:
    """One incremental update of a tree read from disk (its nodes are changed in place)."""

    layers: Layers
    run: SummaryRun
    next_id: dict[int, int]
    nodes: dict[str, Node] = field(init=False)
    vecs: dict[str, np.ndarray] = field(init=False)
    assign: dict[str, str] = field(init=False)
    dirty: set[str] = field(default_factory=set)  # nodes whose summary must be recomputed
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    new_nodes: int = 0

    def __post_init__(self) -> None:
        self.nodes = self.layers.nodes
        self.vecs = {nid: self.layers.vector(nid) for nid in self.nodes}
        self.assign = self.layers.assignment()

    def remove_chunks(self, removed_ids: list[str]) -> None:
        self.removed = [c for c in dict.fromkeys(removed_ids) if c in self.assign]
        for c in self.removed:
            n = self.nodes[self.assign.pop(c)]
            n.children.remove(c)
            self.dirty.add(n.id)

    def add_chunks(self, added_ids: list[str], thr: float) -> None:
        """Each chunk joins the nearest level-1 cluster, or starts one when none is near enough."""
        rows, nodes, kb = self.run.rows, self.nodes, self.run.kb
        self.added = [c for c in dict.fromkeys(added_ids) if c in rows and c not in self.assign]
        if not self.added:
            return
        # Chunk centroids (as sums, so a join is one addition) of the level-1 nodes.
        l1 = [i for i in self.layers.levels[0] if nodes[i].children]
        sums = {i: kb.vectors[[rows[c] for c in nodes[i].children]].sum(axis=0) for i in l1}
        for c in self.added:
            v = kb.vectors[rows[c]]
            best, best_sim = None, -math.inf
            if sums:
                keys = list(sums)
                sims = normalize(np.stack([sums[k] for k in keys])) @ v
                j = int(np.argmax(sims))
                best, best_sim = keys[j], float(sims[j])
            if best is not None and best_sim >= thr:
                nodes[best].children.append(c)
                sums[best] = sums[best] + v
                self.dirty.add(best)
                continue
            nid = node_id(1, self.next_id.get(1, 0))
            self.next_id[1] = self.next_id.get(1, 0) + 1
            nodes[nid] = Node(nid, 1, [c])
            sums[nid] = v.copy()
            self.dirty.add(nid)
            self.new_nodes += 1
        self._hang_new_clusters(sums, np.zeros_like(v))

    def _hang_new_clusters(self, sums: dict[str, np.ndarray], zero: np.ndarray) -> None:
        """New level-1 nodes hang under the level-2 node whose chunks are nearest."""
        nodes = self.nodes
        orphans = [i for i in sums if nodes[i].level == 1 and nodes[i].parent is None and self.layers.top >= 2]
        if not orphans:
            return
        l2 = [i for i in self.layers.levels[1] if i in nodes]
        l2_sums = np.stack([sum((sums[ch] for ch in nodes[p].children if ch in sums), zero) for p in l2])
        l2_c = normalize(l2_sums)
        for o in orphans:
            p = l2[int(np.argmax(l2_c @ normalize(sums[o])))]
            nodes[p].children.append(o)
            nodes[o].parent = p
            self.dirty.add(p)

    def drop_empty_nodes(self) -> int:
        """Empty nodes leave the tree, and their parents change. Returns how many left."""
        removed_nodes = 0
        for lvl in range(1, self.layers.top + 1):
            for nid in [i for i, n in self.nodes.items() if n.level == lvl and not n.children]:
                p = self.nodes[nid].parent
                if p is not None and p in self.nodes:
                    self.nodes[p].children.remove(nid)
                    self.dirty.add(p)
                del self.nodes[nid]
                self.vecs.pop(nid, None)
                self.dirty.discard(nid)
                removed_nodes += 1
        return removed_nodes

    def resummarize(self) -> int:
        """Re-summarize bottom-up: a changed node changes its parent's summary too. Returns the
        number of nodes re-summarized."""
        resummarized = 0
        for lvl in range(1, self.layers.top + 1):
            ids = sorted(i for i in self.dirty if i in self.nodes and self.nodes[i].level == lvl)
            summarize_level(self.run, self.nodes, self.vecs, ids, lvl)
            resummarized += len(ids)
            self.dirty.update(self.nodes[i].parent for i in ids if self.nodes[i].parent)
        return resummarized
