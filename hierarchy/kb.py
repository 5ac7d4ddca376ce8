"""The chunk level of the knowledge base: chunks, their vectors and a faiss index, on disk.

Layout of a KB directory:
  manifest.json   format version, embedder {id, dim, model}, chunking params, counts,
                  build cost, timestamps, and a fingerprint (bytes, sha1) of each data file
  chunks.jsonl    one Chunk per line, in row order
  vectors.npy     float32 (n_chunks, dim), row i <-> line i of chunks.jsonl
  index.faiss     faiss IndexFlatIP over the vectors (exact inner product = cosine)
  layers/         optional summary layers (hierarchy.layers), kept in step after add/delete

Crash safety: each file is written atomically, and the manifest is written LAST: it is the
commit point. Before a change overwrites the data files their current versions are hard-linked
to `<name>.prev`; the manifest's fingerprints say which version is committed. If a change dies
between the data files and the manifest, `open` finds the `.prev` files that match the
manifest and restores them, so the KB comes back at its previous state.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, Iterable, Sequence

import numpy as np

from engine.errors import EmbedderMismatchError, KBCorruptError, KBError, KBNotFoundError
from engine.io import TMP_SUFFIX, atomic_write_bytes, atomic_write_json
from engine.types import RetrievedChunk
from hierarchy.chunking import DEFAULT_CHUNK_WORDS, DEFAULT_OVERLAP_WORDS, check_params, chunk_document, chunk_embed_text
from hierarchy.documents import Chunk, Document

if TYPE_CHECKING:  # pragma: no cover
    from engine.embedder import Embedder

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
CHUNKS = "chunks.jsonl"
VECTORS = "vectors.npy"
INDEX = "index.faiss"
DATA_FILES = (CHUNKS, VECTORS, INDEX)
PREV = ".prev"
REBUILD_HINT = "rebuild it with `logicroute index --rebuild`"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@contextmanager
def _dir_lock(path: Path):
    """Exclusive advisory lock on `path/.lock` while a change is written (POSIX; elsewhere a no-op)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(path / ".lock", "a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _fingerprint(data: bytes) -> dict:
    return {"bytes": len(data), "sha1": hashlib.sha1(data).hexdigest()}


def _flat_index(vectors: np.ndarray, dim: int):
    import faiss

    index = faiss.IndexFlatIP(dim)
    if len(vectors):
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


def _serialize_index(index) -> bytes:
    import faiss

    return faiss.serialize_index(index).tobytes()


def _npy_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a, dtype=np.float32), allow_pickle=False)
    return buf.getvalue()


def _chunks_bytes(chunks: Sequence[Chunk]) -> bytes:
    return "".join(json.dumps(c.to_dict(), ensure_ascii=False) + "\n" for c in chunks).encode("utf-8")


