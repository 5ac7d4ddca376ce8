"""`logicroute check --repair`: rebuild a damaged knowledge base from what it stores.

The chunk files of the segments (hierarchy.kb_segments; format 1: chunks.jsonl) hold every
chunk's title, text, document id and position: the KB's documents as indexed. The vectors, the
index and the manifest derive from them, and the summary layers from those. So, holding the
writer lock:

1. Chunk level. A KB that opens (its files agree with the manifest) only has what a writer that
   died left behind finished. Otherwise it is rebuilt by replaying its segments (those the
   manifest lists; every one on disk when it does not read): a segment's committed chunk file
   (or its `.prev` snapshot), else every line of what is there that still reads and whose id
   still matches its text; its vectors kept only when they are the committed ones of exactly
   those chunks, else those chunks are embedded again (this loads the embedder); the index
   rebuilt from the vectors (a Milvus store's collection refilled); one new segment and a new
   manifest (chunking, embedder and store from the old one when it reads, else the defaults,
   which the report notes); the lexical index tokenized again from the chunks. A KB that opens on
   a Milvus store gets the rows the store misses written again from the committed vectors, and
   the rows no commit has removed; one whose lexical postings do not cover its chunks is rebuilt.
2. Summary layers: brought up to date with the chunks, or rebuilt with the summarizer they were
   built with when they cannot be read.

What cannot be recovered is in the report, checked against what the manifest records: chunk
lines that no longer read, and lines that are not there at all (a file cut short: the segment's
row count says how many there were, or its vectors file's when the manifest does not read); the
documents they belonged to, named where a torn line still shows the id, and counted where the
whole line went (the manifest's document count against those restored). No other record holds
a chunk's document id, so a document whose every line was cut off is counted, not named.
`check --repair` exits 1 when anything is lost.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.floor.base.errors import KBCorruptError, KBError
from hierarchy import store
from hierarchy.chunking import DEFAULT_CHUNK_WORDS, DEFAULT_OVERLAP_WORDS, chunk_embed_text, chunk_id
from hierarchy.documents import Chunk
from hierarchy.kb import KnowledgeBase
from hierarchy.kb_files import CHUNKS, repair_hint
from hierarchy.kb_manifest import MANIFEST, check_embedder, load_committed, new_manifest, next_manifest, read_manifest
from hierarchy.kb_segments import Segment, plan_commit, prune
from hierarchy.kb_stores import JOURNAL, settle_journal
from hierarchy.layers.nodes import LEXICAL, scoring_of
from hierarchy.layers.persist import damaged_files, layers_dir, read_layers, read_meta
from hierarchy.layers.update import build_layers, sync_layers
from hierarchy.lexical import Postings, lexical_text
from hierarchy.vector_store.base import default_store
from hierarchy.vector_store.open import new_store, with_collection

_DOC_ID = re.compile(r'"doc_id"\s*:\s*"((?:[^"\\]|\\.)*)"')


@dataclass
class RepairReport:
    kb: str
    rebuilt: bool = False  # the chunk level was written anew
    documents: int = 0
    chunks: int = 0
    embedded: int = 0  # chunks embedded again
    lost_lines: int = 0  # chunk lines that could not be recovered: unreadable, or cut off (missing)
    lost_documents: list[str] = field(default_factory=list)  # documents those lines belonged to, where named
    unnamed_lost_documents: int = 0  # documents gone whose ids went with their lines (by the manifest's count)
    layers: str | None = None  # unchanged | updated | rebuilt; None: the KB has none
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def lost(self) -> bool:
        """Whether anything could not be restored (`check --repair` then exits 1)."""
        return bool(self.lost_lines or self.lost_documents or self.unnamed_lost_documents)


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
    if not (path / MANIFEST).exists() and not _segments_on_disk(path):
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
    try:
        if kb.postings is not None:
            kb.lexical_index()  # the postings cover every chunk
    except KBCorruptError as e:
        report.notes.append("damaged: " + str(e).removesuffix("; " + repair_hint(path)))
        return _rebuild(path, embedder, report, show_progress)
    if kb.store.spec.shared:
        _resync_shared_store(kb, report)
    return kb


def _resync_shared_store(kb: KnowledgeBase, report: RepairReport) -> None:
    """A Milvus store holds exactly the committed chunks again. A collection that cannot be loaded (a writer
    killed while Milvus Lite wrote a segment), or that was dropped behind the KB's back, is refilled from them."""
    label = kb.store.spec.label()
    if len(kb) and not kb.store.exists():
        kb.store.add(kb.chunk_ids, kb.vectors)  # add creates the collection
        (kb.path / JOURNAL).unlink(missing_ok=True)  # its ids were in the dropped collection, or in none
        name, n = kb.store.spec.collection, len(kb)
        report.notes.append(f"{label} had no collection {name}: rebuilt, {n} committed chunks")
        return
    try:
        settle_journal(kb)
        rows = kb.store.all_ids()
    except KBCorruptError:
        kb.store.drop()
        kb.store.add(kb.chunk_ids, kb.vectors)
        (kb.path / JOURNAL).unlink(missing_ok=True)
        report.notes.append(f"{label} could not load its collection: refilled with the {len(kb)} committed chunks")
        return
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
    segments = old.segments if old is not None else _segments_on_disk(path)
    if embedder is None:
        from engine.floor.embedder import get_embedder

        embedder = get_embedder(old.data["embedder"].get("model") if old is not None else None)
    if old is not None:
        check_embedder(old, embedder)
    dim = int(embedder.dim)
    live = _salvage(path, segments, files, dim, report, counted=old is not None)
    chunks = [c for c, _ in live.values()]
    _account(report, chunks, old.n_documents if old is not None else None)
    missing = [c for c, v in live.values() if v is None]
    fresh = dict(zip((c.id for c in missing), _embed(embedder, missing, dim, show_progress)))
    vectors = np.stack([fresh[c.id] if v is None else v for c, v in live.values()]) if live else np.zeros((0, dim))
    vectors = vectors.astype(np.float32, copy=False)
    report.embedded = len(missing)
    if missing:
        report.notes.append(f"{len(missing)} chunks embedded again")
    if len(missing) < len(chunks):
        kept = len(chunks) - len(missing)
        report.notes.append(f"the committed vectors of {kept} chunks are kept; the index is rebuilt from them")
    base = old.data if old is not None else new_manifest(embedder, DEFAULT_CHUNK_WORDS, DEFAULT_OVERLAP_WORDS)
    spec = with_collection(old.store if old is not None else default_store())
    vstore = new_store(spec, path, dim, [c.id for c in chunks], vectors)
    base = {**base, "segments": [s.to_dict() for s in segments if not s.legacy]}  # the new segment gets a new number
    new_segments, payload, postings = plan_commit(base, chunks, vectors, None, _tokenized)
    payload.update(vstore.persist())
    stats = {"seconds": time.perf_counter() - t0, "embed_seconds": 0.0, "chunks_embedded": report.embedded}
    manifest = next_manifest(base, chunks, payload, stats, vstore, new_segments)
    store.commit(path, MANIFEST, manifest, payload)  # replaces whatever is there: we hold the lock
    prune(path, manifest["files"])
    report.rebuilt = True
    return KnowledgeBase(path, embedder, json.loads(json.dumps(manifest)), chunks, vectors, vstore, postings)


