"""`logicroute repair`: rebuild a damaged knowledge base from what it stores.

chunks.jsonl holds every chunk's title, text, document id and position: the KB's documents as
indexed. The vectors, the index and the manifest derive from it, and the summary layers from
those. So, holding the writer lock:

1. Chunk level. A KB that opens (its files agree with the manifest) only has what a writer that
   died left behind finished. Otherwise it is rebuilt: the chunks from the committed
   chunks.jsonl (or its `.prev` snapshot), else every line of what is there that still reads
   and whose id still matches its text; the vectors kept only when they are the committed ones
   of exactly those chunks, else the chunks are embedded again (this loads the embedder); the
   index rebuilt from the vectors (a Milvus store's collection refilled); a new manifest
   (chunking, embedder and store from the old one when it reads, else the defaults, which the
   report notes). A KB that opens on a Milvus store gets the rows the store misses written
   again from the committed vectors, and the rows no commit has removed.
2. Summary layers: brought up to date with the chunks, or rebuilt with the summarizer they were
   built with when they cannot be read.

What cannot be recovered (lines of chunks.jsonl that no longer read, and the documents they
belonged to, whose sources must be indexed again) is in the report.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.base.errors import KBCorruptError, KBError
from hierarchy import store
from hierarchy.chunking import DEFAULT_CHUNK_WORDS, DEFAULT_OVERLAP_WORDS, chunk_embed_text, chunk_id
from hierarchy.documents import Chunk
from hierarchy.kb import KnowledgeBase
from hierarchy.kb_files import CHUNKS, VECTORS, encode, repair_hint
from hierarchy.kb_manifest import MANIFEST, check_embedder, load_committed, new_manifest, next_manifest, read_manifest
from hierarchy.kb_stores import settle_journal
from hierarchy.layers.persist import damaged_files, layers_dir, read_layers, read_meta
from hierarchy.layers.update import build_layers, sync_layers
from hierarchy.vector_store.base import StoreSpec
from hierarchy.vector_store.open import new_store, with_collection

_DOC_ID = re.compile(r'"doc_id"\s*:\s*"((?:[^"\\]|\\.)*)"')


@dataclass
class RepairReport:
    kb: str
    rebuilt: bool = False  # the chunk level was written anew
    documents: int = 0
    chunks: int = 0
    embedded: int = 0  # chunks embedded again
    lost_lines: int = 0  # lines of chunks.jsonl that could not be recovered
    lost_documents: list[str] = field(default_factory=list)  # documents those lines belonged to
    layers: str | None = None  # unchanged | updated | rebuilt; None: the KB has none
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def repair_kb(
    kb_dir: str | Path,
    *,
    embedder: Any = None,
    summaries: str = "auto",
    make_llm: Callable | None = None,
    show_progress: bool = True,
) -> RepairReport:
    """Repair the KB at `kb_dir` (see the module docstring). summaries: "auto" rebuilds damaged
    layers with the summarizer they were built with; "extractive" or "llm" (make_llm() gives the
    LLM) rebuilds them with that one, and builds them when there were none."""
    path = Path(kb_dir)
    if not any((path / n).exists() for n in (MANIFEST, CHUNKS, CHUNKS + store.PREV)):
        read_manifest(path)  # KBNotFoundError, with the usual advice
    report = RepairReport(kb=str(path))
    with store.dir_lock(path):
        kb = _chunk_level(path, embedder, report, show_progress)
        _layers(kb, summaries, make_llm, report, show_progress)
    report.documents, report.chunks = len(kb.doc_ids), len(kb)
    return report


def _chunk_level(path: Path, embedder: Any, report: RepairReport, show_progress: bool) -> KnowledgeBase:
    try:
        manifest = load_committed(path)[0]
    except KBCorruptError as e:
        report.notes.append("damaged: " + str(e).removesuffix("; " + repair_hint(path)))
        return _rebuild(path, embedder, report, show_progress)
    for name, fp in manifest.files.items():
        store.recover(path, name, fp, repair_hint(path))  # finish a change that died
    kb = KnowledgeBase.open(path, embedder)
    if kb.store.spec.shared:
        _resync_shared_store(kb, report)
    return kb


def _resync_shared_store(kb: KnowledgeBase, report: RepairReport) -> None:
    """A Milvus store holds exactly the committed chunks again."""
    settle_journal(kb)
    rows = kb.store.all_ids()
    missing = [c for c in kb.chunk_ids if c not in rows]
    extra = rows - set(kb.chunk_ids)
    if missing:
        kb.store.add(missing, kb.vectors[[kb.row_of(c) for c in missing]])
        report.notes.append(f"{len(missing)} committed chunks written to {kb.store.spec.label()} again")
    if extra:
        kb.store.delete(extra)
        report.notes.append(f"{len(extra)} rows no commit has removed from {kb.store.spec.label()}")


def _rebuild(path: Path, embedder: Any, report: RepairReport, show_progress: bool) -> KnowledgeBase:
    t0 = time.perf_counter()
    try:
        old = read_manifest(path)
    except KBCorruptError:
        old = None
        report.notes.append("manifest.json does not read: the default chunking and embedder are recorded")
    files = old.files if old is not None and isinstance(old.files, dict) else {}
    chunks, verified = _salvage_chunks(path, files.get(CHUNKS), report)
    if embedder is None:
        from engine.embedder import get_embedder

        embedder = get_embedder(old.data["embedder"].get("model") if old is not None else None)
    if old is not None:
        check_embedder(old, embedder)
    dim = int(embedder.dim)
    vectors = _committed_vectors(path, files.get(VECTORS), len(chunks), dim) if verified else None
    if vectors is None:
        vectors = _embed(embedder, chunks, dim, show_progress)
        report.embedded = len(chunks)
        report.notes.append(f"{len(chunks)} chunks embedded again")
    else:
        report.notes.append("the committed vectors are kept; the index is rebuilt from them")
    base = old.data if old is not None else new_manifest(embedder, DEFAULT_CHUNK_WORDS, DEFAULT_OVERLAP_WORDS)
    spec = with_collection(old.store if old is not None else StoreSpec())
    vstore = new_store(spec, path, dim, [c.id for c in chunks], vectors)
    payload = encode(chunks, vectors, vstore)
    stats = {"seconds": time.perf_counter() - t0, "embed_seconds": 0.0, "chunks_embedded": report.embedded}
    manifest = next_manifest(base, chunks, payload, stats, vstore)
    store.commit(path, MANIFEST, manifest, payload)  # replaces whatever is there: we hold the lock
    report.rebuilt = True
    return KnowledgeBase(path, embedder, json.loads(json.dumps(manifest)), chunks, vectors, vstore)


def _salvage_chunks(path: Path, fp: Any, report: RepairReport) -> tuple[list[Chunk], bool]:
    """(chunks, whether they are the committed ones): the committed chunks.jsonl or its
    snapshot when one matches the manifest, else the lines of what is there that still read."""
    found = [data for name in (CHUNKS, CHUNKS + store.PREV) if (data := _read(path / name)) is not None]
    for data in found:
        if isinstance(fp, dict) and store.fingerprint(data) == fp:
            return _parse(data, report), True
    if not found:
        raise KBCorruptError(
            f"knowledge base {path} has no chunks.jsonl left, nothing to rebuild from: "
            f"delete the folder and index the sources again"
        )
    report.notes.append("chunks.jsonl does not match the manifest: every line that still reads is kept")
    return _parse(found[0], report), False


def _parse(data: bytes, report: RepairReport) -> list[Chunk]:
    """The chunks of the lines that read and whose id matches their title and text (first of
    each id); the others are counted as lost, with their document ids where those still read."""
    chunks: dict[str, Chunk] = {}
    lost_docs: dict[str, None] = {}
    for line in data.decode("utf-8", "replace").splitlines():
        if not line.strip():
            continue
        try:
            c = Chunk.from_dict(json.loads(line))
            if c.id != chunk_id(c.title, c.text):
                raise ValueError("id does not match the text")
        except (ValueError, KeyError, TypeError, AttributeError):
            report.lost_lines += 1
            lost_docs.update(dict.fromkeys(_DOC_ID.findall(line)))
            continue
        chunks.setdefault(c.id, c)
    report.lost_documents = sorted(lost_docs)
    if report.lost_lines:
        report.notes.append(
            f"{report.lost_lines} lines of chunks.jsonl cannot be recovered; index the sources of these "
            f"documents again: {', '.join(report.lost_documents) or '(their ids do not read either)'}"
        )
    return list(chunks.values())


def _committed_vectors(path: Path, fp: Any, n: int, dim: int) -> np.ndarray | None:
    """The committed vectors.npy (or its snapshot) when it holds n rows of this dimension."""
    import io

    for name in (VECTORS, VECTORS + store.PREV):
        data = _read(path / name)
        if data is None or not isinstance(fp, dict) or store.fingerprint(data) != fp:
            continue
        try:
            v = np.load(io.BytesIO(data), allow_pickle=False)
        except (ValueError, OSError, EOFError):
            return None
        return v if v.shape == (n, dim) and v.dtype == np.float32 else None
    return None


def _embed(embedder: Any, chunks: list[Chunk], dim: int, show_progress: bool) -> np.ndarray:
    if not chunks:
        return np.zeros((0, dim), np.float32)
    v = np.asarray(embedder.encode([chunk_embed_text(c) for c in chunks], show_progress=show_progress), np.float32)
    if v.shape != (len(chunks), dim):
        raise KBError(f"embedder {embedder.id!r} returned shape {v.shape}, expected {(len(chunks), dim)}")
    return v


def _layers(
    kb: KnowledgeBase, summaries: str, make_llm: Callable | None, report: RepairReport, show_progress: bool
) -> None:
    """Bring the layers up to date, or rebuild them when they do not read (or another summarizer is asked for)."""
    try:
        meta = read_meta(layers_dir(kb))
    except KBCorruptError:
        meta = None
    built_with = (meta or kb.manifest.get("summaries") or {}).get("summarizer")
    want = built_with if summaries == "auto" else summaries
    if want is None:
        return
    if meta is not None and meta.get("summarizer") == want:
        try:
            damaged = damaged_files(layers_dir(kb), meta)
            if damaged:
                raise KBCorruptError(", ".join(damaged))
            read_layers(kb)  # every file reads back, not only meta.json
            report.layers = "updated" if sync_layers(kb, show_progress=show_progress) else "unchanged"
            return
        except KBError as e:
            report.notes.append("summary layers damaged: " + str(e).removesuffix("; " + repair_hint(kb.path)))
    llm = make_llm() if want == "llm" and make_llm is not None else None
    build_layers(kb, want, llm, show_progress, rebuild=True)
    report.layers = "rebuilt"


def _read(p: Path) -> bytes | None:
    try:
        return p.read_bytes()
    except FileNotFoundError:
        return None
