"""What training/scale/bench_clustering.py measures with: the corpus, the tree each clustering method
builds (in a child process, for its time and peak memory) and descent recall.

Corpus of size n: the chunks of HotpotQA's and 2Wiki's passages, question by question (the two
sets interleaved), chunked as the KB chunks them; past those, real MiniLM vectors of other texts
from the embedding cache (distractors: no chunk or question of the two sets); past the cache,
its distractors again with Gaussian noise (training.scale.bench_store.grow). A question counts at size
n when all its passages' chunks are in the corpus.

Tree: what build_tree does, with centroids for summaries: level 1 clusters the chunk vectors, a
node's vector is the normalized mean of the chunk vectors under it, the next level clusters the
node vectors, until a level holds at most MAX_TOP nodes. Each method clusters every level.

Descent: the summary route's own descent (engine.core.routes.summary.summary_context, k = 3) over
those centroid nodes: from the top level down, and from level 1 (the top 3 of all level-1
nodes, then the top 3 chunks under them). A supporting passage is found when one of its chunks
is among the chunks the descent returns."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.floor.base.stats import percentile

QA_SETS = ("hotpotqa", "2wiki")  # the shared sets whose questions name supporting passages
METHODS = ("ward", "minibatch", "faiss", "two-stage", "code")
CODE = "code"  # what hierarchy.layers.clustering.cluster_labels does at each level's size
DESCENT_K = 3  # the summary route's default k


@dataclass
class QACorpus:
    """Chunks of the QA sets' passages (rows in question order) and the questions over them."""

    vectors: np.ndarray
    questions: list[str]
    qvecs: np.ndarray
    support: list[list[list[int]]]  # per question, per supporting passage: its chunk rows
    last_row: list[int]  # per question: the last chunk row of its passages


def qa_corpus(embed: Callable[[list[str]], np.ndarray], n_per_set: int | None = None) -> QACorpus:
    """Load the QA sets (n_per_set questions each), chunk their passages as the KB does."""
    from hierarchy.chunking import chunk_document, chunk_embed_text
    from hierarchy.datasets import load_dataset
    from hierarchy.documents import Document
    from training.common.shared_data import SHARED_FILES, shared_data_dir

    sets = [load_dataset(shared_data_dir() / SHARED_FILES[name], n=n_per_set) for name in QA_SETS]
    passages = {p.id: p for ds in sets for p in ds.passages}
    order = [q for group in zip(*(ds.questions for ds in sets)) for q in group]  # interleaved
    rows: dict[str, int] = {}  # chunk id -> row (identical chunks are one chunk, as in the KB)
    texts: list[str] = []
    passage_rows: dict[str, list[int]] = {}
    questions, support, last = [], [], []
    for q in order:
        for pid in q.passages:
            if pid in passage_rows:
                continue
            p = passages[pid]
            mine = []
            for c in chunk_document(Document(p.id, p.title, p.text)):
                if c.id not in rows:
                    rows[c.id] = len(texts)
                    texts.append(chunk_embed_text(c))
                mine.append(rows[c.id])
            passage_rows[pid] = mine
        questions.append(q.text)
        support.append([passage_rows[s] for s in q.supporting if s in passage_rows])
        last.append(max(r for pid in q.passages for r in passage_rows[pid]))
    vectors = np.asarray(embed(texts), dtype=np.float32)
    qvecs = np.asarray(embed(questions), dtype=np.float32)
    return QACorpus(vectors, questions, qvecs, support, last)


def text_keys(texts: Sequence[str]) -> set[bytes]:
    """The embedding cache's keys of these texts."""
    from engine.floor.base.files import content_hash

    return {bytes.fromhex(content_hash(t)) for t in texts}


def distractors(keys: list[bytes], vectors: np.ndarray, exclude: set[bytes], seed: int = 0) -> np.ndarray:
    """The cached vectors whose keys are not excluded, in a seeded order of their keys."""
    keep = sorted((k, i) for i, k in enumerate(keys) if k not in exclude)
    rng = np.random.default_rng(seed)
    idx = [keep[j][1] for j in rng.permutation(len(keep))]
    return np.ascontiguousarray(vectors[idx], dtype=np.float32)


def corpus(qa: QACorpus, pool: np.ndarray, n: int, seed: int = 0) -> tuple[np.ndarray, list[int], dict]:
    """(vectors of n rows, indices of the questions it holds, what the rows are)."""
    from training.scale.bench_store import grow

    real_qa = min(n, len(qa.vectors))
    rest = n - real_qa
    parts = [qa.vectors[:real_qa]]
    if rest:
        parts.append(grow(pool, rest, seed))
    held = [i for i, r in enumerate(qa.last_row) if r < n and qa.support[i]]
    what = {"qa_chunks": real_qa, "cached_distractors": min(rest, len(pool)), "noisy": max(0, rest - len(pool))}
    return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32), held, what


