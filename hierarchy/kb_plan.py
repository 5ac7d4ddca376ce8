"""What an add changes in a knowledge base, computed before anything is embedded or written
(hierarchy.kb.KnowledgeBase.add): a pure function of the KB's chunks and the chunked documents."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hierarchy.documents import Chunk, Document


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
