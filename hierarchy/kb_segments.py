"""The chunk level of a knowledge base as append-only segments, so a commit costs what changed.

A segment is written once and never changed: `seg-N.chunks.jsonl` (one Chunk per line) and
`seg-N.vectors.npy` (float32 rows, row i <-> line i) for the chunks a commit adds, and
`seg-N.deleted.json` (a JSON list) for the chunk ids it removes. The manifest lists the
segments in order ("segments") and fingerprints their files ("files"); the KB is what replaying
them gives: a segment's deletions first, then its chunks, a chunk id seen again taking the place
of the earlier copy (a chunk whose position or source changed). An add writes one segment of the
new chunks, a delete one small list: O(what changed), plus the manifest, whose size grows with
the number of segments only.

Rows that replaying drops (deleted, or superseded by a later copy) stay on disk until the
segments are compacted into one: when they pass COMPACT_GARBAGE of all rows, or the segments
pass COMPACT_SEGMENTS, so opening stays one read of about the KB's size. Compaction, the first
write to a KB of format 1 (one `chunks.jsonl` + `vectors.npy`, read as a single segment), a
repair and a move to another store write the whole KB as one new segment. Every segment has a
new name, so a commit overwrites none of them; after the manifest lands, data files it no longer
names are removed (`prune`).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.base.errors import KBCorruptError
from engine.base.files import TMP_SUFFIX
from hierarchy.documents import Chunk
from hierarchy.kb_files import CHUNKS, INDEX, VECTORS, decode_chunks, decode_vectors, repair_hint
from hierarchy.vector_store.base import FAISS_DEAD as DEAD

COMPACT_GARBAGE = 0.2  # dropped rows over all rows on disk past which the segments are rewritten as one
COMPACT_SEGMENTS = 32  # segments past which they are rewritten as one
# Every data file name a KB folder may hold, in either format (a `.prev` snapshot too).
_DATA_FILE = re.compile(
    r"^(seg-\d+\.(chunks\.jsonl|vectors\.npy|deleted\.json)|"
    + "|".join(re.escape(n) for n in (CHUNKS, VECTORS, INDEX, DEAD))
    + r")(\.prev)?$"
)


@dataclass(frozen=True)
class Segment:
    """One segment as the manifest lists it. number 0 is the single segment of format 1."""

    number: int
    rows: int
    deletes: int = 0

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

    def files(self) -> tuple[str, ...]:
        """The files this segment has (format 1's has both, even when empty)."""
        rows = (self.chunks_file, self.vectors_file) if self.rows or self.legacy else ()
        return rows + ((self.deleted_file,) if self.deletes else ())

    def to_dict(self) -> dict:
        return {"number": self.number, "rows": self.rows, "deletes": self.deletes}


def segments_of(manifest: Mapping, n_chunks: int) -> list[Segment]:
    """The segments a manifest lists; a manifest of format 1 (no "segments") has one legacy
    segment of its n_chunks chunks. KBCorruptError when the entry does not read."""
    entry = manifest.get("segments")
    if entry is None:
        return [Segment(0, n_chunks)]
    try:
        segs = [Segment(int(s["number"]), int(s["rows"]), int(s.get("deletes", 0))) for s in entry]
    except (TypeError, KeyError, ValueError) as e:
        raise KBCorruptError(f"its segments entry is unreadable ({e})") from e
    if any(s.number < 1 or s.rows < 0 or s.deletes < 0 for s in segs) or len({s.number for s in segs}) != len(segs):
        raise KBCorruptError(f"its segments entry is malformed: {entry!r}")
    return segs


def segment_files(segments: Sequence[Segment]) -> list[str]:
    return [name for s in segments for name in s.files()]


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


def read_deleted(path: Path, seg: Segment, data: bytes) -> list[str]:
    try:
        ids = json.loads(data.decode("utf-8"))
        if not isinstance(ids, list) or len(ids) != seg.deletes or not all(isinstance(i, str) for i in ids):
            raise ValueError(f"not a list of {seg.deletes} chunk ids")
    except (ValueError, UnicodeDecodeError) as e:
        raise KBCorruptError(f"{path / seg.deleted_file} is unreadable ({e}); {repair_hint(path)}") from e
    return ids


def plan_commit(
    manifest: Mapping, chunks: Sequence[Chunk], vectors: np.ndarray, delta: Delta | None
) -> tuple[list[Segment], dict[str, bytes]]:
    """(the segments after this commit, the new segment files' bytes) for a commit whose result
    is `chunks` / `vectors`: one new segment of `delta` when there is one and the KB is segmented,
    else (or when compaction is due) the whole KB as one new segment."""
    old = segments_of(manifest, int((manifest.get("counts") or {}).get("chunks", 0)))
    number = max((s.number for s in old), default=0) + 1
    if delta is not None and not any(s.legacy for s in old) and not _compaction_due(old, delta, len(chunks)):
        seg = Segment(number, len(delta.added), len(delta.deleted))
        return [*old, seg], _encode(seg, delta.added, delta.vectors, delta.deleted)
    if not chunks:
        return [], {}
    seg = Segment(number, len(chunks))
    return [seg], _encode(seg, chunks, vectors, frozenset())


def _compaction_due(old: Sequence[Segment], delta: Delta, n_live: int) -> bool:
    rows = sum(s.rows for s in old) + len(delta.added)
    return len(old) + 1 > COMPACT_SEGMENTS or rows - n_live > COMPACT_GARBAGE * rows


def _encode(seg: Segment, chunks: Sequence[Chunk], vectors: np.ndarray, deleted: frozenset[str]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    if seg.rows:
        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(vectors, dtype=np.float32), allow_pickle=False)
        lines = "".join(json.dumps(c.to_dict(), ensure_ascii=False) + "\n" for c in chunks)
        out[seg.chunks_file] = lines.encode("utf-8")
        out[seg.vectors_file] = buf.getvalue()
    if seg.deletes:
        out[seg.deleted_file] = json.dumps(sorted(deleted)).encode("utf-8")
    return out


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
