"""The vector-store protocol and the spec that selects a backend.

A store maps chunk ids to unit vectors and answers top-k inner-product searches (cosine on unit
vectors). Two kinds of backend sit behind the same protocol:

- a *file* store (faiss) lives in the KB folder: `add` and `delete` return a changed copy, and
  `persist` gives the bytes the KB commits beside its other data files, so a change is committed
  by the KB's one commit protocol (hierarchy.store) like everything else;
- a *shared* store (Milvus) is a database written in place: rows are added before the KB's
  manifest lands and removed after it, so the store always holds every committed chunk, and
  readers keep only the ids of the commit they read (rows of a change under way, or one that
  died, are never seen). The KB journals what it is about to write, so the next writer can
  remove rows of a change that died (hierarchy.kb).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from engine.floor.base.errors import KBError

FAISS = "faiss"  # exact inner product (IndexFlatIP) at every size
FAISS_HNSW = "faiss-hnsw"  # exact below exact_max vectors, an HNSW graph above: the default (docs/vector_stores.md)
MILVUS = "milvus"  # pymilvus: a Milvus Lite folder, or a Milvus server / cluster at an http(s) URI
KINDS = (FAISS, FAISS_HNSW, MILVUS)

# Past EXACT_MAX vectors an exact query would eat the retrieval budget; HNSW stays under a
# millisecond with recall@10 >= 0.98 (docs/vector_stores.md).
EXACT_MAX = 20_000
# HNSW parameters that keep recall@10 >= 0.98 against exact up to 100k vectors; past 100k the
# graph needs a wider search for the same recall, so efSearch grows with log10 of the size.
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
HNSW_EF_SEARCH = 128
HNSW_EF_SEARCH_FROM = 100_000  # the size up to which HNSW_EF_SEARCH holds
FAISS_INDEX = "index.faiss"  # a faiss store's HNSW graph, committed with the KB's other files
FAISS_DEAD = "index.dead.npy"  # the rows deleted from that graph since it was built (int64 row numbers)
LITE_DEFAULT = "milvus.db"  # `--store milvus`: a Milvus Lite folder inside the KB folder
_HOST_PORT = re.compile(r"^[A-Za-z0-9.-]+:\d+$")


def ef_search(n: int) -> int:
    """The HNSW search width for a graph of n vectors: HNSW_EF_SEARCH up to HNSW_EF_SEARCH_FROM,
    then one more HNSW_EF_SEARCH per tenfold (256 at 1M, 384 at 10M)."""
    if n <= HNSW_EF_SEARCH_FROM:
        return HNSW_EF_SEARCH
    return int(round(HNSW_EF_SEARCH * (1 + math.log10(n / HNSW_EF_SEARCH_FROM))))


@dataclass(frozen=True)
class StoreSpec:
    """Which store holds a KB's vectors; the manifest's "store" entry.

    uri (milvus only): a Milvus Lite path ending in .db, relative to the KB folder unless absolute,
    or an http(s)://host:port URI of a Milvus server. collection: the Milvus collection of this
    KB (chosen at creation, so several KBs share one server). exact_max (faiss-hnsw): the size up
    to which search stays exact."""

    kind: str = FAISS
    uri: str | None = None
    collection: str | None = None
    exact_max: int | None = None

    @property
    def shared(self) -> bool:
        """Whether the store is a database written in place (see the module docstring)."""
        return self.kind == MILVUS

    @property
    def is_server(self) -> bool:
        return self.kind == MILVUS and bool(self.uri) and self.uri.startswith(("http://", "https://"))

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: Mapping | None) -> StoreSpec:
        """The spec a manifest records; a manifest without one predates stores: exact faiss."""
        if not d:
            return cls()
        if not isinstance(d, Mapping) or d.get("kind") not in KINDS:
            raise ValueError(f"unknown vector store {d!r}")
        ex = d.get("exact_max")
        exact_max = None if ex is None else int(ex)
        return cls(kind=d["kind"], uri=d.get("uri"), collection=d.get("collection"), exact_max=exact_max)

    def label(self) -> str:
        """How the user names it (`--store`)."""
        return f"milvus://{self.uri}" if self.kind == MILVUS else self.kind

    def same_place(self, other: StoreSpec) -> bool:
        """Whether `other`, as a user asked for it, names this store (the collection is ours to pick)."""
        return self.kind == other.kind and (self.kind != MILVUS or self.uri == other.uri)


def default_store() -> StoreSpec:
    """A new KB's store when none is named: exact faiss up to EXACT_MAX vectors, then an HNSW
    graph, so retrieval stays within the 5 ms budget as the KB grows (docs/vector_stores.md).
    A manifest without a store entry still means exact faiss (StoreSpec.from_dict)."""
    return StoreSpec(kind=FAISS_HNSW, exact_max=EXACT_MAX)


def parse_store(text: str) -> StoreSpec:
    """The spec of a `--store` value: faiss | faiss-hnsw | milvus | milvus://PATH.db |
    milvus://http://HOST:PORT | milvus://HOST:PORT (a server over http)."""
    t = text.strip()
    if t in (FAISS, FAISS_HNSW):
        return StoreSpec(kind=t, exact_max=EXACT_MAX if t == FAISS_HNSW else None)
    if t == MILVUS:
        return StoreSpec(kind=MILVUS, uri=LITE_DEFAULT)
    if t.startswith("milvus://"):
        rest = t.removeprefix("milvus://")
        if _HOST_PORT.match(rest):
            rest = "http://" + rest
        if rest.startswith(("http://", "https://")):
            return StoreSpec(kind=MILVUS, uri=rest.rstrip("/"))
        if rest.endswith(".db"):  # Milvus Lite names its data folder with .db: pymilvus tells them apart so
            return StoreSpec(kind=MILVUS, uri=rest)
        raise KBError(f"--store {text}: a Milvus Lite path must end in .db, a server is milvus://http://HOST:PORT")
    raise KBError(f"unknown --store {text!r}: faiss, faiss-hnsw, milvus, milvus://PATH.db or milvus://http://HOST:PORT")


Hits = list[tuple[str, float]]  # (chunk id, score), best first


@runtime_checkable
class VectorStore(Protocol):
    """What the KB needs of a vector store. Vectors are float32 (n, dim) unit rows."""

    spec: StoreSpec
    dim: int

    def count(self) -> int:
        """Rows held (a shared store may also hold rows of a change under way)."""
        ...

    def add(self, ids: Sequence[str], vectors: np.ndarray) -> VectorStore:
        """The store with these rows added (an id already present is replaced). A file store
        returns a changed copy and stays as it is; a shared store writes and returns itself."""
        ...

    def delete(self, ids: Collection[str]) -> VectorStore:
        """The store without these ids (unknown ids are ignored); copy or in place, as add."""
        ...

    def search(self, queries: np.ndarray, k: int, exclude: Collection[str] = ()) -> list[Hits]:
        """Top-k (id, score) per query row, never an id in `exclude`."""
        ...

    def persist(self) -> dict[str, bytes]:
        """The data files the KB commits for this store (file name -> bytes; none for a shared one)."""
        ...

    def describe(self) -> dict:
        """What the manifest's "index" entry says about the index now."""
        ...

    def close(self) -> None:
        """Let go of connections (a no-op for a file store)."""
        ...
