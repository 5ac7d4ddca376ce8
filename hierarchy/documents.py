"""The records of the chunk level: a source document and the chunks cut from it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Document:
    id: str
    title: str
    text: str
    meta: dict = field(default_factory=dict)


@dataclass
class Chunk:
    """A retrievable unit. `id` is a content hash (title + text), so identical chunks dedupe;
    `position` is the chunk's index within its document."""

    id: str
    doc_id: str
    title: str
    text: str
    position: int

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Chunk":
        return cls(
            id=str(d["id"]),
            doc_id=str(d["doc_id"]),
            title=str(d.get("title") or ""),
            text=str(d["text"]),
            position=int(d.get("position", 0)),
        )
