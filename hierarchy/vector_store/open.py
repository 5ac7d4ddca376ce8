"""Picking the backend of a spec: the one place that knows every store."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from hierarchy.vector_store.base import MILVUS, StoreSpec, VectorStore
from hierarchy.vector_store.faiss_store import FaissStore


def with_collection(spec: StoreSpec) -> StoreSpec:
    """The spec of a new KB: a Milvus store gets a collection name of its own, so several KBs
    can share one server (the manifest remembers it, so a KB folder that moves keeps it)."""
    if spec.kind != MILVUS or spec.collection:
        return spec
    return StoreSpec(kind=spec.kind, uri=spec.uri, collection=f"logicroute_{secrets.token_hex(6)}")


def open_store(
    spec: StoreSpec,
    kb_path: Path,
    dim: int,
    files: Mapping[str, bytes],
    ids: Sequence[str],
    vectors: np.ndarray | None = None,
) -> VectorStore:
    """The store a commit describes: `files` are the data files its `persist` gave, `ids` the KB's
    chunk ids in row order and `vectors` their vectors (what an index that is not persisted is
    built from)."""
    if spec.kind == MILVUS:
        from hierarchy.vector_store.milvus_store import MilvusStore  # only a Milvus KB loads it

        return MilvusStore(spec, dim, kb_path)
    return FaissStore.from_files(spec, dim, files, ids, vectors)


def new_store(spec: StoreSpec, kb_path: Path, dim: int, ids: Sequence[str], vectors: np.ndarray) -> VectorStore:
    """A store of this spec holding exactly these rows, built from scratch (a new KB, a repair,
    a move to another store). A Milvus collection of the same name is dropped first."""
    if spec.kind == MILVUS:
        from hierarchy.vector_store.milvus_store import MilvusStore

        store = MilvusStore(spec, dim, kb_path)
        store.drop()
        store.ensure_collection()
        return store.add(ids, vectors)
    return FaissStore.from_vectors(spec, dim, ids, vectors)
