"""Changing what a knowledge base holds, with its summary layers kept in step.

add_documents / delete_documents change the chunks (hierarchy.kb) and then bring the summary
layers up to date (hierarchy.layers), both inside one write transaction (`KnowledgeBase.writing`):
the writer lock is held from reading the committed state to the layers' commit, so two writers
take turns instead of undoing each other's layers. The layers are compared with the chunks, not
with the change just made, so chunks that an interrupted earlier update left out are taken in
too. index_sources is the one implementation behind `logicroute index` and `RoutedRAG.build`
(under the lock: open or create the KB, delete, add, then build or update the summary layer).
The store never reaches up into the layers above it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from engine.floor.base.errors import DocumentNotFoundError
from hierarchy.chunking import DEFAULT_CHUNK_WORDS, DEFAULT_OVERLAP_WORDS
from hierarchy.documents import Document
from hierarchy.intake_limits import IntakeLimits
from hierarchy.kb import KnowledgeBase
from hierarchy.layers.nodes import EMBEDDED, SUMMARY_TEXT
from hierarchy.layers.persist import META, layers_dir
from hierarchy.layers.update import build_layers, sync_layers
from hierarchy.sources import load_documents
from hierarchy.store import dir_lock
from hierarchy.vector_store.base import StoreSpec

# --summaries: the extractive layer with every candidate sentence embedded, ~100 times slower to build,
# kept so the two can be compared on the same folder
EXTRACTIVE_EMBEDDED = "extractive-embedded"


def add_documents(kb: KnowledgeBase, docs: Iterable[Document], *, show_progress: bool = True) -> dict:
    """KnowledgeBase.add, then the summary layers (if built) take in the chunks they do not
    cover and drop those no longer in the KB. Returns KnowledgeBase.add's report."""
    with kb.writing():
        report = kb.add(docs, show_progress=show_progress)
        sync_layers(kb)
    return report


def delete_documents(kb: KnowledgeBase, doc_ids: Iterable[str] | str) -> int:
    """KnowledgeBase.delete (unknown ids are ignored), then the summary layers (if built) follow.
    Returns the number of chunks removed."""
    with kb.writing():
        removed = kb.delete(doc_ids)
        sync_layers(kb)
    return removed


@dataclass
class IndexResult:
    kb: KnowledgeBase
    documents: int = 0
    deleted_chunks: int = 0
    added: dict = field(default_factory=dict)  # KnowledgeBase.add's report
    layers: dict | None = None  # the cost of building or updating the summary layer, when it changed
    moved_store: str | None = None  # the store the vectors were moved to, when `store` named another one
    # Wall and CPU seconds per phase ("read", "chunks", "layers"): where an index run's time went,
    # so a user sees what the summary layer costs beside the chunks.
    phases: dict[str, dict[str, float]] = field(default_factory=dict)


@contextmanager
def _phase(phases: dict, name: str) -> Iterator[None]:
    """Time a phase into phases[name] (wall and CPU seconds of this process, added up)."""
    t, c = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        p = phases.setdefault(name, {"seconds": 0.0, "cpu_seconds": 0.0})
        p["seconds"] = round(p["seconds"] + time.perf_counter() - t, 3)
        p["cpu_seconds"] = round(p["cpu_seconds"] + time.process_time() - c, 3)


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
    store: StoreSpec | None = None,
    retrieval: str | None = None,
    limits: IntakeLimits | None = None,
) -> IndexResult:
    """Read every source before touching the KB (bad input writes nothing), then, holding the
    writer lock: delete (DocumentNotFoundError naming every id that is not in the KB, before
    anything is written), add, and build the summary layer when it is missing or `rebuild` is
    set, else bring existing layers up to date (with no sources: the repair after an update
    that died). `make_llm` is called only for summaries="llm". store: the vector store of a new
    KB; for an existing one that keeps its vectors elsewhere, they are moved there first.
    retrieval: what the KB's searches do from now on (dense | lexical | hybrid; a new KB's
    default: hybrid); a KB written before lexical retrieval gains its lexical index here.
    limits: what reading one file may cost (hierarchy.intake_limits; None: the defaults)."""
    phases: dict[str, dict[str, float]] = {}
    with _phase(phases, "read"):
        docs = [d for s in sources for d in load_documents(s, limits)]
    delete_ids = list(dict.fromkeys(delete_ids))
    with dir_lock(Path(kb_dir)):  # before opening: a second `index` reads what the first committed
        kb = KnowledgeBase.open_or_create(
            kb_dir, embedder, chunk_words=chunk_words, overlap_words=overlap_words, store=store, retrieval=retrieval
        )
        missing = [d for d in delete_ids if not kb.chunks_of(d)]
        if missing:
            raise DocumentNotFoundError(
                f"not in the knowledge base at {kb.path}, nothing changed: {', '.join(repr(d) for d in missing)}"
            )
        with kb.writing():
            result = IndexResult(kb=kb, documents=len(docs), phases=phases)
            if store is not None and kb.move_store(store):
                result.moved_store = kb.store.spec.label()
            if delete_ids:
                result.deleted_chunks = kb.delete(delete_ids)
            with _phase(phases, "chunks"):
                if docs:
                    result.added = kb.add(docs, show_progress=show_progress)
                if retrieval is not None or kb.postings is None:
                    kb.set_retrieval(retrieval)
            with _phase(phases, "layers"):
                result.layers = _layers(kb, summaries, rebuild, make_llm, show_progress)
    return result


def _layers(kb: KnowledgeBase, summaries: str, rebuild: bool, make_llm: Callable | None, show_progress: bool):
    """Build the summary layer when it is missing or `rebuild` is set, else bring existing layers
    up to date. summaries: extractive | extractive-embedded (every candidate sentence embedded) |
    llm | none."""
    if summaries != "none" and (rebuild or not has_layers(kb)):
        llm = make_llm() if summaries == "llm" and make_llm is not None else None
        how = {"scoring": EMBEDDED, "node_vectors": SUMMARY_TEXT} if summaries == EXTRACTIVE_EMBEDDED else {}
        summarizer = "extractive" if summaries == EXTRACTIVE_EMBEDDED else summaries
        return build_layers(kb, summarizer=summarizer, llm=llm, show_progress=show_progress, rebuild=rebuild, **how)
    return sync_layers(kb, show_progress=show_progress)


def has_layers(kb: KnowledgeBase) -> bool:
    """Whether summary layers were committed for the KB (a folder left by a first build that died
    before its record landed does not count)."""
    return (layers_dir(kb) / META).is_file()