# ------------------------------------------------------------------------------ methods


def labeler(method: str) -> Callable[[np.ndarray, int, int], np.ndarray]:
    """labels(x, k, seed) of a method of METHODS."""
    from hierarchy.layers import clustering

    if method == "ward":
        return lambda x, k, seed: clustering.ward_labels(x, k)
    if method == "two-stage":
        return clustering.two_stage_labels
    if method == "faiss":
        # min 1 point a centroid: k = m/10 is under faiss' 39, which only warns
        return lambda x, k, seed: clustering.kmeans_labels(x, k, seed, min_points_per_centroid=1)
    if method == "minibatch":
        return _minibatch
    if method == CODE:
        return clustering.cluster_labels
    raise ValueError(f"unknown clustering method {method!r}: choose from {', '.join(METHODS)}")


def _minibatch(x: np.ndarray, k: int, seed: int) -> np.ndarray:
    from sklearn.cluster import MiniBatchKMeans

    # batch 4096: sklearn's advice for 2+ cores is >= 256 * cores; k-means++ on a 3k-row sample
    return MiniBatchKMeans(n_clusters=k, random_state=seed, n_init=1, batch_size=4096).fit_predict(x)


def centroid_tree(x: np.ndarray, method: str, size: int, seed: int = 0, on_level1: Callable | None = None) -> dict:
    """Cluster level by level as build_tree does, centroids for summaries. Returns the groups
    per level (indices into the level below) and the seconds (wall, CPU) of level 1 and all.
    `on_level1()` is called as soon as level 1 is clustered."""
    from hierarchy.layers.clustering import cluster
    from hierarchy.layers.tree import MAX_TOP, normalize

    lab = labeler(method)
    levels: list[list[list[int]]] = []
    items, sums = x, x  # sums: of the chunk vectors under each item
    t0, c0 = time.perf_counter(), time.process_time()
    level1 = (0.0, 0.0)
    while not levels or len(items) > MAX_TOP:
        groups = cluster(items, size, seed, min_items=MAX_TOP, labeler=lab)
        if not levels:
            level1 = (time.perf_counter() - t0, time.process_time() - c0)
            if on_level1 is not None:
                on_level1()
        levels.append(groups)
        sums = np.stack([sums[g].sum(axis=0, dtype=np.float64) for g in groups])
        items = normalize(sums).astype(np.float32)
        if len(groups) == 1:
            break
    return {
        "levels": levels,
        "level1_s": level1[0],
        "level1_cpu_s": level1[1],
        "tree_s": time.perf_counter() - t0,
    }


