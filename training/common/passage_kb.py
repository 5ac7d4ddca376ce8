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
    """The KB at `path` holding `passages` (objects with id, title, text), with extractive summary
    layers when `layers` is set (no LLM). A KB already there is resumed, not trusted: the passages
    it lacks are added (an interrupted build left it committed but short, even empty) and its
    layers brought up to date. overwrite: start from an empty KB instead."""
    from hierarchy.documents import Document
    from hierarchy.kb import KnowledgeBase
    from hierarchy.layers.update import build_layers

    if overwrite:
        kb = KnowledgeBase.create(path, embedder, overwrite=True)
    else:
        kb = KnowledgeBase.open_or_create(path, embedder)
    have = set(kb.doc_ids)
    missing = [Document(id=p.id, title=p.title, text=p.text) for p in passages if p.id not in have]
    if missing:
        kb.add(missing, show_progress=show_progress)
    if layers:
        build_layers(kb, summarizer="extractive", show_progress=show_progress)
    return kb
