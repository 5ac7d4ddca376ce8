"""The chunk level of the knowledge base: chunks, their vectors and a vector store, on disk.

Layout of a KB directory:
  manifest.json   format version, embedder {id, dim, model}, chunking params, the vector store
                  ("store": faiss, faiss-hnsw or milvus + where), counts, build cost,
                  timestamps, the segments in order, and a fingerprint (bytes, sha1) of each data file
  seg-N.*         append-only segments (hierarchy.kb_segments): the chunks, vectors and lexical
                  postings a commit added, the chunk ids it deleted; replayed in order they give the KB
  index.faiss     an HNSW graph (faiss-hnsw past its threshold; an exact index is built from the
                  vectors at open; Milvus keeps its rows, in step with commits: hierarchy.kb_stores)
  layers/         optional summary layers (hierarchy.layers), which sit above the KB: they keep
                  their state in their own folder and their summary in the manifest (`annotate`)
A KB of format 1 (chunks.jsonl + vectors.npy + index.faiss) opens as it is; its first change writes segments.

Every change goes through hierarchy.store's commit protocol with the manifest as the commit
record, so a change that dies half-way leaves the KB at its previous state. hierarchy.kb_manifest
writes and checks the manifest, hierarchy.kb_segments lays out the data files.
A change that spans the chunks and the layers above them runs inside `writing()`: one writer
lock from reading the committed state to the last commit, so writers take turns. Every search
goes through the vector store (hierarchy.vector_store), the lexical postings or both, fused
(hierarchy.retrieval, hierarchy.kb_retrieval); `vectors` stays for the summary layers.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.floor.base.errors import KBEmptyError, KBError
from hierarchy import kb_retrieval, store
from hierarchy.chunking import (
    DEFAULT_CHUNK_WORDS,
    DEFAULT_OVERLAP_WORDS,
    check_params,
    chunk_document,
)
from hierarchy.documents import Chunk, Document
from hierarchy.kb_files import repair_hint
from hierarchy.kb_intake import take_in
from hierarchy.kb_manifest import MANIFEST, OWN_ENTRIES, check_embedder, load_committed, new_manifest, next_manifest
from hierarchy.kb_plan import apply_add, plan_add, vectors_for
from hierarchy.kb_retrieval import Searching
from hierarchy.kb_segments import Delta, plan_commit, prune
from hierarchy.kb_stores import move_store, remove_kb, settle_journal, shared_store_change
from hierarchy.lexical import LexicalIndex, Postings
from hierarchy.retrieval import Reranker, RetrievalConfig, check_mode
from hierarchy.vector_store.base import StoreSpec, VectorStore, default_store, parse_store
from hierarchy.vector_store.open import new_store, with_collection

if TYPE_CHECKING:  # pragma: no cover
    from engine.floor.embedder import Embedder

LAYERS_DIR = "layers"  # the summary layers' folder: removed with the KB it summarizes


class KnowledgeBase(Searching):
    """Chunks + vectors + a vector store, in a directory. See the module docstring; searching is
    hierarchy.kb_retrieval.Searching's."""

    def __init__(
        self,
        path: Path,
        embedder: Any,
        manifest: dict,
        chunks: list[Chunk],
        vectors: np.ndarray,
        vstore: VectorStore,
        postings: dict[int, Postings] | None = None,
    ):
        # Use KnowledgeBase.create / KnowledgeBase.open.
        self.path = Path(path)
        self.embedder = embedder
        self.manifest = manifest
        self.reranker: Reranker | None = None  # rescores the fused candidates (hierarchy.retrieval); none by default
        self._retrieval: str | None = None  # this object's retrieval, over the manifest's (use_retrieval)
        self._fusion: RetrievalConfig | None = None
        self._lexical_lock = threading.Lock()
        self._set_state(chunks, vectors, vstore, postings)

    # -- in-memory state --------------------------------------------------------------------
    def _set_state(
        self, chunks: list[Chunk], vectors: np.ndarray, vstore: VectorStore, postings: dict[int, Postings] | None
    ) -> None:
        self.chunk_ids: list[str] = [c.id for c in chunks]
        self.chunks: dict[str, Chunk] = {c.id: c for c in chunks}
        self.vectors: np.ndarray = vectors
        self.store: VectorStore = vstore  # the one way to search the vectors (hierarchy.vector_store)
        self._row: dict[str, int] = {cid: i for i, cid in enumerate(self.chunk_ids)}
        self._doc_chunks: dict[str, list[str]] = {}
        for c in chunks:
            self._doc_chunks.setdefault(c.doc_id, []).append(c.id)
        self.postings = postings  # segment number -> its rows' lexical postings; None: no lexical index
        self._lexical: LexicalIndex | None = None  # built from them by the first lexical search

    def __repr__(self) -> str:
        return f"KnowledgeBase({str(self.path)!r}, chunks={len(self)}, documents={len(self._doc_chunks)})"

    @property
    def index(self):
        """The faiss index of a faiss store (benchmarks time it bare); searching goes through `store`."""
        if self.store.spec.shared:
            raise AttributeError(f"the knowledge base at {self.path} keeps its vectors in {self.store.spec.label()}")
        return self.store.index  # type: ignore[attr-defined]  # FaissStore's

    @property
    def doc_ids(self) -> list[str]:
        return list(self._doc_chunks)

    def chunks_of(self, doc_id: str) -> list[Chunk]:
        """The chunks of one document, in position order."""
        return sorted((self.chunks[c] for c in self._doc_chunks.get(doc_id, ())), key=lambda c: c.position)

    @property
    def dim(self) -> int:
        return int(self.manifest["embedder"]["dim"])

    def require_chunks(self) -> None:
        """KBEmptyError unless the KB holds chunks: what opening a KB for answering calls, so a
        question is never answered from nothing."""
        if not self.chunk_ids:
            raise KBEmptyError(
                f"the knowledge base at {self.path} is empty (no chunks): add documents with "
                f"`logicroute index SOURCES --kb {self.path}`"
            )

    # -- create / open ----------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: str | os.PathLike,
        embedder: "Embedder | None" = None,
        *,
        chunk_words: int = DEFAULT_CHUNK_WORDS,
        overlap_words: int = DEFAULT_OVERLAP_WORDS,
        overwrite: bool = False,
        store: "StoreSpec | str | None" = None,
        retrieval: str | None = None,
    ) -> "KnowledgeBase":
        """An empty KB at `path`; an existing one is an error unless overwrite=True (its files,
        layers and Milvus collection go; other files stay). store: where the vectors go
        (`--store`: faiss-hnsw, the default: exact up to 20k vectors, HNSW above; faiss: exact at every
        size; milvus[://PATH.db|HOST:PORT]), kept in the manifest. retrieval: what its searches
        do (`--retrieval`; default hybrid: hierarchy.retrieval), kept in the manifest too."""
        check_params(chunk_words, overlap_words)
        path = Path(path)
        spec = parse_store(store) if isinstance(store, str) else (store or default_store())
        cfg = RetrievalConfig(mode=check_mode(retrieval)) if retrieval else RetrievalConfig()
        return cls._create(path, embedder, chunk_words, overlap_words, overwrite, with_collection(spec), cfg)

    @classmethod
    def _create(
        cls,
        path: Path,
        embedder: "Embedder | None",
        chunk_words: int,
        overlap_words: int,
        overwrite: bool,
        spec: StoreSpec,
        retrieval: RetrievalConfig,
    ) -> "KnowledgeBase":
        # Locked here, not in create: its `store` parameter hides the hierarchy.store module.
        with store.dir_lock(path):
            if (path / MANIFEST).exists():
                if not overwrite:
                    raise KBError(
                        f"a knowledge base already exists at {path} "
                        "(KnowledgeBase.create(..., overwrite=True) replaces it)"
                    )
                remove_kb(path, path / LAYERS_DIR)
            if embedder is None:
                from engine.floor.embedder import get_embedder

                embedder = get_embedder()
            manifest = new_manifest(embedder, chunk_words, overlap_words, spec)
            dim = manifest["embedder"]["dim"]
            vectors = np.zeros((0, dim), dtype=np.float32)
            kb = cls(path, embedder, manifest, [], vectors, new_store(spec, path, dim, [], vectors), {})
            kb._commit([], vectors, kb.store, retrieval=retrieval)
            return kb

    @staticmethod
    def exists(path: str | os.PathLike) -> bool:
        """Whether a committed knowledge base lives at `path`."""
        return (Path(path) / MANIFEST).is_file()

    @classmethod
    def open_or_create(
        cls, path: str | os.PathLike, embedder: "Embedder | None" = None, **create_options
    ) -> "KnowledgeBase":
        """Open the KB at `path`, or create an empty one there (create_options: chunking, store)."""
        if cls.exists(path):
            return cls.open(path, embedder)
        return cls.create(path, embedder, **create_options)

    @classmethod
    def open(cls, path: str | os.PathLike, embedder: "Embedder | None" = None) -> "KnowledgeBase":
        """The last committed state of the KB at `path`. Reading takes no lock and writes no file."""
        path = Path(path)
        manifest, chunks, vectors, vstore, postings = load_committed(path)
        if embedder is None:
            from engine.floor.embedder import get_embedder

            embedder = get_embedder(manifest.data["embedder"].get("model"))
        check_embedder(manifest, embedder)
        return cls(path, embedder, manifest.data, chunks, vectors, vstore, postings)

    # -- write transactions -----------------------------------------------------------------
    @contextmanager
    def writing(self) -> Iterator["KnowledgeBase"]:
        """One write transaction: the writer lock is held throughout, and this object first takes
        up the state last committed (another process may have written since it was opened), so
        every change inside is computed from, and commits over, the state on disk."""
        with store.dir_lock(self.path):
            self._refresh()
            settle_journal(self)  # rows a writer that died left in a shared store go first
            yield self

    def _refresh(self) -> None:
        """Take up the committed state when the manifest on disk is not the one this object holds."""
        if store.committed_record(self.path / MANIFEST) == store.as_json(self.manifest):
            return
        manifest, chunks, vectors, vstore, postings = load_committed(self.path)
        check_embedder(manifest, self.embedder)
        self.manifest = manifest.data
        self._set_state(chunks, vectors, vstore, postings)

    # -- writing ----------------------------------------------------------------------------
    def _commit(
        self,
        chunks: list[Chunk],
        vectors: np.ndarray,
        vstore: VectorStore,
        *,
        stats: dict | None = None,
        delta: Delta | None = None,
        retrieval: RetrievalConfig | None = None,
    ) -> None:
        """Write data files then the manifest through hierarchy.store; the in-memory state becomes
        `chunks`/`vectors` once it lands. `delta`: the change, written as one new segment (without
        it, when compaction is due, or while the KB has no lexical index, the whole KB is written
        as one). retrieval: the config the manifest records from now on."""
        postings_of = lambda cs, whole: kb_retrieval.postings_of(self, cs, whole)  # noqa: E731
        segments, payload, made = plan_commit(self.manifest, chunks, vectors, delta, postings_of)
        payload.update(vstore.persist())
        manifest = next_manifest(self.manifest, chunks, payload, stats, vstore, segments)
        manifest["retrieval"] = (retrieval or self.retrieval_config).to_dict()
        old = self.postings or {}  # a commit that keeps segments keeps their postings (plan_commit)
        postings = {**{s.number: old[s.number] for s in segments if s.rows and s.number not in made}, **made}

        def adopt() -> None:
            self.manifest = manifest
            self._set_state(chunks, vectors, vstore, postings)
            prune(self.path, manifest["files"])

        store.commit(
            self.path,
            MANIFEST,
            manifest,
            payload,
            on_commit=adopt,
            expected_files=self.manifest.get("files") or {},
            hint=repair_hint(self.path),
        )

    def annotate(self, key: str, value: Any) -> None:
        """Commit `value` as the manifest entry `key`: what a layer above the KB reports about
        itself (the summary layers' state). The data files stay as they are. Refused when the
        manifest on disk is not this object's (another entry or data files changed meanwhile)."""
        if key in OWN_ENTRIES:
            raise KBError(f"manifest entry {key!r} belongs to the knowledge base itself")
        self._record(key, value)

    def _record(self, key: str, value: Any) -> None:
        base = store.as_json(self.manifest)
        manifest = store.as_json(self.manifest)
        manifest[key] = value

        def unchanged() -> None:
            if store.committed_record(self.path / MANIFEST) != base:
                raise store.changed_error(self.path)

        store.commit(
            self.path,
            MANIFEST,
            manifest,
            {},
            on_commit=lambda: setattr(self, "manifest", manifest),
            expected_files=self.manifest.get("files") or {},
            check=unchanged,
            hint=repair_hint(self.path),
        )

    def set_retrieval(self, mode: str | None) -> bool:
        """Record `mode` (dense | lexical | hybrid; None: keep the KB's) as what its searches do
        (`index --retrieval`), giving a KB written before lexical retrieval its lexical index
        (the whole KB written again, as one segment). False when nothing changed."""
        with self.writing():
            old = self.retrieval_config
            cfg = old if mode is None else replace(old, mode=check_mode(mode))
            if self.postings is None:
                self._commit(list(self.chunks.values()), self.vectors, self.store, retrieval=cfg)
                return True
            if self.manifest.get("retrieval") == cfg.to_dict():
                return False
            self._record("retrieval", cfg.to_dict())  # the data files stay as they are
            return True

    # -- add / delete -----------------------------------------------------------------------
    def add(self, docs: Iterable[Document], show_progress: bool = True) -> dict:
        """Chunk and index documents (hierarchy.kb_intake checks them and settles the ids of files
        read from folders). Chunks already present are not embedded again. A document id already
        present is replaced: its chunks that are not in the new version are removed. Summary layers
        are not touched: hierarchy.indexing.add_documents adds and updates them.

        Returns {added_chunks, unchanged_chunks (the document's own, already indexed),
        duplicate_chunks (another document's), removed_chunks, documents, unchanged_documents,
        seconds, embed_seconds}."""
        t0 = time.perf_counter()
        cw = int(self.manifest["chunking"]["chunk_words"])
        ow = int(self.manifest["chunking"]["overlap_words"])
        docs = take_in(docs, self.chunks, self._doc_chunks)
        plan = plan_add(self.chunks, self._doc_chunks, [(doc, chunk_document(doc, cw, ow)) for doc in docs])
        new_chunks, removed, updated = plan.new_chunks, plan.removed, plan.updated
        new_vecs, stats = vectors_for(self, new_chunks, removed, show_progress)
        if new_chunks or removed or updated:
            chunks, vectors, delta = apply_add(
                [self.chunks[c] for c in self.chunk_ids], self.vectors, new_chunks, new_vecs, removed, updated
            )
            new_ids = [c.id for c in new_chunks]
            with shared_store_change(self, new_ids, removed):
                # A file store changes a copy (kept rows, then new: chunk order); self.store stays valid if the
                # commit fails. A shared store takes new rows now, drops removed ones once the commit landed.
                vstore = self.store if self.store.spec.shared else self.store.delete(removed)
                vstore = vstore.add(new_ids, new_vecs)
                stats["seconds"] = time.perf_counter() - t0
                self._commit(chunks, vectors, vstore, stats=stats, delta=delta)
        seconds = time.perf_counter() - t0
        return {
            "added_chunks": len(new_chunks),
            "unchanged_chunks": plan.unchanged,
            "duplicate_chunks": plan.duplicates,
            "removed_chunks": len(removed - {c.id for c in new_chunks}),
            "documents": len(docs),
            "unchanged_documents": plan.unchanged_docs,
            "seconds": round(seconds, 3),
            "embed_seconds": round(stats["embed_seconds"], 3),
        }

    def delete(self, doc_ids: Iterable[str] | str) -> int:
        """Remove the chunks of these documents (unknown ids are ignored). Returns chunks removed.
        Summary layers are not touched: hierarchy.indexing.delete_documents deletes and updates them."""
        if isinstance(doc_ids, str):
            doc_ids = [doc_ids]
        removed = {cid for d in set(doc_ids) for cid in self._doc_chunks.get(d, ())}
        if not removed:
            return 0
        t0 = time.perf_counter()
        keep_rows = [i for i, cid in enumerate(self.chunk_ids) if cid not in removed]
        chunks = [self.chunks[self.chunk_ids[i]] for i in keep_rows]
        vectors = self.vectors[keep_rows] if keep_rows else np.zeros((0, self.dim), np.float32)
        with shared_store_change(self, (), removed):  # a shared store drops the rows after the commit
            vstore = self.store if self.store.spec.shared else self.store.delete(removed)
            delta = Delta([], vectors[:0], frozenset(removed))
            self._commit(chunks, vectors, vstore, stats={"seconds": time.perf_counter() - t0}, delta=delta)
        return len(removed)

    def move_store(self, to: "StoreSpec | str") -> bool:
        """Move the vectors into another store (hierarchy.kb_stores.move_store); False when they are there already."""
        return move_store(self, parse_store(to) if isinstance(to, str) else to)