def _tokenized(chunks: list[Chunk], whole: bool) -> Postings:
    """The lexical index of the rebuilt KB, from its chunks' text (what the damaged one had is not trusted)."""
    return Postings.of_texts([c.id for c in chunks], [lexical_text(c) for c in chunks])


def _segments_on_disk(path: Path) -> list[Segment]:
    """Without a manifest: every segment whose files are there, in order (format 1's files first)."""
    names = [f.name for f in path.iterdir()] if path.is_dir() else []
    numbers = sorted({int(m.group(1)) for n in names if (m := re.match(r"^seg-(\d+)\.", n))})
    found = [Segment(0, 0)] if (path / CHUNKS).exists() or (path / (CHUNKS + store.PREV)).exists() else []
    for n in numbers:
        probe = Segment(n, 1, 1)
        has = [(path / f).exists() or (path / (f + store.PREV)).exists() for f in probe.files()]
        found.append(Segment(n, int(has[0]), int(has[2])))
    return found


def _salvage(
    path: Path, segments: list[Segment], files: dict, dim: int, report: RepairReport, *, counted: bool
) -> dict:
    """Chunk id -> (chunk, its committed vector or None) of the segments replayed: the committed
    files (or their snapshots) where they match the manifest, else every line of what is there
    that still reads (whose vectors can no longer be trusted to line up). Lines that are not
    there at all (a file cut short) are counted lost too, against the rows the manifest records
    for the segment (`counted`), else against the rows of its vectors file."""
    live: dict[str, tuple[Chunk, np.ndarray | None]] = {}
    found_any = False
    for seg in segments:
        if seg.deletes:
            data, verified = _file(path, seg.deleted_file, files)
            try:  # without a manifest nothing can be verified: a list that reads is taken as it is
                ids = json.loads(data or b"null") if verified or not files else None
            except ValueError:
                ids = None
            if not isinstance(ids, list):
                report.notes.append(f"{seg.deleted_file} does not read: chunks it deleted may be back")
            for cid in ids or ():
                live.pop(cid, None)
        if not (seg.rows or seg.legacy):
            continue
        data, verified = _file(path, seg.chunks_file, files)
        expected = seg.rows if counted else _vector_rows(path, seg)
        if data is None:
            report.notes.append(f"{seg.chunks_file} is gone: its {expected or 'unknown number of'} chunks are lost")
            report.lost_lines += expected or 0
            continue
        found_any = True
        if not verified:
            report.notes.append(f"{seg.chunks_file} does not match the manifest: every line that still reads is kept")
        lost = report.lost_lines
        chunks, lines = _parse(data, report)
        if expected is not None and lines < expected:
            report.notes.append(
                f"{seg.chunks_file} holds {lines} of the {expected} chunk lines "
                f"{'the manifest records' if counted else 'its vectors have'}: {expected - lines} cut off"
            )
            report.lost_lines += expected - lines
        vecs = _vectors(path, seg, files, len(chunks), dim) if verified and report.lost_lines == lost else None
        for i, c in enumerate(chunks):
            live[c.id] = (c, None if vecs is None else vecs[i])
    if not found_any and segments:
        raise KBCorruptError(
            f"knowledge base {path} has no chunk files left, nothing to rebuild from: "
            f"delete the folder and index the sources again"
        )
    return live


