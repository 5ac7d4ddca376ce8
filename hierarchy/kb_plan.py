"""What an add changes in a knowledge base (hierarchy.kb.KnowledgeBase.add): the plan, computed
before anything is embedded or written, a pure function of the KB's chunks and the chunked
documents; then the KB it gives and the change a commit writes (hierarchy.kb_segments)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from hierarchy.documents import Chunk, Document
from hierarchy.kb_segments import Delta


def plan_add(
    chunks: Mapping[str, Chunk],
    doc_chunks: Mapping[str, Sequence[str]],
    chunked: list[tuple[Document, list[Chunk]]],
) -> tuple[list[Chunk], set[str], dict[str, Chunk], int]:
    """(new chunks, ids removed, kept chunks whose position or source changed, duplicates) of
    adding `chunked` to a KB holding `chunks` (id -> chunk) of documents `doc_chunks` (id -> chunk ids)."""
    # Pass 1: chunks of replaced documents that their new version no longer has.
    removed: set[str] = set()
    for doc, cs in chunked:
        old = doc_chunks.get(doc.id)
        if old is not None:
            ids = {c.id for c in cs}
            removed.update(c for c in old if c not in ids)
    # Pass 2: new chunks vs duplicates (already in the KB and staying, or earlier in this call).
    new_chunks: list[Chunk] = []
    new_ids: set[str] = set()
    updated: dict[str, Chunk] = {}
    duplicates = 0
    for doc, cs in chunked:
        for c in cs:
            have = chunks.get(c.id)
            if c.id in new_ids or (have is not None and c.id not in removed):
                duplicates += 1
                if have is not None and have.doc_id == doc.id and have != c:
                    updated[c.id] = c
                continue
            new_chunks.append(c)
            new_ids.add(c.id)
    return new_chunks, removed, updated, duplicates


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
