"""manifest.json of a knowledge base: what the KB is (format version, embedder {id, dim, model},
chunking params, the vector store that holds its vectors and its index, counts, build cost,
timestamps), its segments (hierarchy.kb_segments) and a fingerprint (bytes, sha1) of each data
file. It is hierarchy.store's commit record: written fresh by create, checked by open, carried
forward by every commit (see hierarchy.kb for the whole layout)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.floor.base.errors import EmbedderMismatchError, KBCorruptError, KBError, KBNotFoundError
from hierarchy import store
from hierarchy.kb_files import INDEX, check_counts, repair_hint
from hierarchy.kb_segments import Segment, read_postings, replay, segment_files, segments_of
from hierarchy.vector_store.base import StoreSpec, default_store
from hierarchy.vector_store.open import open_store

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from engine.floor.embedder import Embedder
    from hierarchy.documents import Chunk
    from hierarchy.lexical import Postings
    from hierarchy.vector_store.base import VectorStore

# 2: segments (hierarchy.kb_segments). 1: one chunks.jsonl + vectors.npy + index.faiss; still read,
# and written as segments by the first change.
FORMAT_VERSION = 2
READS = (1, 2)
MANIFEST = "manifest.json"
# Manifest entries the KB itself keeps; `annotate` may not overwrite them.
OWN_ENTRIES = {
    *("format_version", "embedder", "chunking", "store", "index", "counts", "build", "created", "updated", "files"),
    *("segments", "retrieval"),
}


# A KB whose documents are single passages (a QA set's paragraphs, one guideline cut into
# passages) has no documents to gather a list across: the summary route answers a list question
# there by the descent, and the router's list gate stays off (router.kb_router). On GraphRAG-Bench
# Medical's list questions the global mode did not beat the descent
# (docs/results/global_lists/auto_mode_medical.json).
MIN_CHUNKS_PER_DOCUMENT = 1.5


def single_passage_ratio(manifest: dict | None) -> float | None:
    """The KB's chunks per document when its documents are single passages (fewer than
    MIN_CHUNKS_PER_DOCUMENT), else None (multi-passage documents, or no counts to tell)."""
    counts = (manifest or {}).get("counts") or {}
    if not counts.get("documents"):
        return None
    per_document = counts.get("chunks", 0) / counts["documents"]
    return per_document if per_document < MIN_CHUNKS_PER_DOCUMENT else None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_manifest(embedder: "Embedder", chunk_words: int, overlap_words: int, store: StoreSpec | None = None) -> dict:
    """The manifest of an empty KB embedded by `embedder` (its files are not fingerprinted yet).
    A manifest without "store" (every KB before stores existed) means exact faiss."""
    now = _now()
    return {
        "format_version": FORMAT_VERSION,
        "embedder": {"id": embedder.id, "dim": int(embedder.dim), "model": embedder.spec},
        "chunking": {
            "chunk_words": int(chunk_words),
            "overlap_words": int(overlap_words),
            "embed_text": "title+text",
        },
        "store": (store or default_store()).to_dict(),
        "index": {"type": "faiss.IndexFlatIP", "metric": "inner_product"},
        "counts": {"documents": 0, "chunks": 0},
        "build": {"seconds": 0.0, "embed_seconds": 0.0, "chunks_embedded": 0},
        "created": now,
        "updated": now,
        "segments": [],
        "files": {},
    }


def next_manifest(
    manifest: dict,
    chunks: list["Chunk"],
    payload: dict[str, bytes],
    stats: dict | None,
    vstore: "VectorStore | None",
    segments: list[Segment],
) -> dict:
    """A copy of `manifest` describing `chunks` held by `segments` (their files written now are
    in `payload`, the others carried over) and the vector store `vstore` (its persisted files in
    `payload` too); `stats` (the cost of this change) is added to the build cost."""
    old_files = manifest.get("files") or {}
    manifest = json.loads(json.dumps(manifest))  # deep copy: the caller's stays as it is until commit
    manifest["format_version"] = FORMAT_VERSION
    manifest["segments"] = [s.to_dict() for s in segments]
    kept = {name: old_files[name] for name in segment_files(segments) if name not in payload}
    if vstore is not None:
        manifest["store"] = vstore.spec.to_dict()
        manifest["index"] = vstore.describe()
    n_docs = len({c.doc_id for c in chunks})
    manifest["counts"] = {"documents": n_docs, "chunks": len(chunks)}
    manifest["files"] = {**kept, **{name: store.fingerprint(b) for name, b in payload.items()}}
    manifest["updated"] = _now()
    if stats:
        # Build cost accumulates over every add/delete of this KB.
        b = manifest.setdefault("build", {})
        b["seconds"] = round(b.get("seconds", 0.0) + stats.get("seconds", 0.0), 3)
        b["embed_seconds"] = round(b.get("embed_seconds", 0.0) + stats.get("embed_seconds", 0.0), 3)
        b["chunks_embedded"] = int(b.get("chunks_embedded", 0) + stats.get("chunks_embedded", 0))
    return manifest


@dataclass(frozen=True)
class CommittedManifest:
    """A manifest read from disk, with the entries opening the KB relies on already type-checked."""

    path: Path  # of the KB directory
    data: dict
    embedder_id: str
    dim: int
    n_chunks: int
    n_documents: int
    files: Any  # file name -> fingerprint; read_data_files checks each entry
    store: StoreSpec
    segments: list[Segment]


def read_manifest(path: Path) -> CommittedManifest:
    """The manifest of the KB at `path`: KBNotFoundError without one, KBCorruptError when it is
    unreadable or of another format version."""
    mpath = path / MANIFEST
    if not mpath.is_file():
        what = "no knowledge base" if not path.exists() else "no knowledge base (no manifest.json)"
        raise KBNotFoundError(f"{what} at {path}: build one with `logicroute index SOURCE --kb {path}`")
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
        if not isinstance(manifest, dict):
            raise ValueError("not a JSON object")
        version = manifest["format_version"]
        if isinstance(version, int) and version > FORMAT_VERSION:  # not damage: repair must not touch it
            raise KBError(
                f"knowledge base {path} has format_version {version}, written by a newer logicroute; this one "
                f"reads formats {READS[0]}-{READS[-1]}: upgrade logicroute to open it"
            )
        read = CommittedManifest(
            path=path,
            data=manifest,
            embedder_id=str(manifest["embedder"]["id"]),
            dim=int(manifest["embedder"]["dim"]),
            n_chunks=int(manifest["counts"]["chunks"]),
            n_documents=int(manifest["counts"]["documents"]),
            files=manifest["files"],
            store=StoreSpec.from_dict(manifest.get("store")),
            segments=segments_of(manifest, int(manifest["counts"]["chunks"])),
        )
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, KBCorruptError) as e:
        raise KBCorruptError(f"knowledge base manifest {mpath} is unreadable ({e}); {repair_hint(path)}") from e
    if version not in READS:
        raise KBCorruptError(
            f"knowledge base {path} has format_version {version}, this version reads formats {READS[0]}-{READS[-1]}; "
            f"{repair_hint(path)}"
        )
    return read


def check_embedder(manifest: CommittedManifest, embedder: "Embedder") -> None:
    """EmbedderMismatchError unless `embedder` is the one the KB was built with."""
    if embedder.id != manifest.embedder_id or int(embedder.dim) != manifest.dim:
        raise EmbedderMismatchError(
            f"knowledge base {manifest.path} was built with embedder {manifest.embedder_id!r} (dim {manifest.dim}), "
            f"not {embedder.id!r} (dim {embedder.dim}); open it with that embedder, "
            f"or index the sources into a new folder"
        )


def read_data_files(manifest: CommittedManifest) -> dict[str, bytes]:
    """File name -> bytes of the data files as the manifest fingerprints them."""
    data = {}
    for name in committed_names(manifest):
        if not isinstance(manifest.files.get(name), dict):
            raise KBCorruptError(
                f"knowledge base manifest {manifest.path / MANIFEST} has no fingerprint for {name}; "
                f"{repair_hint(manifest.path)}"
            )
        # The committed version, from the .prev snapshot while a change is under way or died.
        data[name] = store.read_committed(manifest.path, name, manifest.files[name], repair_hint(manifest.path))
    return data


def committed_names(manifest: CommittedManifest) -> list[str]:
    """The data files of a commit: its segments', then its store's (an HNSW graph; format 1:
    every faiss index), which are the other files the manifest fingerprints."""
    names = segment_files(manifest.segments)
    files = manifest.files if isinstance(manifest.files, dict) else {}
    return names + [n for n in files if n not in names and not manifest.store.shared]


SNAPSHOT_TRIES = 5


def read_snapshot(path: Path) -> tuple[CommittedManifest, dict[str, bytes]]:
    """The last committed manifest and its data files. A writer that commits while we read
    replaces files under us: then the manifest on disk has moved on, and we read the new commit."""
    for attempt in range(SNAPSHOT_TRIES):
        manifest = read_manifest(path)
        try:
            return manifest, read_data_files(manifest)
        except KBCorruptError:
            if attempt == SNAPSHOT_TRIES - 1 or store.recorded_files(path / MANIFEST) == manifest.files:
                raise
    raise AssertionError("unreachable")  # the loop returns or raises


def load_committed(
    path: Path,
) -> tuple[CommittedManifest, list["Chunk"], "np.ndarray", "VectorStore", "dict[int, Postings] | None"]:
    """(manifest, chunks, vectors, vector store, the segments' postings or None) of the last
    commit, checked against each other (the postings against the chunks when a search first
    needs them: hierarchy.lexical.LexicalIndex)."""
    manifest, data = read_snapshot(path)
    chunks, vectors = replay(path, data, manifest.segments, manifest.dim)
    postings = read_postings(path, data, manifest.segments)
    try:
        vstore = open_store(manifest.store, path, manifest.dim, data, [c.id for c in chunks], vectors)
    except KBCorruptError as e:
        raise KBCorruptError(f"{path / INDEX} {e}; {repair_hint(path)}") from e
    check_counts(path, manifest.n_chunks, manifest.dim, chunks, vectors, None if vstore.spec.shared else vstore)
    n_docs = len({c.doc_id for c in chunks})
    if n_docs != manifest.n_documents:
        raise KBCorruptError(
            f"knowledge base {path} is inconsistent: manifest says {manifest.n_documents} documents, "
            f"its chunks have {n_docs}; {repair_hint(path)}"
        )
    return manifest, chunks, vectors, vstore, postings