def _account(report: RepairReport, chunks: list[Chunk], recorded_documents: int | None) -> None:
    """Documents lost, against the manifest's count: a line cut off takes its document id with
    it, so a document whose every line went is only seen missing from the count."""
    restored = {c.doc_id for c in chunks}
    named_gone = sum(d not in restored for d in report.lost_documents)
    if recorded_documents is not None:
        report.unnamed_lost_documents = max(0, recorded_documents - len(restored) - named_gone)
    if not report.lost:
        return
    named = ", ".join(report.lost_documents)
    unnamed = report.unnamed_lost_documents
    more = f"{unnamed} more {unnamed_documents(unnamed)}" if unnamed else ""
    which = " and ".join(w for w in (named, more) if w) or "documents whose ids do not read"
    counts = f" (the manifest records {recorded_documents} documents, {len(restored)} are restored)"
    report.notes.append(
        f"{report.lost_lines} chunk lines cannot be recovered; index the sources of these documents again: "
        f"{which}{counts if recorded_documents is not None else ''}"
    )


def _file(path: Path, name: str, files: dict) -> tuple[bytes | None, bool]:
    """(bytes, whether they are the committed version): the file or its snapshot that matches
    its fingerprint, else whichever of them is there."""
    fp = files.get(name)
    found = [data for n in (name, name + store.PREV) if (data := _read(path / n)) is not None]
    for data in found:
        if isinstance(fp, dict) and store.fingerprint(data) == fp:
            return data, True
    return (found[0] if found else None), False


def unnamed_documents(n: int) -> str:
    """How documents whose every line was cut off are named: by what took their ids."""
    return "document whose id went with its line" if n == 1 else "documents whose ids went with their lines"


def _parse(data: bytes, report: RepairReport) -> tuple[list[Chunk], int]:
    """(the chunks of the lines that read and whose id matches their title and text (first of
    each id), the number of lines); the others are counted as lost, with their document ids
    where those still read."""
    chunks: dict[str, Chunk] = {}
    lost_docs: dict[str, None] = dict.fromkeys(report.lost_documents)
    lines = 0
    for line in data.decode("utf-8", "replace").splitlines():
        if not line.strip():
            continue
        lines += 1
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
    return list(chunks.values()), lines


def _vectors(path: Path, seg: Segment, files: dict, n: int, dim: int) -> np.ndarray | None:
    """The committed vectors of a segment (or their snapshot) when they hold n rows of this dimension."""
    data, verified = _file(path, seg.vectors_file, files)
    if data is None or not verified:
        return None
    try:
        v = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError):
        return None
    return v if v.shape == (n, dim) and v.dtype == np.float32 else None


def _vector_rows(path: Path, seg: Segment) -> int | None:
    """The rows a segment's vectors file (or its snapshot) says it has: how many chunk lines it
    had when no manifest counts them. Only the .npy header is read."""
    for name in (seg.vectors_file, seg.vectors_file + store.PREV):
        try:
            with open(path / name, "rb") as f:
                version = np.lib.format.read_magic(f)
                if version not in ((1, 0), (2, 0)):
                    continue
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                shape = read(f)[0]  # the header alone: the rows after it may be cut short
        except (OSError, ValueError):
            continue
        if len(shape) == 2:
            return int(shape[0])
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
    # Extractive layers keep the sentence scoring meta.json names (the default when it is unreadable).
    scoring = scoring_of(meta) if meta is not None and meta.get("summarizer") == want else None
    build_layers(kb, want, llm, show_progress, rebuild=True, scoring=scoring or LEXICAL)
    report.layers = "rebuilt"


def _read(p: Path) -> bytes | None:
    try:
        return p.read_bytes()
    except FileNotFoundError:
        return None
