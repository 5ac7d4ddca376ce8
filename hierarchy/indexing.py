"""Changing what a knowledge base holds, with its summary layers kept in step.

add_documents / delete_documents change the chunks (hierarchy.kb) and then update the summary
layers incrementally (hierarchy.layers), so the store never reaches up into the layers above it.
index_sources is the one implementation behind `logicroute index` and `RoutedRAG.build`
(open or create the KB, delete, add, then build the summary layer)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from hierarchy.chunking import DEFAULT_CHUNK_WORDS, DEFAULT_OVERLAP_WORDS
from hierarchy.documents import Document
from hierarchy.kb import KnowledgeBase
from hierarchy.layers.persist import META, layers_dir
from hierarchy.layers.update import build_layers, update_after_change
from hierarchy.sources import load_documents


def add_documents(kb: KnowledgeBase, docs: Iterable[Document], *, show_progress: bool = True) -> dict:
    """KnowledgeBase.add, then the summary layers (if built) take the new chunks in and drop
    the chunks that replaced documents lost. Returns KnowledgeBase.add's report."""
    before = list(kb.chunk_ids)
    report = kb.add(docs, show_progress=show_progress)
    _update_layers(kb, before)
    return report


def delete_documents(kb: KnowledgeBase, doc_ids: Iterable[str] | str) -> int:
    """KnowledgeBase.delete, then the summary layers (if built) drop the deleted chunks.
    Returns the number of chunks removed."""
    before = list(kb.chunk_ids)
    removed = kb.delete(doc_ids)
    _update_layers(kb, before)
    return removed


def _update_layers(kb: KnowledgeBase, before: list[str]) -> None:
    """Apply the chunks added and removed since `before` (the KB's chunk ids then) to the layers."""
    had = set(before)
    added = [c for c in kb.chunk_ids if c not in had]  # new chunks are appended, in the order added
    removed = sorted(had - set(kb.chunk_ids))
    if (added or removed) and has_layers(kb):
        update_after_change(kb, added, removed)


@dataclass
class IndexResult:
    kb: KnowledgeBase
    documents: int = 0
    deleted_chunks: int = 0
    added: dict = field(default_factory=dict)  # KnowledgeBase.add's report
    layers: dict | None = None  # build_layers' cost, when the summary layer was (re)built


def index_sources(
    kb_dir: str | Path,
    sources: Iterable[str | Path],
    *,
    delete_ids: Iterable[str] = (),
    summaries: str = "extractive",
    rebuild: bool = False,
    make_llm: Callable | None = None,
    chunk_words: int = DEFAULT_CHUNK_WORDS,
    overlap_words: int = DEFAULT_OVERLAP_WORDS,
    embedder=None,
    show_progress: bool = True,
) -> IndexResult:
    """Read every source before touching the KB (bad input writes nothing), then delete, add
    (existing summary layers follow incrementally), and build the summary layer when it is
    missing or `rebuild` is set. `make_llm` is called only for summaries="llm"."""
    docs = [d for s in sources for d in load_documents(s)]
    kb = KnowledgeBase.open_or_create(kb_dir, embedder, chunk_words=chunk_words, overlap_words=overlap_words)
    result = IndexResult(kb=kb, documents=len(docs))
    delete_ids = list(delete_ids)
    if delete_ids:
        result.deleted_chunks = delete_documents(kb, delete_ids)
    if docs:
        result.added = add_documents(kb, docs, show_progress=show_progress)
    if summaries != "none" and (rebuild or not has_layers(kb)):
        llm = make_llm() if summaries == "llm" and make_llm is not None else None
        result.layers = build_layers(kb, summarizer=summaries, llm=llm, show_progress=show_progress, rebuild=rebuild)
    return result


def has_layers(kb: KnowledgeBase) -> bool:
    """Whether summary layers were committed for the KB (a folder left by a first build that died
    before its record landed does not count)."""
    return (layers_dir(kb) / META).is_file()
