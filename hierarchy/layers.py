"""Summary layers over a knowledge base (RAPTOR-style tree), their persistence and their
incremental update.

Level 0 is the chunks. Level 1 clusters the chunk embeddings; every cluster becomes a node
whose summary is embedded with the KB's embedder; the node embeddings are clustered again,
and so on until a level holds at most MAX_TOP nodes. Every node keeps its children (chunk ids
at level 1, node ids above) and its parent.

Clustering: Ward agglomerative clustering with k = round(m / CLUSTER_SIZE) (k-means above
WARD_MAX items). Measured on the 4,858 HotpotQA dev500 passages (MiniLM, 2 shared cores;
"descent recall" = supporting-passage recall of top-3 clusters by centroid, then top-3 chunks
in them; flat top-3 recall is 0.716):
  ward, k=n/10          4.0 s  sizes median 9, max 35   descent recall 0.593  pair co-clustered 0.31
  k-means, k=n/10      10.2 s  sizes median 9, max 32   descent recall 0.556  pair co-clustered 0.24
  minibatch k-means    40.8 s  median 3, max 105, 144 singletons           0.601
  GMM, PCA-10, k by BIC 71.4 s BIC picks k=10: median 470 passages per cluster (a 100-word
                               summary cannot cover that)                  0.660 (1,464 candidates)
  GMM-diag, PCA-10, k=n/10 2.9 s                                           0.493
Ward is the fastest balanced method and keeps a question's supporting passages together
most often; RAPTOR's GMM+BIC is 18x slower here and yields clusters too large to summarize.

Files under kb.path/"layers"/ (every file written atomically; data files carry the
generation in their name and meta.json, written last, names the live generation, so an
interrupted write leaves the previous generation readable):
  meta.json                   summarizer, parameters, embedder id, build/update costs, files
  nodes.<gen>.json            levels (node ids per level) and nodes {level, parent, children, units, text}
  assignment.<gen>.json       chunk id -> level-1 node id
  level_<l>.<gen>.faiss       IndexFlatIP over level l's node embeddings, rows in level order

Incremental update (`update_after_change`, called by the KB after add/delete): a removed chunk
leaves its cluster (empty nodes are removed, up the tree); an added chunk joins the level-1
cluster whose chunk centroid is nearest by cosine, or starts a new cluster when that cosine
is under `new_cluster_threshold` (the 5th percentile of leave-one-out member-to-centroid
cosines at build time); a new cluster hangs under the nearest level-2 node. Only nodes whose children changed,
and their ancestors, are re-summarized and re-embedded. Because a node's summary depends only
on its children, the result equals `layers_from_structure` over the same tree, which
recomputes every summary (the tests compare the two).
"""
from __future__ import annotations

import math
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np

from engine.errors import KBCorruptError, KBError, LogicRouteError
from engine.io import atomic_write_bytes, atomic_write_json
from engine.types import Usage
from hierarchy.summarize import SUMMARIZERS, Unit, extractive_batch, llm_summary, render_units

if TYPE_CHECKING:  # pragma: no cover
    from engine.llm import LLM
    from hierarchy.kb import KnowledgeBase

LAYERS_DIR = "layers"
FORMAT_VERSION = 1
CLUSTER_SIZE = 10  # target chunks (or nodes) per cluster: a 100-word summary can still cover ~10 passages
MAX_TOP = 8  # stop adding levels once a level is this small
WARD_MAX = 12_000  # ward keeps m*(m-1)/2 distances (~0.6 GB at 12k); k-means beyond
LEVEL1_WORDS = 100  # summary word budgets
UPPER_WORDS = 150
NEW_CLUSTER_PERCENTILE = 5.0
DEFAULT_NEW_CLUSTER_COS = 0.3  # used when the build had no cluster of 2+ members to measure
EXTRACTIVE_BATCH = 64  # clusters per batched sentence encode (progress granularity)
MAX_UPDATES_KEPT = 20
BUILD_HINT = "build them with: logicroute index SOURCE --kb KB --summaries extractive"


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
    """Groups of row indices, each sorted, groups ordered by their first row.

    k = round(m / size) clusters. Ward agglomerative clustering (deterministic; on unit
    vectors Euclidean distance is monotone in cosine) up to WARD_MAX items, whose distance
    matrix it holds in memory; k-means (one init) above that. A set too small for two
    clusters is one group."""
    m = len(vectors)
    if m == 0:
        return []
    k = min(m, max(1, round(m / size)))
    if k <= 1 or m <= MAX_TOP:
        return [list(range(m))]
    x = np.asarray(vectors, dtype=np.float32)
    k = min(k, len(np.unique(x, axis=0)))  # identical vectors cannot be split apart
    if k <= 1:
        return [list(range(m))]
    if m <= WARD_MAX:
        from sklearn.cluster import AgglomerativeClustering

        labels = AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(x)
    else:
        from sklearn.cluster import KMeans

        labels = KMeans(n_clusters=k, n_init=1, random_state=seed).fit_predict(x)
    groups = [np.flatnonzero(labels == c).tolist() for c in range(k)]
    return sorted((g for g in groups if g), key=lambda g: g[0])


