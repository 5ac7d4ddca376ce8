"""The chunk level of a knowledge base as append-only segments, so a commit costs what changed.

A segment is written once and never changed: `seg-N.chunks.jsonl` (one Chunk per line) and
`seg-N.vectors.npy` (float32 rows, row i <-> line i) for the chunks a commit adds, and
`seg-N.deleted.json` (a JSON list) for the chunk ids it removes, and `seg-N.lexical.npz` for
the lexical index of its chunks (hierarchy.lexical: their postings). The manifest lists the
segments in order ("segments") and fingerprints their files ("files"); the KB is what replaying
them gives: a segment's deletions first, then its chunks, a chunk id seen again taking the place
of the earlier copy (a chunk whose position or source changed). An add writes one segment of the
new chunks, a delete one small list: O(what changed), plus the manifest, whose size grows with
the number of segments only.

Rows that replaying drops (deleted, or superseded by a later copy) stay on disk until the
segments are compacted into one: when they pass COMPACT_GARBAGE of all rows, or the segments
pass COMPACT_SEGMENTS, so opening stays one read of about the KB's size. Compaction, the first
write to a KB of format 1 (one `chunks.jsonl` + `vectors.npy`, read as a single segment), a
repair, a move to another store and the first write to a KB whose segments have no lexical index
(written before it existed: it gains one) write the whole KB as one new segment. Every segment has a
new name, so a commit overwrites none of them; after the manifest lands, data files it no longer
names are removed (`prune`).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.floor.base.errors import KBCorruptError
from engine.floor.base.files import TMP_SUFFIX
from hierarchy.documents import Chunk
from hierarchy.kb_files import CHUNKS, INDEX, VECTORS, decode_chunks, decode_vectors, repair_hint
from hierarchy.lexical import ANALYSIS, Postings
from hierarchy.vector_store.base import FAISS_DEAD as DEAD

COMPACT_GARBAGE = 0.2  # dropped rows over all rows on disk past which the segments are rewritten as one
COMPACT_SEGMENTS = 32  # segments past which they are rewritten as one
# Every data file name a KB folder may hold, in either format (a `.prev` snapshot too).
_DATA_FILE = re.compile(
    r"^(seg-\d+\.(chunks\.jsonl|vectors\.npy|deleted\.json|lexical\.npz)|"
    + "|".join(re.escape(n) for n in (CHUNKS, VECTORS, INDEX, DEAD))
    + r")(\.prev)?$"
)


@dataclass(frozen=True)
class Segment:
    """One segment as the manifest lists it. number 0 is the single segment of format 1.
    lexical: the analysis version (hierarchy.lexical.ANALYSIS) of its rows' postings in
    `lexical_file`; 0 in KBs written before lexical retrieval."""

    number: int
    rows: int
    deletes: int = 0
    lexical: int = 0

    @property
    def legacy(self) -> bool:
        return self.number == 0

    @property
    def chunks_file(self) -> str:
        return CHUNKS if self.legacy else f"seg-{self.number:06d}.chunks.jsonl"

    @property
    def vectors_file(self) -> str:
        return VECTORS if self.legacy else f"seg-{self.number:06d}.vectors.npy"

    @property
    def deleted_file(self) -> str:
        return f"seg-{self.number:06d}.deleted.json"

    @property
    def lexical_file(self) -> str:
        return f"seg-{self.number:06d}.lexical.npz"

    def files(self) -> tuple[str, ...]:
        """The files this segment has (format 1's has both, even when empty)."""
        rows = (self.chunks_file, self.vectors_file) if self.rows or self.legacy else ()
        lexical = (self.lexical_file,) if self.lexical and self.rows else ()
        return rows + lexical + ((self.deleted_file,) if self.deletes else ())

    def to_dict(self) -> dict:
        # "lexical" only when set: a manifest an older logicroute wrote reads the same, and one it
        # writes over ours drops the flag with the files (its next segment has none)
        d: dict = {"number": self.number, "rows": self.rows, "deletes": self.deletes}
        if self.lexical:
            d["lexical"] = self.lexical
        return d


def segments_of(manifest: Mapping, n_chunks: int) -> list[Segment]:
    """The segments a manifest lists; a manifest of format 1 (no "segments") has one legacy
    segment of its n_chunks chunks. KBCorruptError when the entry does not read."""
    entry = manifest.get("segments")
    if entry is None:
        return [Segment(0, n_chunks)]
    try:
        segs = [
            Segment(int(s["number"]), int(s["rows"]), int(s.get("deletes", 0)), int(s.get("lexical", 0))) for s in entry
        ]
    except (TypeError, KeyError, ValueError) as e:
        raise KBCorruptError(f"its segments entry is unreadable ({e})") from e
    if any(s.number < 1 or s.rows < 0 or s.deletes < 0 for s in segs) or len({s.number for s in segs}) != len(segs):
        raise KBCorruptError(f"its segments entry is malformed: {entry!r}")
    return segs


def segment_files(segments: Sequence[Segment]) -> list[str]:
    return [name for s in segments for name in s.files()]


def has_lexical(segments: Sequence[Segment]) -> bool:
    """Whether every segment that holds rows has their lexical index, of this analysis (an empty KB
    has, vacuously; postings of another analysis are made again on the next write)."""
    return all(s.lexical == ANALYSIS for s in segments if s.rows or s.legacy)


PostingsOf = Callable[[Sequence[Chunk], bool], Postings]  # (chunks, whether they are the whole KB) -> postings


@dataclass(frozen=True)
class Delta:
    """What a commit changes: chunk ids removed, then chunks added (new, or kept ones written again
    because their position or source changed), with their vectors in the same order."""

    added: list[Chunk]
    vectors: np.ndarray
    deleted: frozenset[str] = frozenset()


def replay(path: Path, data: Mapping[str, bytes], segments: Sequence[Segment], dim: int):
    """(chunks, vectors) of the KB the segments hold, in chunk order; `data`: file name -> bytes.
    KBCorruptError (with the repair hint) when a file does not read or disagrees with its entry."""
    live: dict[str, tuple[Chunk, int]] = {}  # chunk id -> (chunk, row in the concatenated vectors)
    parts: list[np.ndarray] = []
    offset = 0
    for seg in segments:
        for cid in read_deleted(path, seg, data[seg.deleted_file]) if seg.deletes else ():
            live.pop(cid, None)
        if not (seg.rows or seg.legacy):
            continue
        chunks = decode_chunks(path, data[seg.chunks_file], seg.chunks_file)
        vecs = decode_vectors(path, data[seg.vectors_file], seg.vectors_file)
        rows = int(vecs.shape[0]) if vecs.ndim == 2 else -1
        if len(chunks) != seg.rows or rows != seg.rows or (rows and vecs.shape[1] != dim):
            raise KBCorruptError(
                f"knowledge base {path} is inconsistent: segment {seg.chunks_file} should hold {seg.rows} chunks, "
                f"it has {len(chunks)} chunks and vectors {tuple(vecs.shape)} (dim {dim}); {repair_hint(path)}"
            )
        for r, c in enumerate(chunks):
            live[c.id] = (c, offset + r)
        parts.append(vecs.astype(np.float32, copy=False))
        offset += rows
    if len(parts) == 1 and len(live) == offset:
        vectors = parts[0]  # one segment and nothing dropped (a fresh or compacted KB): no copy
    elif live:
        vectors = np.concatenate(parts)[[row for _, row in live.values()]]
    else:
        vectors = np.zeros((0, dim), np.float32)
    return [c for c, _ in live.values()], np.ascontiguousarray(vectors, dtype=np.float32)


def read_postings(path: Path, data: Mapping[str, bytes], segments: Sequence[Segment]) -> dict[int, Postings] | None:
    """Segment number -> the postings of its rows; None when a segment's rows have none (a KB
    written before lexical retrieval). KBCorruptError (with the repair hint) when a file does not read."""
    if not has_lexical(segments):
        return None
    out = {}
    for seg in segments:
        if seg.rows:
            try:
                out[seg.number] = Postings.decode(data[seg.lexical_file], seg.rows)
            except KBCorruptError as e:
                raise KBCorruptError(f"{path / seg.lexical_file} {e}; {repair_hint(path)}") from e
    return out


def read_deleted(path: Path, seg: Segment, data: bytes) -> list[str]:
    try:
        ids = json.loads(data.decode("utf-8"))
        if not isinstance(ids, list) or len(ids) != seg.deletes or not all(isinstance(i, str) for i in ids):
            raise ValueError(f"not a list of {seg.deletes} chunk ids")
    except (ValueError, UnicodeDecodeError) as e:
        raise KBCorruptError(f"{path / seg.deleted_file} is unreadable ({e}); {repair_hint(path)}") from e
    return ids


def plan_commit(
    manifest: Mapping, chunks: Sequence[Chunk], vectors: np.ndarray, delta: Delta | None, postings_of: PostingsOf
) -> tuple[list[Segment], dict[str, bytes], dict[int, Postings]]:
    """(the segments after this commit, the new segment files' bytes, the new segment's postings
    by number) for a commit whose result is `chunks` / `vectors`: one new segment of `delta` when
    there is one and the KB is segmented with a lexical index, else (or when compaction is due)
    the whole KB as one new segment. postings_of gives the lexical index of the segment's chunks."""
    old = segments_of(manifest, int((manifest.get("counts") or {}).get("chunks", 0)))
    number = max((s.number for s in old), default=0) + 1
    if delta is not None and has_lexical(old) and not _compaction_due(old, delta, len(chunks)):
        seg = Segment(number, len(delta.added), len(delta.deleted), lexical=ANALYSIS)
        return [*old, seg], *_encode(seg, delta.added, delta.vectors, delta.deleted, postings_of(delta.added, False))
    if not chunks:
        return [], {}, {}
    seg = Segment(number, len(chunks), lexical=ANALYSIS)
    return [seg], *_encode(seg, chunks, vectors, frozenset(), postings_of(chunks, True))


def _compaction_due(old: Sequence[Segment], delta: Delta, n_live: int) -> bool:
    rows = sum(s.rows for s in old) + len(delta.added)
    return len(old) + 1 > COMPACT_SEGMENTS or rows - n_live > COMPACT_GARBAGE * rows


def _encode(
    seg: Segment, chunks: Sequence[Chunk], vectors: np.ndarray, deleted: frozenset[str], postings: Postings
) -> tuple[dict[str, bytes], dict[int, Postings]]:
    out: dict[str, bytes] = {}
    if seg.rows:
        out[seg.lexical_file] = postings.encode()
        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(vectors, dtype=np.float32), allow_pickle=False)
        lines = "".join(json.dumps(c.to_dict(), ensure_ascii=False) + "\n" for c in chunks)
        out[seg.chunks_file] = lines.encode("utf-8")
        out[seg.vectors_file] = buf.getvalue()
    if seg.deletes:
        out[seg.deleted_file] = json.dumps(sorted(deleted)).encode("utf-8")
    return out, ({seg.number: postings} if seg.rows else {})


def prune(path: Path, recorded: Mapping[str, object]) -> None:
    """Under the writer lock, once a manifest has landed: remove the data files it does not name
    (segments compacted away, format 1's files after the first write, the files and temp files
    of a writer that died). A reader still reading them finds the manifest moved on and reads again."""
    for f in path.iterdir():
        name = f.name
        # atomic_write_bytes' temp files: `.NAME.RANDOM.tmp`
        tmp = name.startswith(".") and name.endswith(TMP_SUFFIX) and _DATA_FILE.match(name[1:].rsplit(".", 2)[0])
        if (_DATA_FILE.match(name) and name.removesuffix(".prev") not in recorded) or tmp:
            with contextlib.suppress(OSError):
                f.unlink()
