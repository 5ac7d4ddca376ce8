"""The faiss store: an index over the KB's vectors, in the KB folder.

Live rows follow the KB's chunk order (the i-th live row is the KB's i-th chunk), so the index
needs no id map of its own: opening pairs the KB's chunk ids with the rows not deleted. `faiss`
is exact (IndexFlatIP): it is built from the KB's vectors when the KB opens, so no commit writes
it. `faiss-hnsw` stays exact up to `exact_max` vectors and switches to an HNSW graph above it
(docs/vector_stores.md); the graph is slow to build, so it is persisted as `index.faiss`,
written whole by each commit. HNSW grows by appending; a delete marks rows deleted
(`index.dead.npy`, skipped by every search) and the graph is rebuilt from the rows it keeps once
they pass REBUILD_DEAD, so deletes are O(deleted) and the rebuild is amortized.
"""

from __future__ import annotations

import io
from collections.abc import Collection, Mapping, Sequence

import numpy as np

from engine.floor.base.errors import KBCorruptError
from hierarchy.vector_store.base import (
    EXACT_MAX,
    FAISS_DEAD,
    FAISS_HNSW,
    FAISS_INDEX,
    HNSW_EF_CONSTRUCTION,
    HNSW_M,
    Hits,
    StoreSpec,
    ef_search,
)

INDEX = FAISS_INDEX
DEAD = FAISS_DEAD
# Deleted rows of a graph past which it is rebuilt from the rows it keeps: dead rows cost search
# time (the graph still walks them) and bytes in every rewrite of index.faiss.
REBUILD_DEAD = 0.2


class FaissStore:
    """See the module docstring. Use `empty`, `from_vectors` or `from_files`; add/delete return
    a new store. `ids[r]` is the chunk of index row r, None for a row deleted from an HNSW graph."""

    def __init__(self, spec: StoreSpec, dim: int, index, ids: Sequence[str | None]):
        self.spec = spec
        self.dim = int(dim)
        self.index = index  # the faiss index itself: benchmarks and older callers read it
        self.ids: list[str | None] = list(ids)
        self._row = {cid: i for i, cid in enumerate(self.ids) if cid is not None}
        self._dead = np.array([i for i, cid in enumerate(self.ids) if cid is None], dtype=np.int64)

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
        """The store committed as `files`, its live rows being the chunks `ids` in order: the
        persisted index, else one built from `vectors` (an exact index is not persisted).
        KBCorruptError "is unreadable (...)" when the index does not read or does not hold those
        rows (the caller names the file and the repair)."""
        import faiss

        if INDEX not in files:
            if vectors is None:
                raise KBCorruptError("is missing")
            return cls.from_vectors(spec, dim, ids, vectors)
        try:
            index = faiss.deserialize_index(np.frombuffer(files[INDEX], dtype=np.uint8))
            dead = set(np.load(io.BytesIO(files[DEAD]), allow_pickle=False).tolist()) if DEAD in files else set()
        except Exception as e:  # faiss raises RuntimeError with C++ text
            raise KBCorruptError(f"is unreadable ({e})") from e
        if index.ntotal - len(dead) != len(ids) or any(not 0 <= r < index.ntotal for r in dead):
            raise KBCorruptError(f"is unreadable (it holds {index.ntotal} rows, {len(dead)} deleted, for {len(ids)})")
        live = iter(ids)
        return cls(spec, dim, index, [None if r in dead else next(live) for r in range(index.ntotal)])

    # -- the protocol -----------------------------------------------------------------------
    def count(self) -> int:
        return len(self._row)

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
            rows = _concat(base.vectors(), vectors)
            return FaissStore.from_vectors(self.spec, self.dim, base.live_ids() + list(ids), rows)
        index = faiss.clone_index(base.index)
        if len(vectors):
            index.add(vectors)
        return FaissStore(self.spec, self.dim, index, base.ids + list(ids))

    def delete(self, ids: Collection[str]) -> FaissStore:
        """A copy without these rows. An HNSW graph keeps them as deleted rows, skipped by every
        search, until they pass REBUILD_DEAD of its rows (faiss' HNSW has no delete); a flat
        index is rebuilt from the kept vectors (a copy of them, cheaper than remove_ids)."""
        gone = {cid for cid in ids if cid in self._row}
        if not gone:
            return self
        if _is_hnsw(self.index) and len(self._dead) + len(gone) <= REBUILD_DEAD * len(self.ids):
            return FaissStore(self.spec, self.dim, self.index, [None if c in gone else c for c in self.ids])
        keep = [r for c, r in self._row.items() if c not in gone]
        kept = self.index.reconstruct_batch(np.array(keep, dtype=np.int64)) if keep else np.zeros((0, self.dim))
        return FaissStore.from_vectors(self.spec, self.dim, [self.ids[r] for r in keep], kept)

    def search(self, queries: np.ndarray, k: int, exclude: Collection[str] = ()) -> list[Hits]:
        import faiss

        q = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, self.dim)
        excluded = np.array(sorted({self._row[c] for c in exclude if c in self._row}), dtype=np.int64)
        k = min(k, self.count() - len(excluded))
        if k <= 0 or len(q) == 0:
            return [[] for _ in range(len(q))]
        rows = np.concatenate([self._dead, excluded]) if len(self._dead) else excluded
        # The exclusion is applied inside the index (an ID selector), so k new rows come back in
        # one search however many rows are excluded (the logic route samples without replacement).
        sel = faiss.IDSelectorNot(faiss.IDSelectorBatch(rows)) if len(rows) else None
        if _is_hnsw(self.index):
            params = faiss.SearchParametersHNSW(sel=sel, efSearch=max(ef_search(self.index.ntotal), k))
        else:
            params = faiss.SearchParameters(sel=sel) if sel is not None else None
        scores, found = self.index.search(q, k, params=params)
        return [[(self.ids[r], float(s)) for s, r in zip(sr, rr) if r >= 0] for sr, rr in zip(scores, found)]

    def persist(self) -> dict[str, bytes]:
        """The HNSW graph and its deleted rows; nothing for an exact index, which opening
        rebuilds from the vectors."""
        import faiss

        if not _is_hnsw(self.index):
            return {}
        buf = io.BytesIO()
        np.save(buf, self._dead, allow_pickle=False)
        return {INDEX: faiss.serialize_index(self.index).tobytes(), DEAD: buf.getvalue()}

    def describe(self) -> dict:
        if _is_hnsw(self.index):
            return {
                **{
                    "type": "faiss.IndexHNSWFlat",
                    "metric": "inner_product",
                    "M": HNSW_M,
                    "ef_search": ef_search(self.index.ntotal),
                },
                "deleted_rows": len(self._dead),
            }
        return {"type": "faiss.IndexFlatIP", "metric": "inner_product"}

    def close(self) -> None:
        return None

    # -- beyond the protocol ----------------------------------------------------------------
    def live_ids(self) -> list[str]:
        """The chunk ids of the live rows, in row order."""
        return list(self._row)

    def vectors(self) -> np.ndarray:
        """Every live row's vector, in row order (both index types store them whole)."""
        if not self._row:
            return np.zeros((0, self.dim), np.float32)
        if not len(self._dead):
            return self.index.reconstruct_n(0, self.index.ntotal)
        return self.index.reconstruct_batch(np.array(list(self._row.values()), dtype=np.int64))


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
