"""A knowledge base of a data set's passages, as benchmarks and labels need it: one document per
passage with doc id = passage id, so supporting passages and retrieved chunks can be matched."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def passages_kb(
    path: str | Path,
    passages: Sequence,
    embedder=None,
    *,
    overwrite: bool = False,
    layers: bool = False,
    show_progress: bool = True,
):
    """Create the KB at `path` from `passages` (objects with id, title, text), with extractive
    summary layers when `layers` is set (no LLM)."""
    from hierarchy.documents import Document
    from hierarchy.kb import KnowledgeBase
    from hierarchy.layers.update import build_layers

    kb = KnowledgeBase.create(path, embedder, overwrite=overwrite)
    kb.add([Document(id=p.id, title=p.title, text=p.text) for p in passages], show_progress=show_progress)
    if layers:
        build_layers(kb, summarizer="extractive", show_progress=show_progress)
    return kb