def tree_in_child(path: str, method: str, size: int, seed: int) -> dict:
    """centroid_tree on the matrix saved at `path`, with the peak memory (MB) its level-1
    clustering added: run in a fresh process, so nothing of other runs is counted. Every method
    runs on one thread (OpenMP threads spin on cores shared with other jobs)."""
    from threadpoolctl import threadpool_limits

    from hierarchy.layers.clustering import kmeans_labels, ward_labels

    x = np.load(path)
    sample = np.ascontiguousarray(x[:200])
    k = max(2, min(20, len(sample) // 3))
    with threadpool_limits(1):
        # The libraries' first calls (imports; ~5 s for Ward) are not the method's time or memory.
        ward_labels(sample, k)
        kmeans_labels(sample, 2, seed)
        labeler(method)(sample, k, seed)
        fresh = _reset_peak()
        before = _status_kb("VmRSS")
        peak: list[int] = []
        out = centroid_tree(x, method, size, seed, lambda: peak.append(_status_kb("VmHWM") if fresh else _maxrss_kb()))
    out["peak_mb"] = round(max(0, peak[0] - before) / 1024, 1)
    out["peak_exact"] = fresh
    return out


def _reset_peak() -> bool:
    """Reset the process's peak resident size (Linux clear_refs 5); False where refused."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _maxrss_kb() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


# ------------------------------------------------------------------------------ scores


def balance(groups: list[list[int]]) -> dict:
    sizes = sorted(len(g) for g in groups)
    return {
        "clusters": len(sizes),
        "median": percentile(sizes, 0.5),
        "p99": round(percentile(sizes, 0.99), 1),
        "max": sizes[-1],
        "singletons": sum(1 for s in sizes if s == 1),
    }


def centroid_layers(x: np.ndarray, levels: list[list[list[int]]]):
    """The tree as hierarchy Layers: node vectors are normalized chunk centroids, no summaries."""
    from hierarchy.layers.tree import Layers, Node, node_id, normalize

    nodes: dict[str, Node] = {}
    ids_by_level: list[list[str]] = []
    vectors: list[np.ndarray] = []
    below, sums = [f"r{i}" for i in range(len(x))], x.astype(np.float64)
    for lvl, groups in enumerate(levels, 1):
        ids = [node_id(lvl, i) for i in range(len(groups))]
        for nid, g in zip(ids, groups):
            nodes[nid] = Node(nid, lvl, [below[j] for j in g])
            if lvl > 1:
                for j in g:
                    nodes[below[j]].parent = nid
        sums = np.stack([sums[g].sum(axis=0) for g in groups])
        ids_by_level.append(ids)
        vectors.append(normalize(sums).astype(np.float32))
        below = ids
    return Layers(nodes=nodes, levels=ids_by_level, vectors=vectors, meta={})


class _RowKB:
    """What the summary route's descent reads of a KB, over bare vectors (chunk id "r<row>")."""

    path = "(benchmark)"

    def __init__(self, x: np.ndarray) -> None:
        self.vectors = x
        self.chunk_ids = [f"r{i}" for i in range(len(x))]
        self.chunks = _RowChunks()

    def __len__(self) -> int:
        return len(self.vectors)

    def row_of(self, chunk_id: str) -> int:
        return int(chunk_id[1:])

    def rank_within(self, qv: np.ndarray, ids: list[str], k: int, **_) -> list:
        """The top-k of `ids` by cosine (rows have vectors, no text: the descent's last step, dense)."""
        from engine.floor.base.types import RetrievedChunk

        s = self.vectors[[self.row_of(c) for c in ids]] @ qv
        return [RetrievedChunk.of(self.chunks[ids[i]], float(s[i])) for i in np.argsort(-s, kind="stable")[:k]]


class _RowChunks:
    def __contains__(self, cid: str) -> bool:
        return True

    def __getitem__(self, cid: str):
        from hierarchy.documents import Chunk

        return Chunk(cid, cid, "", "", 0)


def descent_scores(qa: QACorpus, x: np.ndarray, levels: list[list[list[int]]], held: list[int]) -> dict:
    """Supporting-passage recall of the descent from the top and from level 1, the share of
    questions whose supporting passages share a level-1 cluster, and the candidates the top
    descent reaches (chunks under its level-1 nodes)."""
    from engine.core.routes.summary import summary_context

    layers = centroid_layers(x, levels)
    kb = _RowKB(x)
    cluster_of = np.empty(len(x), dtype=np.int64)
    for c, g in enumerate(levels[0]):
        cluster_of[g] = c
    top, reach, l1, together = [], [], [], []
    for i in held:
        sup = qa.support[i]
        ctx = {}
        for name, start in (("top", None), ("l1", 1)):
            _, visited = summary_context(
                qa.questions[i], kb, k=DESCENT_K, query_vector=qa.qvecs[i], layers=layers, start_level=start
            )
            ctx[name] = visited["per_level"]
        top.append(_found(sup, {int(c[1:]) for c in ctx["top"].get("0", [])}))
        under = {int(c[1:]) for nid in ctx["top"].get("1", []) for c in layers.nodes[nid].children}
        reach.append(_found(sup, under))
        l1.append(_found(sup, {int(c[1:]) for c in ctx["l1"].get("0", [])}))
        shared = set.intersection(*({int(cluster_of[r]) for r in rows} for rows in sup))
        together.append(1.0 if shared else 0.0)
    return {
        "recall_top": _mean(top),
        "reach_top": _mean(reach),
        "recall_l1": _mean(l1),
        "together": _mean(together),
    }


def flat_recall(qa: QACorpus, x: np.ndarray, held: list[int], k: int = DESCENT_K) -> float:
    """Supporting-passage recall of the exact top-k chunks (no layers): the reference."""
    out: list[float] = []
    if len(x) <= k:
        return _mean([_found(qa.support[i], set(range(len(x)))) for i in held])
    for s in range(0, len(held), 256):
        part = held[s : s + 256]
        scores = qa.qvecs[part] @ x.T
        best = np.argpartition(-scores, k, axis=1)[:, :k]
        out += [_found(qa.support[i], set(row.tolist())) for i, row in zip(part, best)]
    return _mean(out)


def _found(support: list[list[int]], rows: set[int]) -> float:
    return sum(1 for p in support if rows.intersection(p)) / len(support)


def _mean(values: list[float]) -> float:
    return round(float(np.mean(values)), 3) if values else float("nan")