class KnowledgeBase:
    """Chunks + vectors + exact faiss index in a directory. See the module docstring."""

    def __init__(self, path: Path, embedder: Any, manifest: dict, chunks: list[Chunk], vectors: np.ndarray, index):
        # Use KnowledgeBase.create / KnowledgeBase.open.
        self.path = Path(path)
        self.embedder = embedder
        self.manifest = manifest
        self._set_state(chunks, vectors, index)

    # -- in-memory state --------------------------------------------------------------------
    def _set_state(self, chunks: list[Chunk], vectors: np.ndarray, index) -> None:
        self.chunk_ids: list[str] = [c.id for c in chunks]
        self.chunks: dict[str, Chunk] = {c.id: c for c in chunks}
        self.vectors: np.ndarray = vectors
        self.index = index
        self._row: dict[str, int] = {cid: i for i, cid in enumerate(self.chunk_ids)}
        self._doc_chunks: dict[str, list[str]] = {}
        for c in chunks:
            self._doc_chunks.setdefault(c.doc_id, []).append(c.id)

    def __len__(self) -> int:
        return len(self.chunk_ids)

    def __repr__(self) -> str:
        return f"KnowledgeBase({str(self.path)!r}, chunks={len(self)}, documents={len(self._doc_chunks)})"

    @property
    def doc_ids(self) -> list[str]:
        return list(self._doc_chunks)

    def chunks_of(self, doc_id: str) -> list[Chunk]:
        """The chunks of one document, in position order."""
        return sorted((self.chunks[c] for c in self._doc_chunks.get(doc_id, ())), key=lambda c: c.position)

    def row_of(self, chunk_id: str) -> int:
        """Row of a chunk in `vectors` / the index (KeyError if absent)."""
        return self._row[chunk_id]

    def vectors_of(self, chunk_ids: Sequence[str]) -> np.ndarray:
        return self.vectors[[self._row[c] for c in chunk_ids]] if chunk_ids else np.zeros((0, self.dim), np.float32)

    @property
    def dim(self) -> int:
        return int(self.manifest["embedder"]["dim"])

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
    ) -> "KnowledgeBase":
        """An empty KB at `path`. An existing KB there is an error unless overwrite=True
        (then its files and summary layers are removed; other files in the folder are left)."""
        check_params(chunk_words, overlap_words)
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise KBError(f"cannot create a knowledge base at {path}: it is a file")
        if (path / MANIFEST).exists():
            if not overwrite:
                raise KBError(f"a knowledge base already exists at {path} (use overwrite / `logicroute index --rebuild`)")
            # Manifest first: a crash mid-cleanup leaves "no KB", never a half-old one.
            for name in (MANIFEST, *DATA_FILES, *(n + PREV for n in DATA_FILES)):
                try:
                    (path / name).unlink()
                except FileNotFoundError:
                    pass
            shutil.rmtree(path / "layers", ignore_errors=True)
        if embedder is None:
            from engine.embedder import get_embedder

            embedder = get_embedder()
        dim = int(embedder.dim)
        now = _now()
        manifest = {
            "format_version": FORMAT_VERSION,
            "embedder": {"id": embedder.id, "dim": dim, "model": getattr(embedder, "spec", None)},
            "chunking": {"chunk_words": int(chunk_words), "overlap_words": int(overlap_words), "embed_text": "title+text"},
            "index": {"type": "faiss.IndexFlatIP", "metric": "inner_product"},
            "counts": {"documents": 0, "chunks": 0},
            "build": {"seconds": 0.0, "embed_seconds": 0.0, "chunks_embedded": 0},
            "created": now,
            "updated": now,
            "files": {},
        }
        vectors = np.zeros((0, dim), dtype=np.float32)
        kb = cls(path, embedder, manifest, [], vectors, _flat_index(vectors, dim))
        kb._commit([], vectors, kb.index)
        return kb

    @classmethod
    def open(cls, path: str | os.PathLike, embedder: "Embedder | None" = None) -> "KnowledgeBase":
        path = Path(path)
        mpath = path / MANIFEST
        if not mpath.is_file():
            what = "no knowledge base" if not path.exists() else "no knowledge base (no manifest.json)"
            raise KBNotFoundError(f"{what} at {path}: build one with `logicroute index SOURCE --kb {path}`")
        try:
            manifest = json.loads(mpath.read_text(encoding="utf-8"))
            if not isinstance(manifest, dict):
                raise ValueError("not a JSON object")
            version = manifest["format_version"]
            emb_id, dim = str(manifest["embedder"]["id"]), int(manifest["embedder"]["dim"])
            n_chunks = int(manifest["counts"]["chunks"])
            n_docs = int(manifest["counts"]["documents"])
            files = manifest["files"]
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
            raise KBCorruptError(f"knowledge base manifest {mpath} is unreadable ({e}); {REBUILD_HINT}") from e
        if version != FORMAT_VERSION:
            raise KBCorruptError(f"knowledge base {path} has format_version {version}, this version reads {FORMAT_VERSION}; {REBUILD_HINT}")

        if embedder is None:
            from engine.embedder import get_embedder

            embedder = get_embedder(manifest["embedder"].get("model"))
        if embedder.id != emb_id or int(embedder.dim) != dim:
            raise EmbedderMismatchError(
                f"knowledge base {path} was built with embedder {emb_id!r} (dim {dim}), "
                f"not {embedder.id!r} (dim {embedder.dim}); open it with that embedder or {REBUILD_HINT}"
            )

        data = {name: cls._read_committed(path, name, files.get(name)) for name in DATA_FILES}

        chunks: list[Chunk] = []
        for ln, line in enumerate(data[CHUNKS].decode("utf-8", "replace").splitlines(), 1):
            if not line.strip():
                continue
            try:
                chunks.append(Chunk.from_dict(json.loads(line)))
            except (ValueError, KeyError, TypeError) as e:
                raise KBCorruptError(f"{path / CHUNKS} line {ln} is malformed ({e}); {REBUILD_HINT}") from e
        try:
            vectors = np.load(io.BytesIO(data[VECTORS]), allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise KBCorruptError(f"{path / VECTORS} is unreadable ({e}); {REBUILD_HINT}") from e
        try:
            import faiss

            index = faiss.deserialize_index(np.frombuffer(data[INDEX], dtype=np.uint8))
        except Exception as e:  # noqa: BLE001 - faiss raises RuntimeError with C++ text
            raise KBCorruptError(f"{path / INDEX} is unreadable ({e}); {REBUILD_HINT}") from e

        counts = {
            "chunks.jsonl lines": len(chunks),
            "vectors.npy rows": int(vectors.shape[0]) if vectors.ndim == 2 else -1,
            "index.faiss vectors": int(index.ntotal),
        }
        bad = {k: v for k, v in counts.items() if v != n_chunks}
        if bad or vectors.ndim != 2 or vectors.shape[1] != dim or index.d != dim or vectors.dtype != np.float32:
            raise KBCorruptError(
                f"knowledge base {path} is inconsistent: manifest says {n_chunks} chunks of dim {dim}, files have "
                + ", ".join(f"{k}={v}" for k, v in counts.items())
                + f", vectors {vectors.dtype} {tuple(vectors.shape)}, index dim {index.d}; {REBUILD_HINT}"
            )
        if len({c.id for c in chunks}) != len(chunks):
            raise KBCorruptError(f"{path / CHUNKS} has duplicate chunk ids; {REBUILD_HINT}")
        kb = cls(path, embedder, manifest, chunks, vectors, index)
        if len(kb._doc_chunks) != n_docs:
            raise KBCorruptError(
                f"knowledge base {path} is inconsistent: manifest says {n_docs} documents, chunks.jsonl has {len(kb._doc_chunks)}; {REBUILD_HINT}"
            )
        return kb

    @staticmethod
    def _read_committed(path: Path, name: str, fp: dict | None) -> bytes:
        """The committed version of a data file: the current one if it matches the manifest's
        fingerprint, else a matching `.prev` left by an interrupted change (restored in place)."""
        cur, prev = path / name, path / (name + PREV)
        if not isinstance(fp, dict):
            raise KBCorruptError(f"knowledge base manifest {path / MANIFEST} has no fingerprint for {name}; {REBUILD_HINT}")
        data = cur.read_bytes() if cur.is_file() else None
        if data is not None and _fingerprint(data) == fp:
            if prev.exists():  # a change committed but died before cleaning up
                try:
                    prev.unlink()
                except OSError:
                    pass
            return data
        old = prev.read_bytes() if prev.is_file() else None
        if old is not None and _fingerprint(old) == fp:
            try:  # roll the interrupted change back
                os.replace(prev, cur)
            except OSError:
                pass  # read-only KB: still usable from the .prev file
            return old
        state = "is missing" if data is None else "does not match the manifest (changed or partly written)"
        raise KBCorruptError(f"knowledge base file {cur} {state}; {REBUILD_HINT}")

    # -- writing ----------------------------------------------------------------------------
    def _commit(self, chunks: list[Chunk], vectors: np.ndarray, index, *, stats: dict | None = None) -> None:
        """Write data files then the manifest; on any failure roll the files back and re-raise
        (in-memory state is only replaced after the manifest is written)."""
        payload = {CHUNKS: _chunks_bytes(chunks), VECTORS: _npy_bytes(vectors), INDEX: _serialize_index(index)}
        manifest = json.loads(json.dumps(self.manifest))  # deep copy; self.manifest changes only on success
        n_docs = len({c.doc_id for c in chunks})
        manifest["counts"] = {"documents": n_docs, "chunks": len(chunks)}
        manifest["files"] = {name: _fingerprint(b) for name, b in payload.items()}
        manifest["updated"] = _now()
        if stats:
            # Build cost accumulates over every add/delete of this KB.
            b = manifest.setdefault("build", {})
            b["seconds"] = round(b.get("seconds", 0.0) + stats.get("seconds", 0.0), 3)
            b["embed_seconds"] = round(b.get("embed_seconds", 0.0) + stats.get("embed_seconds", 0.0), 3)
            b["chunks_embedded"] = int(b.get("chunks_embedded", 0) + stats.get("chunks_embedded", 0))
        self.path.mkdir(parents=True, exist_ok=True)
        with _dir_lock(self.path):
            # Another process may have changed the KB since we read it: never overwrite that.
            if (self._on_disk_files() or {}) != (self.manifest.get("files") or {}):
                raise KBError(f"knowledge base {self.path} was changed by another process since it was opened; open it again and retry")
            for name in DATA_FILES:  # a failed rollback left snapshots: restore them first
                if (self.path / (name + PREV)).exists() and name in self.manifest.get("files", {}):
                    self._read_committed(self.path, name, self.manifest["files"][name])
            for name in (MANIFEST, *DATA_FILES):  # temp files of a writer that died
                for t in self.path.glob(f".{name}.*{TMP_SUFFIX}"):
                    try:
                        t.unlink()
                    except OSError:
                        pass
            linked: list[str] = []
            try:
                for name in DATA_FILES:
                    cur, prev = self.path / name, self.path / (name + PREV)
                    if cur.exists():
                        try:
                            prev.unlink()
                        except FileNotFoundError:
                            pass
                        try:
                            os.link(cur, prev)  # cheap snapshot: the atomic replace below gives `cur` a new inode
                        except OSError:
                            shutil.copy2(cur, prev)
                        linked.append(name)
                for name in DATA_FILES:
                    atomic_write_bytes(self.path / name, payload[name])
                atomic_write_json(self.path / MANIFEST, manifest)  # the commit point
            except BaseException:
                if self._on_disk_files() == manifest["files"]:
                    # Interrupted after the manifest landed: the change is committed, keep it.
                    self.manifest = manifest
                    self._set_state(chunks, vectors, index)
                else:
                    self._rollback(linked)
                raise
            for name in linked:
                try:
                    (self.path / (name + PREV)).unlink()
                except OSError:
                    pass
            self.manifest = manifest
            self._set_state(chunks, vectors, index)

    def _on_disk_files(self) -> dict | None:
        try:
            return json.loads((self.path / MANIFEST).read_text(encoding="utf-8")).get("files")
        except (OSError, ValueError, AttributeError):
            return None

    def _rollback(self, linked: list[str]) -> None:
        """Put the `.prev` snapshots back (best effort; `open` repeats this if we die here)."""
        for name in linked:
            try:
                os.replace(self.path / (name + PREV), self.path / name)
            except OSError:
                pass

    def save_manifest(self) -> None:
        """Persist changes other modules made to `self.manifest` (e.g. layer metadata)."""
        with _dir_lock(self.path):
            atomic_write_json(self.path / MANIFEST, self.manifest)

    # -- add / delete -----------------------------------------------------------------------
    def add(self, docs: Iterable[Document], show_progress: bool = True) -> dict:
        """Chunk and index documents. Chunks already present are skipped (dedupe by content
        id) and only new chunks are embedded. A document id already present is replaced: its
        chunks that are not in the new version are removed.

        Returns {added_chunks, duplicate_chunks, removed_chunks, documents, seconds, embed_seconds}."""
        t0 = time.perf_counter()
        cw = int(self.manifest["chunking"]["chunk_words"])
        ow = int(self.manifest["chunking"]["overlap_words"])
        # Last version of each doc id wins.
        by_id: dict[str, Document] = {}
        for d in docs:
            by_id.pop(d.id, None)
            by_id[d.id] = d

        chunked = [(doc, chunk_document(doc, cw, ow)) for doc in by_id.values()]
        # Pass 1: chunks of replaced documents that their new version no longer has.
        removed: set[str] = set()
        for doc, cs in chunked:
            old = self._doc_chunks.get(doc.id)
            if old is not None:
                ids = {c.id for c in cs}
                removed.update(c for c in old if c not in ids)
        # Pass 2: new chunks vs duplicates (already in the KB and staying, or earlier in this call).
        new_chunks: list[Chunk] = []
        new_ids: set[str] = set()
        updated: dict[str, Chunk] = {}  # kept chunks whose position in their document changed
        duplicates = 0
        for doc, cs in chunked:
            for c in cs:
                have = self.chunks.get(c.id)
                if c.id in new_ids or (have is not None and c.id not in removed):
                    duplicates += 1
                    if have is not None and have.doc_id == doc.id and have.position != c.position:
                        updated[c.id] = c
                    continue
                new_chunks.append(c)
                new_ids.add(c.id)
        # A chunk dropped by one document but produced by another keeps its vector.
        reuse = {c.id for c in new_chunks if c.id in removed}

        embed_seconds = 0.0
        to_embed = [c for c in new_chunks if c.id not in reuse]
        if to_embed:
            t1 = time.perf_counter()
            vecs = self._embed([chunk_embed_text(c) for c in to_embed], show_progress)
            embed_seconds = time.perf_counter() - t1
        else:
            vecs = np.zeros((0, self.dim), np.float32)
        emb_rows = {c.id: i for i, c in enumerate(to_embed)}
        if new_chunks:
            new_vecs = np.stack(
                [vecs[emb_rows[c.id]] if c.id in emb_rows else self.vectors[self._row[c.id]] for c in new_chunks]
            ).astype(np.float32, copy=False)
        else:
            new_vecs = np.zeros((0, self.dim), np.float32)

        stats = {"seconds": 0.0, "embed_seconds": embed_seconds, "chunks_embedded": len(to_embed)}
        if new_chunks or removed or updated:
            keep_rows = [i for i, cid in enumerate(self.chunk_ids) if cid not in removed]
            kept = [updated.get(self.chunk_ids[i], self.chunks[self.chunk_ids[i]]) for i in keep_rows]
            chunks = kept + new_chunks
            if removed:
                vectors = np.concatenate([self.vectors[keep_rows], new_vecs]) if len(keep_rows) else new_vecs
                index = _flat_index(vectors, self.dim)
            else:
                vectors = np.concatenate([self.vectors, new_vecs])
                # Appending to a copy: self.index stays valid if the commit fails.
                index = self._appended_index(new_vecs)
            stats["seconds"] = time.perf_counter() - t0
            self._commit(chunks, vectors, index, stats=stats)
        seconds = time.perf_counter() - t0
        result = {
            "added_chunks": len(new_chunks),
            "duplicate_chunks": duplicates,
            "removed_chunks": len(removed - new_ids),
            "documents": len(by_id),
            "seconds": round(seconds, 3),
            "embed_seconds": round(embed_seconds, 3),
        }
        if new_chunks or removed:
            self._notify_layers([c.id for c in new_chunks if c.id not in removed], sorted(removed - new_ids))
        return result

    def _appended_index(self, new_vecs: np.ndarray):
        import faiss

        index = faiss.clone_index(self.index)
        if len(new_vecs):
            index.add(np.ascontiguousarray(new_vecs, dtype=np.float32))
        return index

    def _embed(self, texts: list[str], show_progress: bool) -> np.ndarray:
        try:
            v = self.embedder.encode(texts, show_progress=show_progress)
        except TypeError:  # a minimal embedder without show_progress
            v = self.embedder.encode(texts)
        v = np.asarray(v, dtype=np.float32)
        if v.shape != (len(texts), self.dim):
            raise KBError(f"embedder {self.embedder.id!r} returned shape {v.shape}, expected {(len(texts), self.dim)}")
        return v

    def delete(self, doc_ids: Iterable[str] | str) -> int:
        """Remove the chunks of these documents (unknown ids are ignored). Returns chunks removed."""
        if isinstance(doc_ids, str):
            doc_ids = [doc_ids]
        removed = {cid for d in set(doc_ids) for cid in self._doc_chunks.get(d, ())}
        if not removed:
            return 0
        t0 = time.perf_counter()
        keep_rows = [i for i, cid in enumerate(self.chunk_ids) if cid not in removed]
        chunks = [self.chunks[self.chunk_ids[i]] for i in keep_rows]
        vectors = self.vectors[keep_rows] if keep_rows else np.zeros((0, self.dim), np.float32)
        # Flat index: rebuilding from the kept vectors is a memcpy, cheaper than remove_ids.
        index = _flat_index(vectors, self.dim)
        self._commit(chunks, vectors, index, stats={"seconds": time.perf_counter() - t0})
        self._notify_layers([], sorted(removed))
        return len(removed)

    def _notify_layers(self, added_ids: list[str], removed_ids: list[str]) -> None:
        if not (self.path / "layers").exists():
            return
        # hierarchy.layers (summary layers) is owned by the summary route. Until that module
        # exists, there is nothing to update; any other import failure is a real bug and raises.
        import importlib

        try:
            layers = importlib.import_module("hierarchy.layers")
        except ModuleNotFoundError as e:
            if e.name == "hierarchy.layers":
                return
            raise
        layers.update_after_change(self, added_ids, removed_ids)

    # -- search -----------------------------------------------------------------------------
    def _query_matrix(self, queries: "str | np.ndarray | Sequence[str]") -> np.ndarray:
        if isinstance(queries, str):
            queries = [queries]
        if isinstance(queries, np.ndarray):
            q = queries.astype(np.float32, copy=False)
        else:
            q = np.asarray(self.embedder.encode(list(queries)), dtype=np.float32)
        q = np.ascontiguousarray(q.reshape(-1, self.dim))
        return q

    def _hit(self, row: int, score: float) -> RetrievedChunk:
        c = self.chunks[self.chunk_ids[row]]
        return RetrievedChunk(chunk_id=c.id, doc_id=c.doc_id, title=c.title, text=c.text, score=float(score))

    def search(self, query: str | np.ndarray, k: int = 3, exclude: Collection[str] = ()) -> list[RetrievedChunk]:
        """Top-k chunks by cosine similarity, never returning a chunk id in `exclude`
        (sampling without replacement: the window widens so k new chunks still come back)."""
        n = len(self)
        if k <= 0 or n == 0:
            return []
        q = self._query_matrix(query)[:1]
        excl = set(exclude)
        window = min(n, k + sum(1 for c in excl if c in self._row))
        while True:
            scores, rows = self.index.search(q, window)
            out = [self._hit(int(r), s) for s, r in zip(scores[0], rows[0]) if r >= 0 and self.chunk_ids[r] not in excl]
            if len(out) >= k or window >= n:
                return sorted(out, key=lambda h: -h.score)[:k]
            window = min(n, window * 2)

    def search_batch(self, queries: Sequence[str] | np.ndarray, k: int = 3) -> list[list[RetrievedChunk]]:
        """Top-k for many queries with one embedding call and one index search."""
        if len(queries) == 0:
            return []
        q = self._query_matrix(queries)
        if k <= 0 or len(self) == 0:
            return [[] for _ in range(len(q))]
        scores, rows = self.index.search(q, min(k, len(self)))
        return [[self._hit(int(r), s) for s, r in zip(sr, rr) if r >= 0] for sr, rr in zip(scores, rows)]
