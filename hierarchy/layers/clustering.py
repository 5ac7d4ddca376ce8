"""Clustering for the summary layers: k = round(m / size) groups of the rows of a matrix.

Up to WARD_MAX rows: Ward agglomerative clustering (deterministic; on unit vectors Euclidean
distance is monotone in cosine), which keeps a question's supporting passages together more
often than k-means. Above, Ward's m^2/2 distances no longer fit, so two stages: faiss k-means
into about m / COARSE_GROUP coarse groups, then Ward inside each group with k shared out in
proportion to the group's size; time and memory grow near-linearly. The measurements behind
both limits: docs/results/summary/bench_clustering.md.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

WARD_MAX = 10_000  # Ward on the whole set up to here; two stages above
COARSE_GROUP = 1_000  # rows per coarse group in the two-stage scheme: Ward on 1k rows is ~0.1-0.5 s
COARSE_ITER = 20  # faiss k-means iterations of the coarse step
WARD = "ward"
TWO_STAGE = "two-stage"


def cluster(
    vectors: np.ndarray,
    size: int,
    seed: int = 0,
    *,
    min_items: int = 0,
    labeler: Callable[[np.ndarray, int, int], np.ndarray] | None = None,
) -> list[list[int]]:
    """Groups of row indices, each sorted, groups ordered by their first row.

    k = round(m / size) groups (fewer when rows repeat: identical vectors cannot be split apart).
    A set of at most `min_items` rows, or too small for two groups, is one group. Deterministic
    for a seed. `labeler(x, k, seed)` labels the rows (default cluster_labels, the method for
    the size; the clustering benchmark passes the others it compares)."""
    m = len(vectors)
    if m == 0:
        return []
    k = min(m, max(1, round(m / size)))
    if k <= 1 or m <= min_items:
        return [list(range(m))]
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    k = min(k, len(np.unique(x, axis=0)))
    if k <= 1:
        return [list(range(m))]
    labels = (labeler or cluster_labels)(x, k, seed)
    groups = [np.flatnonzero(labels == c).tolist() for c in range(int(labels.max()) + 1)]
    return sorted((g for g in groups if g), key=lambda g: g[0])


def cluster_method(m: int) -> str:
    """The method `cluster` uses for m rows."""
    return WARD if m <= WARD_MAX else TWO_STAGE


def cluster_labels(x: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """A label in 0..k-1 per row of a float32 matrix with at least k distinct rows."""
    if cluster_method(len(x)) == WARD:
        return ward_labels(x, k)
    return two_stage_labels(x, k, seed)


def ward_labels(x: np.ndarray, k: int) -> np.ndarray:
    if k <= 1:
        return np.zeros(len(x), dtype=np.int64)
    from sklearn.cluster import AgglomerativeClustering

    return AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(x).astype(np.int64)


def kmeans_labels(x: np.ndarray, k: int, seed: int = 0, niter: int = COARSE_ITER, **options) -> np.ndarray:
    """faiss k-means on a float32 matrix: the label of each row's nearest centroid, on one
    thread. `options` are faiss.Kmeans settings (max_points_per_centroid, ...)."""
    import faiss

    # One OpenMP thread: on cores shared with other jobs faiss' threads spin-wait for each other.
    # The setting is the calling thread's own; it is put back.
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        km = faiss.Kmeans(x.shape[1], k, niter=niter, seed=seed, verbose=False, **options)
        km.train(x)
        return km.index.search(x, 1)[1][:, 0].astype(np.int64)
    finally:
        faiss.omp_set_num_threads(threads)


def two_stage_labels(x: np.ndarray, k: int, seed: int = 0, group: int = COARSE_GROUP) -> np.ndarray:
    """k-means into ~m/group coarse groups, then Ward inside each group (two stages again for a
    group over WARD_MAX), k shared out by group size. Labels are 0..k'-1 with k' <= k."""
    m = len(x)
    g = min(k, max(2, round(m / group)))
    coarse = kmeans_labels(x, g, seed, min_points_per_centroid=1)  # small sets: no warning
    parts = [rows for c in range(g) if len(rows := np.flatnonzero(coarse == c))]
    shares = apportion([len(r) for r in parts], k)
    labels = np.empty(m, dtype=np.int64)
    offset = 0
    for rows, kc in zip(parts, shares):
        sub = np.ascontiguousarray(x[rows])
        kc = min(kc, len(np.unique(sub, axis=0)))
        if kc <= 1:
            inner = np.zeros(len(rows), dtype=np.int64)
        elif len(rows) <= WARD_MAX:
            inner = ward_labels(sub, kc)
        else:  # a coarse group too big for Ward: split it the same way
            inner = two_stage_labels(sub, kc, seed, group)
        labels[rows] = inner + offset
        offset += int(inner.max()) + 1
    return labels


def apportion(counts: list[int], k: int) -> list[int]:
    """k shared out over groups in proportion to their counts (largest remainder), each group
    at least 1 and at most its count. The shares sum to k when k lies between len(counts) and
    sum(counts)."""
    total = sum(counts)
    ideal = [k * c / total for c in counts]
    shares = [min(c, max(1, int(q))) for c, q in zip(counts, ideal)]
    # Hand out what is left to the largest remainders (ties: the earlier group), within counts.
    order = sorted(range(len(counts)), key=lambda i: (-(ideal[i] - int(ideal[i])), i))
    left = k - sum(shares)
    while left > 0:
        grew = False
        for i in order:
            if left and shares[i] < counts[i]:
                shares[i] += 1
                left -= 1
                grew = True
        if not grew:
            break
    return shares
