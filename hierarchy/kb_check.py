"""`logicroute check`: verify a knowledge base without changing it and without a model.

Checked: every data file (each segment's, a persisted index) against its fingerprint in the
manifest (a `.prev` snapshot that matches is the committed version of a change under way or one
that died: a note, not damage); the segments replayed;
chunks, vectors, index rows and the lexical postings (every chunk has its own; a KB written
before lexical retrieval has none: a note) agree with each other and with the manifest's counts (a Milvus
store: it holds a row of every committed chunk; rows of a change under way are a note); the
summary layers read back whole, their files match the fingerprints meta.json records, and they
cover every chunk and no other. The check reads like any reader (no file is written, no lock file
created); when no writer holds the KB it takes a shared lock, so writers wait until it is done
and the layers are compared with the chunks they were committed with. While a writer holds the
KB the layers may lag its chunks for a moment: that is a note, not damage. Documents that hold
mostly the same text (a page and its copy) are named, and are no damage either.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from engine.floor.base.errors import KBCorruptError, KBError, KBNotFoundError
from hierarchy import site_pages, store
from hierarchy.kb import LAYERS_DIR
from hierarchy.kb_files import INDEX, check_counts, repair_hint
from hierarchy.kb_manifest import MANIFEST, SNAPSHOT_TRIES, CommittedManifest, committed_names, read_manifest
from hierarchy.kb_segments import read_postings, replay
from hierarchy.layers.persist import META, damaged_files, read_layers_at, read_meta
from hierarchy.lexical import LexicalIndex
from hierarchy.vector_store.open import open_store


@dataclass
class CheckReport:
    kb: str
    documents: int | None = None  # as read from the chunk files (None when they cannot be read)
    chunks: int | None = None
    vectors: int | None = None
    index: int | None = None
    lexical: int | None = None  # chunks the lexical index covers (None: it has none, or it does not read)
    manifest: dict | None = None  # the manifest's {documents, chunks}
    files: dict[str, str] = field(default_factory=dict)  # data file -> ok | prev | missing | mismatch
    layers: dict | None = None
    writer_active: bool = False
    near_duplicates: list[list[str]] = field(default_factory=list)  # pairs of document ids, mostly the same text
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict:
        return {"ok": self.ok, **asdict(self)}


def check_kb(path: str | Path) -> CheckReport:
    """A report on the KB at `path` (KBNotFoundError when there is none). Read-only."""
    path = Path(path)
    if not (path / MANIFEST).is_file():
        read_manifest(path)  # raises KBNotFoundError with the usual advice
    with store.probe_lock(path) as quiet:
        for _ in range(SNAPSHOT_TRIES):
            before = store.committed_record(path / MANIFEST)
            report = _check_once(path, writer_active=not quiet)
            # A writer that committed while we read: check the new commit instead.
            if report.ok or quiet or store.committed_record(path / MANIFEST) == before:
                break
    return report


def _check_once(path: Path, writer_active: bool) -> CheckReport:
    report = CheckReport(kb=str(path), writer_active=writer_active)
    if writer_active:
        report.notes.append("a writer holds the knowledge base: checked its last commit")
    try:
        manifest = read_manifest(path)
    except KBNotFoundError:
        raise
    except KBCorruptError as e:
        report.problems.append(str(e))
        return report
    report.manifest = {"documents": manifest.n_documents, "chunks": manifest.n_chunks}
    chunk_ids = _check_chunk_level(path, manifest, report)
    if chunk_ids is not None:
        _check_layers(path / LAYERS_DIR, manifest, chunk_ids, report)
    return report


def _check_chunk_level(path: Path, manifest: CommittedManifest, report: CheckReport) -> list[str] | None:
    """Each data file (every segment's, a persisted index) against its fingerprint, then the
    segments replayed and the counts; the chunk ids, or None when a file cannot be read."""
    files = manifest.files if isinstance(manifest.files, dict) else {}
    names = committed_names(manifest)
    data: dict[str, bytes] = {}
    for name in names:
        fp = files.get(name)
        state = store.file_state(path, name, fp) if isinstance(fp, dict) else "no fingerprint"
        report.files[name] = state
        if state == "prev":
            report.notes.append(f"{name}: the committed version is the .prev snapshot (the next write restores it)")
        elif state != "ok":
            report.problems.append(f"{path / name}: {state}")
            continue
        try:
            data[name] = store.read_committed(path, name, fp, repair_hint(path))
        except KBCorruptError as e:  # replaced by a writer since its state was read
            report.problems.append(str(e))
    if len(data) < len(names):
        return None
    try:
        chunks, vectors = replay(path, data, manifest.segments, manifest.dim)
        ids = [c.id for c in chunks]
        shared = manifest.store.shared
        vstore = None if shared else open_store(manifest.store, path, manifest.dim, data, ids, vectors)
    except KBCorruptError as e:
        report.problems.append(str(e) if str(e).startswith("knowledge base") else f"{path / INDEX} {e}")
        return None
    report.chunks, report.documents = len(chunks), len({c.doc_id for c in chunks})
    report.near_duplicates = _near_duplicates(chunks)
    report.vectors = int(vectors.shape[0])
    if vstore is not None:  # an exact index is built from the vectors, as opening does
        report.index = vstore.count()
    else:
        _check_shared_store(path, manifest, set(ids), report)
    try:
        check_counts(path, manifest.n_chunks, manifest.dim, chunks, vectors, vstore)
    except KBCorruptError as e:
        report.problems.append(str(e))
    if report.documents != manifest.n_documents:
        n_docs = manifest.n_documents
        report.problems.append(f"the manifest says {n_docs} documents, the chunks have {report.documents}")
    _check_lexical(path, manifest, data, ids, report)
    return ids


def _near_duplicates(chunks: list) -> list[list[str]]:
    """Documents whose chunks hold mostly the same text, each of the other (hierarchy.site_pages):
    a page and its copy, indexed before copies were skipped or with --keep-aggregates."""
    texts: dict[str, list[str]] = {}
    for c in chunks:
        texts.setdefault(c.doc_id, []).append(c.text)
    ids = sorted(texts)
    pairs = site_pages.near_duplicates(["\n".join(texts[i]) for i in ids])
    return [[ids[a], ids[b]] for a, b in pairs]


def _check_lexical(path: Path, manifest: CommittedManifest, data: dict, ids: list[str], report: CheckReport) -> None:
    """The postings read and hold every chunk, as the first lexical search builds them."""
    try:
        postings = read_postings(path, data, manifest.segments)
        if postings is None:
            report.notes.append("no lexical index (written before lexical retrieval): the next write adds it")
            return
        LexicalIndex([postings[s.number] for s in manifest.segments if s.rows], ids)
    except KBCorruptError as e:
        report.problems.append(str(e) if str(e).startswith(str(path)) else f"the lexical index of {path} {e}")
        return
    report.lexical = len(ids)


def _check_shared_store(path: Path, manifest: CommittedManifest, chunk_ids: set[str], report: CheckReport) -> None:
    """A Milvus store holds a row of every committed chunk; rows of others are a change under
    way, or one that died (the next write removes them)."""
    vstore = open_store(manifest.store, path, manifest.dim, {}, [])
    try:
        if chunk_ids and not vstore.exists():  # dropped behind the KB's back: say which, not "misses N"
            report.problems.append(
                f"{manifest.store.label()} has no collection {manifest.store.collection} for the KB's "
                f"{len(chunk_ids)} committed chunks (dropped?); `check --repair` rebuilds it from them"
            )
            return
        rows = vstore.all_ids()
    except Exception as e:  # KBError when unreachable; pymilvus' own errors past that
        report.problems.append(f"{manifest.store.label()}: {str(e).strip().splitlines()[0] if str(e).strip() else e!r}")
        return
    finally:
        vstore.close()
    report.index = len(rows)
    missing, extra = chunk_ids - rows, rows - chunk_ids
    if missing:
        report.problems.append(f"{manifest.store.label()} misses {len(missing)} committed chunks")
    if extra:
        report.notes.append(
            f"{manifest.store.label()} holds {len(extra)} rows no commit has (the next write removes them)"
        )


def _check_layers(d: Path, manifest: CommittedManifest, chunk_ids: list[str], report: CheckReport) -> None:
    """The layers read back, match their fingerprints and cover exactly the chunks. A writer may
    commit new layers (and prune the old files) while they are read: then the new ones are read."""
    for _ in range(SNAPSHOT_TRIES):
        generation = _generation(d)
        layers, problems, notes = _layer_findings(d, manifest, chunk_ids, report.writer_active)
        if not problems or _generation(d) == generation:
            break
    report.layers = layers
    report.problems.extend(problems)
    report.notes.extend(notes)


def _generation(d: Path) -> str | None:
    try:
        return (read_meta(d) or {}).get("generation")
    except KBError:
        return None


def _layer_findings(
    d: Path, manifest: CommittedManifest, chunk_ids: list[str], writer_active: bool
) -> tuple[dict | None, list[str], list[str]]:
    """(what the layers hold, problems, notes) of one reading of the layers."""
    try:
        meta = read_meta(d)
        layers = read_layers_at(d, manifest.embedder_id) if meta is not None else None
    except KBError as e:
        return None, [str(e)], []
    if layers is None:
        if "summaries" in manifest.data:
            return None, [f"the manifest records summary layers, {d / META} is missing"], []
        return None, [], ["no summary layers"]
    assigned = layers.assignment()
    uncovered = [c for c in chunk_ids if c not in assigned]
    stale = sorted(set(assigned) - set(chunk_ids))
    found = {
        "generation": layers.meta.get("generation"),
        "summarizer": layers.meta.get("summarizer"),
        "nodes_per_level": [len(x) for x in layers.levels],
        "chunks": len(assigned),
        "uncovered_chunks": len(uncovered),
        "stale_chunks": len(stale),
    }
    problems, notes = damaged_files(d, layers.meta), []
    if uncovered or stale:
        what = f"the summary layers miss {len(uncovered)} chunks of the KB and hold {len(stale)} it no longer has"
        if writer_active:
            notes.append(what + " (the writer updates them)")
        else:
            problems.append(what)
    return found, problems, notes