def _node_id(level: int, i: int) -> str:
    return f"L{level}-{i:06d}"


def _normalize(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n == 0, 1.0, n)


# ------------------------------------------------------------------------------ summarizing

class _Ctx:
    """What summarizing needs: the KB, the summarizer, the LLM and the running cost."""

    def __init__(self, kb: "KnowledgeBase", summarizer: str, llm: "LLM | None", show_progress: bool,
                 words: tuple[int, int] = (LEVEL1_WORDS, UPPER_WORDS)) -> None:
        if summarizer not in SUMMARIZERS:
            raise LogicRouteError(f"unknown summarizer {summarizer!r}: choose one of {', '.join(SUMMARIZERS)}")
        self.kb = kb
        self.summarizer = summarizer
        self.llm = llm
        self.show_progress = show_progress
        self.words = words
        self.usage = Usage()
        self.trace: dict = {"llm_calls": [], "flags": []}
        self.sentence_cache: dict[str, np.ndarray] = {}
        self.rows = {c: i for i, c in enumerate(kb.chunk_ids)}
        self.embedded = 0
        self.cpu0 = time.process_time()  # CPU seconds say more than wall time on a shared machine

    def encode(self, texts: list[str]) -> np.ndarray:
        self.embedded += len(texts)
        return self.kb.embedder.encode(texts)


def _summarize_level(ctx: _Ctx, nodes: dict[str, Node], vecs: dict[str, np.ndarray], ids: Sequence[str],
                     level: int) -> None:
    """(Re)compute units and embeddings of the given nodes of one level, in place."""
    ids = list(ids)
    if not ids:
        return
    max_words = ctx.words[0] if level == 1 else ctx.words[1]
    kb = ctx.kb

    def passages(n: Node) -> list[tuple[str, str]]:
        if level == 1:
            return [(kb.chunks[c].title, kb.chunks[c].text) for c in n.children]
        return [(u[0], u[1]) for ch in n.children for u in nodes[ch].units]

    def centroid(n: Node) -> np.ndarray:
        if level == 1:
            v = kb.vectors[[ctx.rows[c] for c in n.children]]
        else:
            v = np.stack([vecs[ch] for ch in n.children])
        return _normalize(v.mean(axis=0))

    bar = None
    if ctx.show_progress:
        from tqdm import tqdm

        bar = tqdm(total=len(ids), desc=f"summaries level {level} ({ctx.summarizer})", unit="node")
    try:
        if ctx.summarizer == "extractive":
            for s in range(0, len(ids), EXTRACTIVE_BATCH):
                part = [nodes[i] for i in ids[s:s + EXTRACTIVE_BATCH]]
                jobs = [(passages(n), centroid(n)) for n in part]
                for n, units in zip(part, extractive_batch(jobs, ctx.encode, max_words, ctx.sentence_cache)):
                    n.units = units
                if bar is not None:
                    bar.update(len(part))
        else:
            for i in ids:
                n = nodes[i]
                n.units = llm_summary(passages(n), ctx.llm, max_words, usage=ctx.usage, trace=ctx.trace)
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    texts = [nodes[i].text or nodes[i].id for i in ids]  # an empty summary still needs a vector
    for i, v in zip(ids, ctx.encode(texts)):
        vecs[i] = np.asarray(v, dtype=np.float32)


def _canonical(nodes: dict[str, Node], rows: dict[str, int]) -> None:
    """Children in a canonical order (chunk order in the KB, node ids above), parents set."""
    for n in nodes.values():
        if n.level == 1:
            n.children.sort(key=lambda c: rows.get(c, math.inf))
        else:
            n.children.sort()
            for ch in n.children:
                nodes[ch].parent = n.id


