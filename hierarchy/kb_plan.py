"""What an add changes in a knowledge base (hierarchy.kb.KnowledgeBase.add): the plan, computed
before anything is embedded or written, a pure function of the KB's chunks and the chunked
documents; then the KB it gives and the change a commit writes (hierarchy.kb_segments)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.floor.base.errors import KBError
from hierarchy.chunking import chunk_embed_text
from hierarchy.documents import Chunk, Document
from hierarchy.kb_segments import Delta


@dataclass
class AddPlan:
    """What adding documents changes. A chunk the KB holds already is `unchanged` when the same
    document holds it (indexing it again is not news), a `duplicate` when another document holds
    it (same title and text: kept once, under the first). `unchanged_docs`: documents the KB
    holds exactly as they come (no chunk new, dropped or moved)."""

    new_chunks: list[Chunk] = field(default_factory=list)
    removed: set[str] = field(default_factory=set)  # chunk ids of replaced documents' dropped chunks
    updated: dict[str, Chunk] = field(default_factory=dict)  # kept chunks whose position or source changed
    unchanged: int = 0
    duplicates: int = 0
    unchanged_docs: int = 0


def plan_add(
    chunks: Mapping[str, Chunk],
    doc_chunks: Mapping[str, Sequence[str]],
    chunked: list[tuple[Document, list[Chunk]]],
) -> AddPlan:
    """The plan of adding `chunked` to a KB holding `chunks` (id -> chunk) of documents
    `doc_chunks` (id -> chunk ids)."""
    plan = AddPlan()
    # Pass 1: chunks of replaced documents that their new version no longer has.
    dropped: dict[str, int] = {}
    for doc, cs in chunked:
        old = doc_chunks.get(doc.id)
        if old is not None:
            ids = {c.id for c in cs}
            gone = [c for c in old if c not in ids]
            plan.removed.update(gone)
            dropped[doc.id] = len(gone)
    # Pass 2: new chunks vs chunks already there (in the KB and staying, or earlier in this call).
    new_ids: set[str] = set()
    for doc, cs in chunked:
        news = len(plan.new_chunks)
        moved = len(plan.updated)
        for c in cs:
            have = chunks.get(c.id)
            if c.id in new_ids or (have is not None and c.id not in plan.removed):
                if c.id not in new_ids and have is not None and have.doc_id == doc.id:
                    plan.unchanged += 1
                    if have != c:
                        plan.updated[c.id] = c
                else:
                    plan.duplicates += 1
                continue
            plan.new_chunks.append(c)
            new_ids.add(c.id)
        held = doc.id in dropped and dropped[doc.id] == 0  # in the KB, nothing of it dropped
        plan.unchanged_docs += held and len(plan.new_chunks) == news and len(plan.updated) == moved
    return plan


def apply_add(
    chunks: Sequence[Chunk],
    vectors: np.ndarray,
    new_chunks: list[Chunk],
    new_vecs: np.ndarray,
    removed: set[str],
    updated: Mapping[str, Chunk],
) -> tuple[list[Chunk], np.ndarray, Delta]:
    """(chunks, vectors, delta) after the plan: the KB's `chunks` (row order of `vectors`) without
    `removed`, `updated` in place, then `new_chunks`; delta writes the updated and new chunks."""
    keep = [i for i, c in enumerate(chunks) if c.id not in removed]
    out = [updated.get(chunks[i].id, chunks[i]) for i in keep] + new_chunks
    kept_vecs = vectors[keep] if removed else vectors
    rewritten = list(updated.values())
    rows = {c.id: i for i, c in enumerate(chunks)}
    rewritten_vecs = vectors[[rows[c.id] for c in rewritten]].reshape(-1, vectors.shape[1])
    delta = Delta(rewritten + new_chunks, np.concatenate([rewritten_vecs, new_vecs]), frozenset(removed))
    return out, np.concatenate([kept_vecs, new_vecs]).astype(np.float32, copy=False), delta


def vectors_for(kb: Any, new_chunks: list[Chunk], removed: set[str], show_progress: bool) -> tuple[np.ndarray, dict]:
    """Vectors of the new chunks of an add to `kb`, in order, and the embedding stats. A chunk
    dropped by one document but produced by another keeps its vector; only the others are embedded."""
    reuse = {c.id for c in new_chunks if c.id in removed}
    embed_seconds = 0.0
    to_embed = [c for c in new_chunks if c.id not in reuse]
    if to_embed:
        t1 = time.perf_counter()
        vecs = _embed(kb, [chunk_embed_text(c) for c in to_embed], show_progress)
        embed_seconds = time.perf_counter() - t1
    else:
        vecs = np.zeros((0, kb.dim), np.float32)
    emb_rows = {c.id: i for i, c in enumerate(to_embed)}
    rows = [vecs[emb_rows[c.id]] if c.id in emb_rows else kb.vectors[kb.row_of(c.id)] for c in new_chunks]
    new_vecs = np.stack(rows).astype(np.float32, copy=False) if rows else np.zeros((0, kb.dim), np.float32)
    return new_vecs, {"seconds": 0.0, "embed_seconds": embed_seconds, "chunks_embedded": len(to_embed)}


def _embed(kb: Any, texts: list[str], show_progress: bool) -> np.ndarray:
    v = np.asarray(kb.embedder.encode(texts, show_progress=show_progress), dtype=np.float32)
    if v.shape != (len(texts), kb.dim):
        raise KBError(f"embedder {kb.embedder.id!r} returned shape {v.shape}, expected {(len(texts), kb.dim)}")
    return v
