"""The faiss store: an index over the KB's vectors, in the KB folder.

Rows follow the KB's chunk order (row i is the KB's i-th chunk), so the index needs no id map of
its own and the KB's check compares row counts as before. `faiss` is exact (IndexFlatIP, what
every KB had before stores existed): it is built from the KB's vectors when the KB opens (a copy
of the rows, ~0.1 s at 100k), so no index file is written by a commit. `faiss-hnsw` stays exact
up to `exact_max` vectors and switches to an HNSW graph above it (the choice and the threshold
were measured on real MiniLM vectors: docs/vector_stores.md); the graph costs a minute to build
at 100k, so it is persisted as `index.faiss`, written whole by each commit (the bounded index
rewrite measured in docs/vector_stores.md). HNSW grows by appending; a delete rebuilds the graph
from the kept vectors (faiss' HNSW has no delete), O(KB size).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np

from engine.base.errors import KBCorruptError
from hierarchy.vector_store.base import EXACT_MAX, FAISS_HNSW, FAISS_INDEX, Hits, StoreSpec

INDEX = FAISS_INDEX
# HNSW parameters: M=32 links per node and efConstruction=80 built a graph whose search at
# efSearch=128 kept recall@10 >= 0.98 against exact (bar: 0.95) up to 100k vectors for ~0.3 ms
# more than efSearch=64, which measured 0.977-0.993 at 100k in smaller passes (docs/vector_stores.md).
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
HNSW_EF_SEARCH = 128


class FaissStore:
    """See the module docstring. Use `empty` or `from_files`; add/delete return a new store."""

    def __init__(self, spec: StoreSpec, dim: int, index, ids: Sequence[str]):
        self.spec = spec
        self.dim = int(dim)
        self.index = index  # the faiss index itself: benchmarks and older callers read it
        self.ids: list[str] = list(ids)
        self._row = {cid: i for i, cid in enumerate(self.ids)}

    # -- open -------------------------------------------------------------------------------
    @classmethod
    def empty(cls, spec: StoreSpec, dim: int) -> FaissStore:
        return cls(spec, dim, _build(spec, dim, np.zeros((0, dim), np.float32)), [])

    @classmethod
    def from_vectors(cls, spec: StoreSpec, dim: int, ids: Sequence[str], vectors: np.ndarray) -> FaissStore:
        return cls(spec, dim, _build(spec, dim, vectors), ids)

    @classmethod
    def from_files(
        cls, spec: StoreSpec, dim: int, files: Mapping[str, bytes], ids: Sequence[str], vectors: np.ndarray | None
    ) -> FaissStore:
        """The store committed as `files`, its rows being the chunks `ids` in order: the persisted
        index, else one built from `vectors` (an exact index is not persisted). KBCorruptError
        "is unreadable (...)" when the index does not read (the caller names the file and the repair)."""
        import faiss

        if INDEX not in files:
            if vectors is None:
                raise KBCorruptError("is missing")
            return cls.from_vectors(spec, dim, ids, vectors)
        try:
            index = faiss.deserialize_index(np.frombuffer(files[INDEX], dtype=np.uint8))
        except Exception as e:  # faiss raises RuntimeError with C++ text
            raise KBCorruptError(f"is unreadable ({e})") from e
        return cls(spec, dim, index, ids)

    # -- the protocol -----------------------------------------------------------------------
    def count(self) -> int:
        return int(self.index.ntotal)

    def add(self, ids: Sequence[str], vectors: np.ndarray) -> FaissStore:
        """A copy with the rows appended (ids already present are replaced); self stays valid,
        so a commit that fails leaves the KB's store as it was."""
        import faiss

        present = [cid for cid in ids if cid in self._row]
        base = self.delete(present) if present else self
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        n = base.count() + len(vectors)
        to_hnsw = _wants_hnsw(self.spec, n) and not _is_hnsw(base.index)
        if not len(vectors) and not to_hnsw:
            return base  # nothing to add: no copy of the index (the KB's add of changed positions only)
        if to_hnsw:
            return FaissStore.from_vectors(self.spec, self.dim, base.ids + list(ids), _concat(base.vectors(), vectors))
        index = faiss.clone_index(base.index)
        if len(vectors):
            index.add(vectors)
        return FaissStore(self.spec, self.dim, index, base.ids + list(ids))

    def delete(self, ids: Collection[str]) -> FaissStore:
        """A copy without these rows: rebuilt from the kept vectors (a flat index copies them
        once, cheaper than remove_ids; HNSW has no delete)."""
        gone = {cid for cid in ids if cid in self._row}
        if not gone:
            return self
        keep = [i for i, cid in enumerate(self.ids) if cid not in gone]
        return FaissStore.from_vectors(self.spec, self.dim, [self.ids[i] for i in keep], self.vectors()[keep])

    def search(self, queries: np.ndarray, k: int, exclude: Collection[str] = ()) -> list[Hits]:
        import faiss

        q = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, self.dim)
        n = self.count()
        rows = np.array(sorted({self._row[c] for c in exclude if c in self._row}), dtype=np.int64)
        k = min(k, n - len(rows))
        if k <= 0 or len(q) == 0:
            return [[] for _ in range(len(q))]
        # The exclusion is applied inside the index (an ID selector), so k new rows come back in
        # one search however many rows are excluded (the logic route samples without replacement).
        sel = faiss.IDSelectorNot(faiss.IDSelectorBatch(rows)) if len(rows) else None
        if _is_hnsw(self.index):
            params = faiss.SearchParametersHNSW(sel=sel, efSearch=max(HNSW_EF_SEARCH, k))
        else:
            params = faiss.SearchParameters(sel=sel) if sel is not None else None
        scores, found = self.index.search(q, k, params=params)
        return [[(self.ids[r], float(s)) for s, r in zip(sr, rr) if r >= 0] for sr, rr in zip(scores, found)]

    def persist(self) -> dict[str, bytes]:
        """The HNSW graph; nothing for an exact index, which opening rebuilds from the vectors."""
        import faiss

        return {INDEX: faiss.serialize_index(self.index).tobytes()} if _is_hnsw(self.index) else {}

    def describe(self) -> dict:
        if _is_hnsw(self.index):
            return {"type": "faiss.IndexHNSWFlat", "metric": "inner_product", "M": HNSW_M, "ef_search": HNSW_EF_SEARCH}
        return {"type": "faiss.IndexFlatIP", "metric": "inner_product"}

    def close(self) -> None:
        return None

    # -- beyond the protocol ----------------------------------------------------------------
    def vectors(self) -> np.ndarray:
        """Every row's vector, in row order (both index types store them whole)."""
        n = self.count()
        return self.index.reconstruct_n(0, n) if n else np.zeros((0, self.dim), np.float32)


def _wants_hnsw(spec: StoreSpec, n: int) -> bool:
    return spec.kind == FAISS_HNSW and n > (EXACT_MAX if spec.exact_max is None else spec.exact_max)


def _is_hnsw(index) -> bool:
    import faiss

    return isinstance(index, faiss.IndexHNSW)


def _build(spec: StoreSpec, dim: int, vectors: np.ndarray):
    import faiss

    vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, dim)
    if _wants_hnsw(spec, len(vectors)):
        index = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
    else:
        index = faiss.IndexFlatIP(dim)
    if len(vectors):
        index.add(vectors)
    return index


def _concat(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.concatenate([a, b]) if len(a) else b