def _assemble(nodes: dict[str, Node], vecs: dict[str, np.ndarray], meta: dict, dim: int) -> Layers:
    top = max((n.level for n in nodes.values()), default=0)
    levels = [sorted(i for i, n in nodes.items() if n.level == l) for l in range(1, top + 1)]
    vectors = [np.stack([vecs[i] for i in ids]).astype(np.float32) if ids else np.zeros((0, dim), np.float32)
               for ids in levels]
    for n in nodes.values():
        if n.level == top:
            n.parent = None
    return Layers(nodes=nodes, levels=levels, vectors=vectors, meta=meta)


def layers_from_structure(kb: "KnowledgeBase", structure: Sequence[dict[str, Sequence[str]]], *,
                          summarizer: str = "extractive", llm: "LLM | None" = None,
                          show_progress: bool = False) -> Layers:
    """Recompute every summary and embedding of a given tree (per level {node id: children}).

    This is what a rebuild over the same assignment gives; incremental updates must equal it."""
    ctx = _Ctx(kb, summarizer, llm, show_progress)
    nodes = {nid: Node(nid, l, list(ch)) for l, level in enumerate(structure, 1) for nid, ch in level.items()}
    _canonical(nodes, ctx.rows)
    vecs: dict[str, np.ndarray] = {}
    for l, level in enumerate(structure, 1):
        _summarize_level(ctx, nodes, vecs, sorted(level), l)
    return _assemble(nodes, vecs, {"summarizer": summarizer}, kb.embedder.dim)


# ------------------------------------------------------------------------------ build

def _new_cluster_threshold(kb: "KnowledgeBase", nodes: dict[str, Node], rows: dict[str, int]) -> float:
    """5th percentile of leave-one-out member-to-centroid cosines: a member compared with its
    cluster's centroid without itself is in the position of a newly added chunk. (The inclusive
    cosine is inflated: on HotpotQA it sent 21% of a random 1% sample to new clusters; the
    leave-one-out percentile sends 0%, while a foreign topic still starts its own cluster.)"""
    sims = []
    for n in nodes.values():
        if n.level == 1 and len(n.children) >= 2:
            v = kb.vectors[[rows[c] for c in n.children]]
            rest = _normalize(v.sum(axis=0, keepdims=True) - v)
            sims.append(np.einsum("ij,ij->i", v, rest))
    if not sims:
        return DEFAULT_NEW_CLUSTER_COS
    return float(np.percentile(np.concatenate(sims), NEW_CLUSTER_PERCENTILE))


def build_layers(kb: "KnowledgeBase", summarizer: str = "extractive", llm: "LLM | None" = None,
                 show_progress: bool = True, *, rebuild: bool = False, cluster_size: int = CLUSTER_SIZE,
                 seed: int = 0) -> dict:
    """Build (or bring up to date) the summary layers of `kb`; returns the cost.

    With layers already present, built with the same summarizer, and rebuild=False, only
    the chunks added or deleted since are applied incrementally. Otherwise a full build."""
    if summarizer not in SUMMARIZERS:
        raise LogicRouteError(f"unknown summarizer {summarizer!r}: choose one of {', '.join(SUMMARIZERS)}")
    if not rebuild:
        old = load_layers(kb)
        if old is not None and old.meta.get("summarizer") == summarizer and old.levels:
            have = set(old.assignment())
            now = set(kb.chunk_ids)
            cost = update_after_change(kb, [c for c in kb.chunk_ids if c not in have], sorted(have - now), llm=llm)
            return cost or {"mode": "unchanged"}
    if summarizer == "llm" and llm is None:
        from engine.llm import make_llm

        llm = make_llm()
    if summarizer == "llm":
        _BUILD_LLMS[_key(kb)] = llm  # later updates in this process summarize with the same LLM
    t0 = time.perf_counter()
    ctx = _Ctx(kb, summarizer, llm, show_progress)
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
        ids = [_node_id(level, i) for i in range(len(groups))]
        for nid, g in zip(ids, groups):
            nodes[nid] = Node(nid, level, [items[j] for j in g])
        _canonical(nodes, ctx.rows)
        _summarize_level(ctx, nodes, vecs, ids, level)
        items = ids
        item_vecs = np.stack([vecs[i] for i in ids])
    meta = {
        "version": FORMAT_VERSION,
        "summarizer": summarizer,
        "llm": getattr(llm, "name", None) if summarizer == "llm" else None,
        "embedder": kb.embedder.id,
        "cluster_method": "ward" if len(kb.chunk_ids) <= WARD_MAX else "kmeans",
        "cluster_size": cluster_size,
        "max_top": MAX_TOP,
        "summary_words": list(ctx.words),
        "seed": seed,
        "new_cluster_threshold": _new_cluster_threshold(kb, nodes, ctx.rows),
        "next_id": {str(l): sum(1 for n in nodes.values() if n.level == l) for l in range(1, level + 1)},
        "since_build": {"added_chunks": 0, "removed_chunks": 0},
        "updates": [],
    }
    layers = _assemble(nodes, vecs, meta, kb.embedder.dim)
    cost = _cost(ctx, t0, mode="build", chunks=len(kb.chunk_ids), nodes_per_level=[len(x) for x in layers.levels],
                 cluster_seconds=round(cluster_seconds, 3))
    meta["build"] = cost
    save_layers(kb, layers)
    return cost


