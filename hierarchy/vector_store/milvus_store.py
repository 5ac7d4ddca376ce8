"""The Milvus store, through pymilvus: one collection per KB, rows (id, vec), a FLAT (exact)
inner-product index. The same code serves a Milvus Lite folder (uri ending in .db: an
in-process engine from the milvus-lite package, for tests and one-process use) and a Milvus
server or cluster (uri http(s)://host:port; a token from $LOGICROUTE_MILVUS_TOKEN, never the
manifest).

It is a shared store (hierarchy.vector_store.base): written in place, a superset of the
committed chunks at every moment; the KB keeps only the ids of the commit it read.
Milvus Lite allows one process at a time on a folder (its own LOCK file): readers in other
processes wait for it a few seconds, then get one line saying so. A server has no such limit.

A server can go away under a running process (stopped, restarted, a network fault): every call
to it goes through `_call`, which turns "cannot connect" into StoreUnavailableError (one line
naming the URI; serve answers 503) and reloads a collection that a restarted server holds
released. The client reconnects by itself once the server is back, so nothing is reopened.
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

from engine.floor.base.errors import KBCorruptError, KBError, StoreUnavailableError
from hierarchy.vector_store.base import Hits, StoreSpec

TOKEN_ENV = "LOGICROUTE_MILVUS_TOKEN"
BATCH = 1000  # rows per insert / delete / query page: well under Milvus' 64 MB message cap at 384 dims
_CLIENTS: dict[str, object] = {}  # uri -> MilvusClient, shared by every store of this process
_CLIENTS_LOCK = threading.Lock()
LITE_WAIT_S = 10.0  # how long a process waits for another one's Milvus Lite lock
ID_MAX = 64  # chunk ids are 16 hex characters; room for other id schemes
CALL_TIMEOUT_S = 30.0  # one call to a server: a hung server becomes an error instead of a hung question
CONNECT_FAILED = 2  # pymilvus' Status code for a channel that cannot connect
# What a server says while it is down or still starting (pymilvus' and Milvus 2.3's wording)
# (a timeout too: a restarted server blocks loads until its old sessions expire, ~30 s by default)
_UNREACHABLE = (
    "fail connecting",
    "unavailable",
    "not ready",
    "not healthy",
    "deadline exceeded",
    "connection refused",
    "timeout",
    "timed out",
)


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
                return MilvusClient(uri=self.uri, token=os.environ.get(TOKEN_ENV, ""), timeout=CALL_TIMEOUT_S)
            except Exception as e:  # pymilvus raises its own MilvusException on a refused connection
                raise StoreUnavailableError(f"cannot reach Milvus at {self.uri} ({_first_line(e)})") from e
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
        if not self._call("has_collection", self.spec.collection, reload=False):
            return False
        if not self._loaded:
            try:
                self._call("load_collection", self.spec.collection, reload=False)  # a no-op when loaded already
            except StoreUnavailableError:
                raise
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
        self._call(
            "create_collection",
            self.spec.collection,
            schema=schema,
            index_params=index,
            consistency_level="Strong",
            reload=False,
        )
        self._loaded = True  # created with an index: Milvus loads it

    def drop(self) -> None:
        """Remove this KB's collection (overwriting or rebuilding the KB)."""
        if self._call("has_collection", self.spec.collection, reload=False):
            self._call("drop_collection", self.spec.collection, reload=False)
        self._loaded = False

    # -- the protocol -----------------------------------------------------------------------
    def count(self) -> int:
        if not self._has_collection():
            return 0
        res = self._call("query", self.spec.collection, filter="", output_fields=["count(*)"])
        return int(res[0]["count(*)"]) if res else 0

    def add(self, ids: Sequence[str], vectors: np.ndarray) -> MilvusStore:
        vectors = np.asarray(vectors, dtype=np.float32).reshape(-1, self.dim)
        if not len(ids):
            return self
        self.ensure_collection()
        for i in range(0, len(ids), BATCH):
            rows = [{"id": cid, "vec": v.tolist()} for cid, v in zip(ids[i : i + BATCH], vectors[i : i + BATCH])]
            self._call("upsert", self.spec.collection, data=rows)  # upsert: a journaled id written again is replaced
        self._flush_lite()
        return self

    def delete(self, ids: Collection[str]) -> MilvusStore:
        ids = list(ids)
        if not ids or not self._has_collection():
            return self
        for i in range(0, len(ids), BATCH):
            self._call("delete", self.spec.collection, ids=ids[i : i + BATCH])
        self._flush_lite()
        return self

    def search(self, queries: np.ndarray, k: int, exclude: Collection[str] = ()) -> list[Hits]:
        q = np.asarray(queries, dtype=np.float32).reshape(-1, self.dim)
        if k <= 0 or len(q) == 0:
            return [[] for _ in range(len(q))]
        if not self._has_collection():
            # every store is created with its collection (new_store), so a missing one went behind
            # the KB's back: empty hits would read as "nothing relevant", which is a wrong answer
            raise KBCorruptError(
                f"{self.spec.label()} has no collection {self.spec.collection} (dropped?); "
                f"`logicroute check --repair --kb {self.kb_path}` rebuilds it from the KB's committed chunks"
            )
        # The exclusion is a filter inside Milvus, so k new rows come back in one search.
        flt = f"id not in {json.dumps(sorted(exclude))}" if exclude else ""
        res = self._call(
            "search",
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

    def _call(self, method: str, *args, reload: bool = True, **kwargs):
        """client.method(*args, **kwargs) against a server that may have gone away: unreachable
        is StoreUnavailableError; "collection not loaded" (a restarted server holds it released)
        loads it and calls once more. Milvus Lite, in-process, is called as it is."""
        fn = getattr(self.client(), method)
        if not self.spec.is_server:
            return fn(*args, **kwargs)
        try:
            try:
                return fn(*args, timeout=CALL_TIMEOUT_S, **kwargs)
            except Exception as e:
                if not (reload and "not loaded" in str(e)):
                    raise
                self._loaded = False
                if not self._has_collection():
                    raise
                return fn(*args, timeout=CALL_TIMEOUT_S, **kwargs)
        except KBError:  # said already, by the reload above
            raise
        except Exception as e:
            if _unreachable(e):
                self._loaded = False  # a server that comes back may hold the collection released
                raise StoreUnavailableError(f"cannot reach Milvus at {self.uri} ({_first_line(e)})") from e
            raise

    def exists(self) -> bool:
        """Whether this KB's collection is there (`check` names a missing one)."""
        return bool(self._call("has_collection", self.spec.collection, reload=False))

    # -- beyond the protocol ----------------------------------------------------------------
    def all_ids(self) -> set[str]:
        """Every id in the collection (for `check` and `repair`; O(rows), paged)."""
        if not self._has_collection():
            return set()
        out: set[str] = set()
        with _quiet("grpc._server", "pymilvus"):
            it = self._call("query_iterator", self.spec.collection, batch_size=BATCH, filter="", output_fields=["id"])
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


def _unreachable(e: BaseException) -> bool:
    """Whether a pymilvus (or gRPC) error says the server is not there, rather than that a
    request was wrong: those are the faults a later call may not meet."""
    if getattr(e, "code", None) == CONNECT_FAILED:
        return True
    text = str(e).lower()
    return any(w in text for w in _UNREACHABLE)


def _first_line(e: BaseException) -> str:
    text = getattr(e, "message", None) or str(e)  # pymilvus' str() wraps its message in <MilvusException: (code=...)>
    return (str(text).strip().splitlines() or [type(e).__name__])[0]
