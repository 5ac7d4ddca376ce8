"""A knowledge base and its vector store: changing a shared store (Milvus) crash-safely, moving
the vectors to another store, dropping a shared store with the KB.

A shared store is written in place, outside the KB folder's commit protocol, so the KB keeps it
a superset of what is committed: under the writer lock, the ids a change touches are journaled
(`store_journal.json`) before the store is written; rows of new chunks go in before the
manifest lands, rows of deleted chunks go after it; then the journal is removed. Readers keep
only the ids of the commit they read, so the extra rows of a change under way, or of one that
died, are never seen. The next writer finds a journal left behind and settles it: rows of ids
the committed state does not hold are deleted, those it holds are written again from the
committed vectors. File stores (faiss) commit with the KB's files and need none of this.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from engine.floor.base.errors import KBError
from engine.floor.base.files import atomic_write_json
from hierarchy import store
from hierarchy.kb_manifest import MANIFEST, read_manifest
from hierarchy.kb_segments import prune
from hierarchy.vector_store.base import StoreSpec
from hierarchy.vector_store.open import new_store, open_store, with_collection

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from hierarchy.documents import Chunk
    from hierarchy.vector_store.base import VectorStore

JOURNAL = "store_journal.json"


class KnowledgeBase(Protocol):
    """What this module uses of hierarchy.kb.KnowledgeBase (which imports this module, so it is
    described here rather than imported)."""

    path: Path
    manifest: dict
    store: "VectorStore"
    chunk_ids: list[str]
    chunks: dict[str, "Chunk"]
    vectors: "np.ndarray"
    dim: int

    def row_of(self, chunk_id: str) -> int: ...

    def writing(self) -> Any: ...

    def _commit(self, chunks: list["Chunk"], vectors: "np.ndarray", vstore: "VectorStore", **kw: Any) -> None: ...


@contextmanager
def shared_store_change(kb: "KnowledgeBase", added: Collection[str], deleted: Collection[str]) -> Iterator[None]:
    """Around a change of `kb` that adds rows `added` and removes `deleted`: the body writes the
    added rows and commits. A no-op for a file store."""
    if not kb.store.spec.shared:
        yield
        return
    with store.dir_lock(kb.path):
        # The change was computed from kb's state: refuse it if another process committed since
        # (the KB's commit would refuse it too, but only after the store was written).
        if (store.recorded_files(kb.path / MANIFEST) or {}) != (kb.manifest.get("files") or {}):
            raise store.changed_error(kb.path)
        # One round trip before the journal: a server that is down fails the change here, with
        # the KB folder as it was, instead of leaving a journal of rows that never got written.
        kb.store.count()
        settle_journal(kb)
        touched = sorted({*added, *deleted})
        atomic_write_json(kb.path / JOURNAL, {"ids": touched})
        try:
            yield
        except BaseException:
            # Not committed (or committed and adopted: then nothing is left to remove): the rows
            # written for it go now if they can; the journal stays for the next writer if not.
            with contextlib.suppress(Exception):
                settle_journal(kb)
            raise
        settle_journal(kb)


def settle_journal(kb: "KnowledgeBase") -> int:
    """Under the writer lock, with kb holding the committed state: bring the store's rows of the
    journaled ids in line with the commit, then remove the journal. Returns the ids settled."""
    path = kb.path / JOURNAL
    if not kb.store.spec.shared:
        return 0
    try:
        ids = json.loads(path.read_text(encoding="utf-8"))["ids"]
    except FileNotFoundError:
        return 0
    except (OSError, ValueError, KeyError, TypeError):
        ids = None  # a torn journal: every row the commit does not hold goes
    if ids is None:
        gone = kb.store.all_ids() - set(kb.chunks)
        kept = []
    else:
        gone = [i for i in ids if i not in kb.chunks]
        kept = [i for i in ids if i in kb.chunks]
    kb.store.delete(gone)
    if kept:
        kb.store.add(kept, kb.vectors[[kb.row_of(i) for i in kept]])
    path.unlink()
    return len(gone) + len(kept)


def move_store(kb: "KnowledgeBase", spec: StoreSpec) -> bool:
    """Move kb's vectors into the store `spec` names (`index --store` naming another store than
    the manifest's): the new store is filled from the committed vectors, the manifest commits
    it, then the old store's index goes. False when the vectors are there already."""
    with kb.writing():
        if kb.store.spec.same_place(spec) and kb.store.spec.exact_max == spec.exact_max:
            return False
        old = kb.store
        settle_journal(kb)
        moved = new_store(with_collection(spec), kb.path, kb.dim, kb.chunk_ids, kb.vectors)
        kb._commit(list(kb.chunks.values()), kb.vectors, moved)
        if old.spec.shared:  # a file store's index went with the commit (hierarchy.kb_segments.prune)
            with contextlib.suppress(Exception):  # the manifest no longer names it: a left-over is harmless
                old.drop()
    return True


def drop_shared_store(path: Path) -> None:
    """Overwriting a KB whose vectors live in Milvus: its collection goes too (best effort: an
    unreadable manifest names none)."""
    try:
        spec = read_manifest(path).store
    except KBError:
        return
    if spec.shared:
        vstore = open_store(spec, path, 1, {}, [])
        vstore.drop()
        vstore.close()


def remove_kb(path: Path, layers: Path) -> None:
    """Overwriting a KB: its Milvus collection, its manifest (before the data: a crash mid-cleanup
    leaves "no KB", never a half-old one), its data files and summary layers; other files stay."""
    drop_shared_store(path)
    for name in (MANIFEST, JOURNAL):
        with contextlib.suppress(FileNotFoundError):
            (path / name).unlink()
    prune(path, {})
    shutil.rmtree(layers, ignore_errors=True)
