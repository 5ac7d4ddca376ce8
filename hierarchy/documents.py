"""The records of the chunk level: a source document and the chunks cut from it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Document:
    """A source document. `root`: for a file read from a folder, that folder (resolved), its id
    being the file's path below it; empty when the id was given (JSONL, QA data, the server).
    A file's id may then take the folder's name to stay apart from another folder's file of the
    same name (hierarchy.kb_intake)."""

    id: str
    title: str
    text: str
    meta: dict = field(default_factory=dict)
    root: str = ""


@dataclass
class Chunk:
    """A retrievable unit. `id` is a content hash (title + text), so identical chunks dedupe;
    `position` is the chunk's index within its document. `heading_path` ("Title > Section")
    is set for documents cut along their headings; `source` is the document's file path or URL;
    `pages` the PDF pages the text comes from ("14", "14-15"). Each is recorded only when set,
    so chunks without them read and write as before."""

    id: str
    doc_id: str
    title: str
    text: str
    position: int
    heading_path: str = ""
    source: str = ""
    pages: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        for key in _OPTIONAL:
            if not d[key]:
                del d[key]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Chunk":
        return cls(
            id=str(d["id"]),
            doc_id=str(d["doc_id"]),
            title=str(d.get("title") or ""),
            text=str(d["text"]),
            position=int(d.get("position", 0)),
            heading_path=str(d.get("heading_path") or ""),
            source=str(d.get("source") or ""),
            pages=str(d.get("pages") or ""),
        )


_OPTIONAL = ("heading_path", "source", "pages")
