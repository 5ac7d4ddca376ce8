"""The documents an add takes in (hierarchy.kb.KnowledgeBase.add): checked, and each given the id
it is stored under. Every way in (`logicroute index`, the server, the Python API) passes here.

Text. A document with no character a reader can see (engine.floor.base.text.has_text) is refused
(DataFormatError naming it), and the whole add with it: empty, or only whitespace, zero-width,
format, control characters (NUL) or marks with nothing to sit on (U+FE0F). It would give a chunk
that no question can find, and a caller told "1 document" would believe it indexed. Folders skip
such files with a warning before they get here (hierarchy.sources). Lone surrogates (a JSON
"\ud800" escape) in an id, title or text are replaced by U+FFFD, with one warning line naming
the documents: no UTF-8 file or tokenizer can carry them.

Ids. A document that comes with an id of its own (JSONL, QA data, the server, the Python API)
keeps it and replaces the document of that id: that is what an id means. A file read from a
folder (Document.root set) has its path below that folder as id, so two folders may well hold
files of the same relative name, and `index docs/` then `index more_docs/` (the README's own
sequence) must keep both, while indexing docs/ again must update its documents in place. The
KB keeps each chunk's source file (Chunk.source: the resolved absolute path; a KB written
before that records the path as given on the command line, read here relative to the working
directory), and that tells the two cases apart:

1. A file the KB (or this add) already holds keeps the id it has there, whichever folder it is
   read through: re-indexing updates in place.
2. Else the file takes its relative id ("x.txt") when that is free,
3. else the id that carries its folder's name ("more_docs/x.txt") when that is free: the second
   folder lands beside the first, and one line says which documents got such ids.
4. An id whose holder's file no longer exists counts as free: that document was moved or renamed
   (a folder renamed, or an old KB indexed from another working directory), and the file that
   now claims its id takes its place in the KB, with one line saying so. Refusing instead would
   leave a moved folder unindexable without a delete first.
5. When both ids are held by other files that still exist, the add is refused before anything
   is embedded, naming the file and the one that holds the id. Never resolved silently.

Within one add the same rules hold: a later file claims what the add's earlier files left free.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from engine.floor.base.errors import DataFormatError, DocumentIdConflictError
from engine.floor.base.text import has_text, lone_surrogates, repaired
from hierarchy.documents import Chunk, Document

log = logging.getLogger("logicroute.kb")
_NAMED = 5  # documents named in a summary line; the rest are counted


def take_in(
    docs: Iterable[Document], chunks: Mapping[str, Chunk], doc_chunks: Mapping[str, Sequence[str]]
) -> list[Document]:
    """The documents to add to a KB holding `chunks` (id -> chunk) of documents `doc_chunks`
    (id -> chunk ids): text checked, file documents under the id rules above, the last
    version of each id winning."""
    ids = _Ids(chunks, doc_chunks)
    by_id: dict[str, Document] = {}
    mended: list[str] = []
    for d in docs:
        check_text(d)  # before the repair: a text of lone surrogates alone shows nothing
        d = _without_lone_surrogates(d, mended)
        if d.root:
            d = replace(d, id=ids.settle(d))
        else:
            ids.claim(d.id, "")
        by_id.pop(d.id, None)
        by_id[d.id] = d
    ids.report()
    if mended:
        log.warning(
            "%d %s lone surrogates (text that is no Unicode, e.g. a JSON \\ud800 escape), each replaced by U+FFFD: %s",
            len(mended),
            "document held" if len(mended) == 1 else "documents held",
            _some(mended),
        )
    return list(by_id.values())


def _without_lone_surrogates(doc: Document, mended: list[str]) -> Document:
    """The document with each lone surrogate of its id, title and text replaced by U+FFFD
    (engine.floor.base.text), its id added to `mended` when it had one. A file's id is its name, which
    hierarchy.sources never lets through with one."""
    fields = {"id": doc.id, "title": doc.title, "text": doc.text}
    if not any(isinstance(v, str) and lone_surrogates(v) for v in fields.values()):
        return doc
    fixed = replace(doc, **{k: repaired(v) for k, v in fields.items() if isinstance(v, str)})
    mended.append(fixed.id)
    return fixed


def check_text(doc: Document) -> None:
    """DataFormatError unless the document has text to index."""
    if not isinstance(doc.text, str) or not has_text(doc.text):
        where = f" ({doc.meta['source']})" if doc.meta.get("source") else ""
        raise DataFormatError(
            f"document {doc.id!r}{where} has no text (empty, or only whitespace, zero-width or control characters): "
            "nothing to index"
        )


def file_key(source: str) -> str:
    """The file a chunk's source names, as one comparable string; "" when it names no local file
    (a URL, a source the server was given as a label, none). Absolute sources are already
    resolved when read (hierarchy.sources); a relative one (a KB written before) is read
    relative to the working directory, as the command that wrote it was run."""
    if not source or "://" in source:
        return ""
    if os.path.isabs(source):
        return os.path.normpath(source)
    return os.path.realpath(source)


@dataclass
class _Ids:
    """Who holds which id: the KB's documents (their source files, read once it is needed) and
    what this add has claimed so far."""

    chunks: Mapping[str, Chunk]
    doc_chunks: Mapping[str, Sequence[str]]
    claimed: dict[str, str] = field(default_factory=dict)  # id -> file key ("": no file) claimed in this add
    _held: dict[str, str] | None = None  # the KB's: id -> file key
    _by_file: dict[str, str] = field(default_factory=dict)  # file key -> id, the KB's and this add's
    rooted: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)

    @property
    def held(self) -> dict[str, str]:
        if self._held is None:
            self._held = {d: file_key(self.chunks[ids[0]].source) for d, ids in self.doc_chunks.items() if ids}
            for d, key in self._held.items():
                if key:
                    self._by_file.setdefault(key, d)
        return self._held

    def claim(self, doc_id: str, key: str) -> None:
        self.claimed[doc_id] = key
        if key:
            self._by_file[key] = doc_id

    def settle(self, doc: Document) -> str:
        key = file_key(str(doc.meta.get("source") or ""))
        held = self.held
        if key and key in self._by_file:  # rule 1
            self.claim(self._by_file[key], key)
            return self._by_file[key]
        rooted = f"{Path(doc.root).name or 'root'}/{doc.id}"
        for candidate in (doc.id, rooted):  # rules 2 and 3
            holder = self.claimed.get(candidate, held.get(candidate))
            if holder is None or (candidate not in self.claimed and _gone(holder)):
                if holder is not None:
                    self.moved.append(f"{candidate} ({holder} -> {key})")
                if candidate != doc.id:
                    self.rooted.append(candidate)
                self.claim(candidate, key)
                return candidate
        holder = self.claimed.get(rooted, held.get(rooted)) or "a document with that id and no file"
        raise DocumentIdConflictError(  # rule 5
            f"two files claim document id {rooted!r}: {holder} (holds it) and {key or doc.id}; "
            f"nothing changed: delete the first with `--delete {rooted}` or index the second from another folder"
        )

    def report(self) -> None:
        if self.rooted:
            log.info(
                "%d documents indexed with their folder's name in the id, since files of the same name from "
                "another folder hold theirs: %s",
                len(self.rooted),
                _some(self.rooted),
            )
        if self.moved:
            log.info("%d documents whose files are gone taken as moved: %s", len(self.moved), _some(self.moved))


def _gone(key: str) -> bool:
    """Whether a holder's file is no longer there (a holder with no file never is)."""
    return bool(key) and not os.path.exists(key)


def _some(items: list[str]) -> str:
    more = f" and {len(items) - _NAMED} more" if len(items) > _NAMED else ""
    return ", ".join(items[:_NAMED]) + more
