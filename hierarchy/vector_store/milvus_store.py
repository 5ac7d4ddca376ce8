"""The Milvus store, through pymilvus: one collection per KB, rows (id, vec), a FLAT (exact)
inner-product index. The same code serves a Milvus Lite folder (uri ending in .db: an
in-process engine from the milvus-lite package, for tests and one-process use) and a Milvus
server or cluster (uri http(s)://host:port; a token from $LOGICROUTE_MILVUS_TOKEN, never the
manifest).

It is a shared store (hierarchy.vector_store.base): written in place, a superset of the
committed chunks at every moment; the KB keeps only the ids of the commit it read.
Milvus Lite allows one process at a time on a folder (its own LOCK file): readers in other
processes wait for it a few seconds, then get one line saying so. A server has no such limit.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from engine.base.errors import KBCorruptError, KBError
from hierarchy.vector_store.base import Hits, StoreSpec

TOKEN_ENV = "LOGICROUTE_MILVUS_TOKEN"
BATCH = 1000  # rows per insert / delete / query page: well under Milvus' 64 MB message cap at 384 dims
_CLIENTS: dict[str, object] = {}  # uri -> MilvusClient, shared by every store of this process
_CLIENTS_LOCK = threading.Lock()
LITE_WAIT_S = 10.0  # how long a process waits for another one's Milvus Lite lock
ID_MAX = 64  # chunk ids are 16 hex characters; room for other id schemes


class MilvusStore:
    """See the module docstring. The connection opens on first use, so opening a KB whose
    store is unreachable still reads its chunks; searching says what is wrong in one line."""

    def __init__(self, spec: StoreSpec, dim: int, kb_path: Path):
        if not spec.uri or not spec.collection:
            raise KBError(f"a Milvus store needs a uri and a collection, the manifest has {spec.to_dict()}")
        self.spec = spec
        self.dim = int(dim)
        self.kb_path = Path(kb_path)
        self._client = None
        self._loaded = False

    @property
    def uri(self) -> str:
        """The server URI, or the Milvus Lite folder (relative paths are relative to the KB)."""
        if self.spec.is_server:
            return str(self.spec.uri)
        p = Path(str(self.spec.uri)).expanduser()
        return str(p if p.is_absolute() else (self.kb_path / p).resolve())

    # -- connection -------------------------------------------------------------------------
    def client(self):
        """The process's one client of this URI: a reader opens the KB per commit (serve does),
        and a connection per open would pile up; pymilvus clients are safe across threads."""
        if self._client is None:
            with _CLIENTS_LOCK:
                if self.uri not in _CLIENTS:
                    _CLIENTS[self.uri] = self._connect()
                self._client = _CLIENTS[self.uri]
        return self._client

    def _connect(self):
        try:
            from pymilvus import MilvusClient
        except ImportError as e:
            raise KBError(
                f"this knowledge base keeps its vectors in Milvus ({self.spec.label()}): "
                "install pymilvus (and milvus-lite for a .db path): pip install 'logicroute[milvus]'"
            ) from e
        if self.spec.is_server:
            try:
                return MilvusClient(uri=self.uri, token=os.environ.get(TOKEN_ENV, ""))
            except Exception as e:  # pymilvus raises its own MilvusException on a refused connection
                raise KBError(f"cannot reach Milvus at {self.uri} ({_first_line(e)})") from e
        Path(self.uri).parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + LITE_WAIT_S
        while True:
            try:
                return MilvusClient(uri=self.uri)
            except Exception as e:  # Milvus Lite refuses while another process holds its folder
                if time.monotonic() >= deadline:
                    raise KBError(
                        f"cannot open the Milvus Lite store {self.uri} ({_first_line(e)}); Milvus Lite allows one "
                        f"process at a time: for readers beside a writer use a Milvus server (--store milvus://HOST:PORT)"
                    ) from e
                time.sleep(0.2)

    def _has_collection(self) -> bool:
        """Whether this KB's collection exists, loaded: Milvus searches and queries only loaded
        collections, and one that a server restarted with, or another process wrote, starts released."""
        c = self.client()
        if not c.has_collection(self.spec.collection):
            return False
        if not self._loaded:
            try:
                c.load_collection(self.spec.collection)  # a no-op when it is loaded already
            except Exception as e:  # pymilvus' MilvusException; pymilvus is imported only where used
                # a writer killed mid-flush can leave Milvus Lite a segment file it cannot read
                raise KBCorruptError(
                    f"{self.spec.label()} cannot load the collection {self.spec.collection} ({_first_line(e)}); "
                    "`logicroute check --repair --kb KB` refills it from the KB's committed vectors"
                ) from e
            self._loaded = True
        return True

    def ensure_collection(self) -> None:
        """Create this KB's collection when it is missing (a new KB, or one moved here)."""
        if self._has_collection():
            return
        c = self.client()
        from pymilvus import DataType

        schema = c.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", DataType.VARCHAR, is_primary=True, max_length=ID_MAX)
        schema.add_field("vec", DataType.FLOAT_VECTOR, dim=self.dim)
        index = c.prepare_index_params()
        index.add_index(field_name="vec", index_type="FLAT", metric_type="IP")  # exact: same hits as faiss
        # Strong consistency: a search right after a write sees it (the KB's commit relies on it).
        c.create_collection(self.spec.collection, schema=schema, index_params=index, consistency_level="Strong")
        self._loaded = True  # created with an index: Milvus loads it

    def drop(self) -> None:
        """Remove this KB's collection (overwriting or rebuilding the KB)."""
        c = self.client()
        if c.has_collection(self.spec.collection):
            c.drop_collection(self.spec.collection)
        self._loaded = False

    # -- the protocol -----------------------------------------------------------------------
    def count(self) -> int:
        c = self.client()
        if not self._has_collection():
            return 0
        res = c.query(self.spec.collection, filter="", output_fields=["count(*)"])
        return int(res[0]["count(*)"]) if res else 0

    def add(self, ids: Sequence[str], vectors: np.ndarray) -> MilvusStore:
        vectors = np.asarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        if not len(ids):
            return self
        self.ensure_collection()
        c = self.client()
        for i in range(0, len(ids), BATCH):
            rows = [{"id": cid, "vec": v.tolist()} for cid, v in zip(ids[i : i + BATCH], vectors[i : i + BATCH])]
            c.upsert(self.spec.collection, data=rows)  # upsert: a journaled id written again is replaced
        self._flush_lite()
        return self

    def delete(self, ids: Collection[str]) -> MilvusStore:
        ids = list(ids)
        c = self.client()
        if not ids or not self._has_collection():
            return self
        for i in range(0, len(ids), BATCH):
            c.delete(self.spec.collection, ids=ids[i : i + BATCH])
        self._flush_lite()
        return self

    def search(self, queries: np.ndarray, k: int, exclude: Collection[str] = ()) -> list[Hits]:
        q = np.asarray(queries, dtype=np.float32).reshape(-1, self.dim)
        if k <= 0 or len(q) == 0 or not self._has_collection():
            return [[] for _ in range(len(q))]
        # The exclusion is a filter inside Milvus, so k new rows come back in one search.
        flt = f"id not in {json.dumps(sorted(exclude))}" if exclude else ""
        res = self.client().search(
            self.spec.collection,
            data=[v.tolist() for v in q],
            limit=int(k),
            filter=flt,
            output_fields=["id"],
            anns_field="vec",
            search_params={"metric_type": "IP"},
        )
        return [[(str(h["id"]), float(h["distance"])) for h in hits] for hits in res]

    def persist(self) -> dict[str, bytes]:
        return {}  # the rows are in Milvus already: nothing goes into the KB folder's commit

    def describe(self) -> dict:
        return {"type": "milvus.FLAT", "metric": "inner_product", "collection": self.spec.collection}

    def close(self) -> None:
        """Forget the client; the connection stays for the process's other stores of this URI."""
        self._client = None
        self._loaded = False

    def _flush_lite(self) -> None:
        """Milvus Lite searches rows it has not flushed by brute force in Python, several times
        slower. A server persists writes through its log and compacts on its own."""
        if not self.spec.is_server:
            self.client().flush(self.spec.collection)

    # -- beyond the protocol ----------------------------------------------------------------
    def all_ids(self) -> set[str]:
        """Every id in the collection (for `check` and `repair`; O(rows), paged)."""
        c = self.client()
        if not self._has_collection():
            return set()
        out: set[str] = set()
        with _quiet("grpc._server", "pymilvus"):
            it = c.query_iterator(self.spec.collection, batch_size=BATCH, filter="", output_fields=["id"])
            try:
                while page := it.next():
                    out.update(str(r["id"]) for r in page)
            finally:
                it.close()
        return out


@contextmanager
def _quiet(*names: str) -> Iterator[None]:
    """Milvus Lite answers the iterator's timestamp call with "not implemented"; its gRPC server
    logs that as an error and pymilvus warns before falling back to a client-side timestamp,
    which is what we want: neither line belongs in `logicroute check`'s output."""
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