def _cost(ctx: _Ctx, t0: float, **extra: Any) -> dict:
    u = ctx.usage
    return {
        **extra,
        "summarizer": ctx.summarizer,
        "seconds": round(time.perf_counter() - t0, 3),
        "cpu_seconds": round(time.process_time() - ctx.cpu0, 3),
        "llm_calls": u.llm_calls,
        "cached_calls": u.cached_calls,
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.total_tokens,
        "embedded_texts": ctx.embedded,
        "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


# ------------------------------------------------------------------------------ incremental

def update_after_change(kb: "KnowledgeBase", added_ids: Iterable[str], removed_ids: Iterable[str], *,
                        llm: "LLM | None" = None, show_progress: bool = False) -> dict | None:
    """Apply chunk additions/deletions to the saved layers; re-summarize only what changed.

    Returns the cost, or None when the KB has no layers."""
    layers = _read(kb)
    if layers is None:
        return None
    meta = layers.meta
    if not layers.levels:  # built over an empty KB: there is nothing to keep, build properly
        return build_layers(kb, meta.get("summarizer", "extractive"), llm, show_progress, rebuild=True,
                            cluster_size=meta.get("cluster_size", CLUSTER_SIZE), seed=meta.get("seed", 0))
    summarizer = meta["summarizer"]
    t0 = time.perf_counter()
    have = layers.assignment()
    rows = set(kb.chunk_ids)
    added_ids = [c for c in dict.fromkeys(added_ids) if c in rows and c not in have]
    removed_ids = [c for c in dict.fromkeys(removed_ids) if c in have]
    if not added_ids and not removed_ids:
        return {"mode": "unchanged", "seconds": round(time.perf_counter() - t0, 3), "llm_calls": 0, "total_tokens": 0}
    if summarizer == "llm" and llm is None:
        llm = _BUILD_LLMS.get(_key(kb))
        if llm is None:
            from engine.llm import make_llm

            llm = make_llm(meta.get("llm") or "local:qwen2.5-coder-1.5b")
    ctx = _Ctx(kb, summarizer, llm, show_progress, tuple(meta.get("summary_words", (LEVEL1_WORDS, UPPER_WORDS))))
    nodes = layers.nodes
    vecs = {nid: layers.vector(nid) for nid in nodes}
    assign = layers.assignment()
    next_id = {int(k): v for k, v in meta["next_id"].items()}
    dirty: set[str] = set()
    removed = [c for c in dict.fromkeys(removed_ids) if c in assign]
    added = [c for c in dict.fromkeys(added_ids) if c in ctx.rows and c not in assign]

    for c in removed:
        n = nodes[assign.pop(c)]
        n.children.remove(c)
        dirty.add(n.id)

    new_nodes = 0
    if added:
        # Chunk centroids (as sums, so a join is one addition) of the level-1 nodes.
        l1 = [i for i in layers.levels[0] if nodes[i].children]
        sums = {i: kb.vectors[[ctx.rows[c] for c in nodes[i].children]].sum(axis=0) for i in l1}
        thr = float(meta.get("new_cluster_threshold", DEFAULT_NEW_CLUSTER_COS))
        for c in added:
            v = kb.vectors[ctx.rows[c]]
            best, best_sim = None, -math.inf
            if sums:
                keys = list(sums)
                sims = _normalize(np.stack([sums[k] for k in keys])) @ v
                j = int(np.argmax(sims))
                best, best_sim = keys[j], float(sims[j])
            if best is not None and best_sim >= thr:
                nodes[best].children.append(c)
                sums[best] = sums[best] + v
                dirty.add(best)
                continue
            nid = _node_id(1, next_id.get(1, 0))
            next_id[1] = next_id.get(1, 0) + 1
            nodes[nid] = Node(nid, 1, [c])
            sums[nid] = v.copy()
            dirty.add(nid)
            new_nodes += 1
        # New level-1 nodes hang under the level-2 node whose chunks are nearest.
        orphans = [i for i in sums if nodes[i].level == 1 and nodes[i].parent is None and layers.top >= 2]
        if orphans:
            l2 = [i for i in layers.levels[1] if i in nodes]
            l2_sums = np.stack([sum((sums[ch] for ch in nodes[p].children if ch in sums),
                                    np.zeros_like(v)) for p in l2])
            l2_c = _normalize(l2_sums)
            for o in orphans:
                p = l2[int(np.argmax(l2_c @ _normalize(sums[o])))]
                nodes[p].children.append(o)
                nodes[o].parent = p
                dirty.add(p)

    # Empty nodes leave the tree, and their parents change.
    removed_nodes = 0
    for l in range(1, layers.top + 1):
        for nid in [i for i, n in nodes.items() if n.level == l and not n.children]:
            p = nodes[nid].parent
            if p is not None and p in nodes:
                nodes[p].children.remove(nid)
                dirty.add(p)
            del nodes[nid]
            vecs.pop(nid, None)
            dirty.discard(nid)
            removed_nodes += 1
    _canonical(nodes, ctx.rows)

    # Re-summarize bottom-up: a changed node changes its parent's summary too.
    resummarized = 0
    for l in range(1, layers.top + 1):
        ids = sorted(i for i in dirty if i in nodes and nodes[i].level == l)
        _summarize_level(ctx, nodes, vecs, ids, l)
        resummarized += len(ids)
        dirty.update(nodes[i].parent for i in ids if nodes[i].parent)

    meta["next_id"] = {str(k): v for k, v in sorted(next_id.items())}
    sb = meta.setdefault("since_build", {"added_chunks": 0, "removed_chunks": 0})
    sb["added_chunks"] += len(added)
    sb["removed_chunks"] += len(removed)
    new = _assemble(nodes, vecs, meta, kb.embedder.dim)
    cost = _cost(ctx, t0, mode="incremental", added_chunks=len(added), removed_chunks=len(removed),
                 new_clusters=new_nodes, removed_nodes=removed_nodes, resummarized_nodes=resummarized,
                 nodes_per_level=[len(x) for x in new.levels])
    meta["updates"] = (meta.get("updates") or [])[-(MAX_UPDATES_KEPT - 1):] + [cost]
    save_layers(kb, new)
    return cost


# ------------------------------------------------------------------------------ persistence

_CACHE: dict[str, tuple[str, Layers]] = {}
_CACHE_LOCK = threading.Lock()
_BUILD_LLMS: dict[str, Any] = {}  # KB folder -> the LLM its llm-summaries were built with


def _key(kb: "KnowledgeBase") -> str:
    return str(layers_dir(kb).resolve())


def layers_dir(kb: "KnowledgeBase") -> Any:
    return kb.path / LAYERS_DIR


def save_layers(kb: "KnowledgeBase", layers: Layers) -> None:
    """Write a new generation of files, then meta.json naming it, then drop older files."""
    import faiss

    d = layers_dir(kb)
    d.mkdir(parents=True, exist_ok=True)
    gen = uuid.uuid4().hex[:12]
    files: dict[str, Any] = {"nodes": f"nodes.{gen}.json", "assignment": f"assignment.{gen}.json", "levels": []}
    for l, mat in enumerate(layers.vectors, 1):
        index = faiss.IndexFlatIP(kb.embedder.dim)
        if len(mat):
            index.add(np.ascontiguousarray(mat, dtype=np.float32))
        name = f"level_{l}.{gen}.faiss"
        atomic_write_bytes(d / name, faiss.serialize_index(index).tobytes())
        files["levels"].append(name)
    atomic_write_json(d / files["nodes"], {
        "generation": gen,
        "levels": layers.levels,
        "nodes": {nid: {"level": n.level, "parent": n.parent, "children": n.children, "units": n.units,
                        "text": n.text} for nid, n in layers.nodes.items()},
    }, indent=None)
    atomic_write_json(d / files["assignment"], {"generation": gen, "chunks": layers.assignment()}, indent=None)
    meta = layers.meta
    meta.update(generation=gen, files=files, levels=len(layers.levels),
                nodes_per_level=[len(x) for x in layers.levels], chunks=sum(len(layers.nodes[i].children)
                                                                            for i in (layers.levels[0] if layers.levels else [])))
    atomic_write_json(d / "meta.json", meta)  # the commit point
    keep = {"meta.json", files["nodes"], files["assignment"], *files["levels"]}
    for f in d.iterdir():
        if f.is_file() and f.name not in keep and not f.name.startswith("."):
            try:
                f.unlink()
            except OSError:
                pass
    _write_manifest(kb, meta)
    with _CACHE_LOCK:
        _CACHE[_key(kb)] = (gen, layers)


def _write_manifest(kb: "KnowledgeBase", meta: dict) -> None:
    summary = {
        "summarizer": meta["summarizer"],
        "llm": meta.get("llm"),
        "levels": meta["levels"],
        "nodes_per_level": meta["nodes_per_level"],
        "build": meta.get("build"),
        "last_update": (meta.get("updates") or [None])[-1],
        "since_build": meta.get("since_build"),
    }
    kb.manifest["summaries"] = summary
    save = getattr(kb, "save_manifest", None)
    if callable(save):
        save()
    else:
        atomic_write_json(kb.path / "manifest.json", kb.manifest)


def _read(kb: "KnowledgeBase") -> Layers | None:
    """Load from disk (no cache). Retries once if a writer swapped generations mid-read."""
    d = layers_dir(kb)
    for attempt in range(2):
        try:
            return _read_once(kb, d)
        except FileNotFoundError:
            if attempt:
                raise KBCorruptError(f"{d}: summary layer files are missing; rebuild them "
                                     f"(logicroute index ... --summaries extractive)") from None
    return None


def _read_once(kb: "KnowledgeBase", d: Any) -> Layers | None:
    import json

    import faiss

    meta_path = d / "meta.json"
    if not meta_path.is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        files = meta["files"]
        nj = json.loads((d / files["nodes"]).read_text(encoding="utf-8"))
        vectors = []
        for name in files["levels"]:
            index = faiss.deserialize_index(np.frombuffer(bytearray((d / name).read_bytes()), dtype=np.uint8))
            vectors.append(index.reconstruct_n(0, index.ntotal) if index.ntotal else
                           np.zeros((0, index.d), np.float32))
    except FileNotFoundError:
        raise
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        raise KBCorruptError(f"{d}: unreadable summary layers ({type(e).__name__}: {e}); rebuild them "
                             f"with --rebuild") from None
    if nj.get("generation") != meta.get("generation") or len(vectors) != len(nj["levels"]) or any(
            len(v) != len(ids) for v, ids in zip(vectors, nj["levels"])):
        raise KBCorruptError(f"{d}: summary layer files disagree with meta.json; rebuild them with --rebuild")
    emb = getattr(kb.embedder, "id", None)
    if meta.get("embedder") and emb and meta["embedder"] != emb:
        raise KBError(f"{d}: summary layers were embedded with {meta['embedder']}, the KB now uses {emb}; "
                      f"rebuild them with --rebuild")
    nodes = {nid: Node(nid, int(n["level"]), list(n["children"]), n.get("parent"), [list(u) for u in n["units"]])
             for nid, n in nj["nodes"].items()}
    return Layers(nodes=nodes, levels=[list(x) for x in nj["levels"]],
                  vectors=[np.asarray(v, dtype=np.float32) for v in vectors], meta=meta)


def load_layers(kb: "KnowledgeBase") -> Layers | None:
    """The KB's summary layers, or None when they were never built. Cached per KB folder and
    generation; the returned object is shared, do not modify it."""
    import json

    d = layers_dir(kb)
    meta_path = d / "meta.json"
    if not meta_path.is_file():
        return None
    key = _key(kb)
    try:
        gen = json.loads(meta_path.read_text(encoding="utf-8")).get("generation")
    except ValueError:
        raise KBCorruptError(f"{meta_path}: not valid JSON; rebuild the layers with --rebuild") from None
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
    if hit is not None and hit[0] == gen:
        return hit[1]
    layers = _read(kb)
    if layers is not None:
        with _CACHE_LOCK:
            _CACHE[key] = (layers.meta.get("generation"), layers)
    return layers


def require_layers(kb: "KnowledgeBase") -> Layers:
    """load_layers, or a KBError that says how to build them."""
    layers = load_layers(kb)
    if layers is None:
        raise KBError(f"the knowledge base at {kb.path} has no summary layers; {BUILD_HINT}")
    return layers
