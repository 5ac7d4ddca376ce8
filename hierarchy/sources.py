"""Where documents come from: a folder of text files, a JSONL of documents, or the passages of
any supported QA data file."""

from __future__ import annotations

import json
import re
from pathlib import Path

from engine.base.errors import DataFormatError, LogicRouteError, UnknownFormatError
from hierarchy.datasets import load_dataset, passage_id
from hierarchy.documents import Document

TEXT_SUFFIXES = (".txt", ".md", ".markdown")
DOC_JSONL_SUFFIXES = (".jsonl", ".ndjson")
SUPPORTED = (
    "a folder of .txt/.md files (searched recursively); "
    "a .txt/.md file; "
    'a JSONL file of documents, one {"id", "title", "text"} object per line; '
    "a QA data file (HotpotQA, 2WikiMultihopQA, MuSiQue, NQ-open, SQuAD, generic QA JSONL: "
    "its passages become the documents)"
)
# Keys that mark a QA record rather than a document record.
_QA_KEYS = {"question", "question_text", "answers", "answer", "contexts", "context", "paragraphs", "ctxs", "data"}
_HEADING_RE = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def load_documents(source: str | Path) -> list[Document]:
    """Documents from a folder, a text file, a documents JSONL, or a QA data file."""
    path = Path(source).expanduser()
    if not path.exists():
        raise LogicRouteError(f"no such file or folder: {path} (expected {SUPPORTED})")
    if path.is_dir():
        return _from_folder(path)
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        doc = _from_text_file(path, path.name)
        return [doc] if doc else []
    if suffix in DOC_JSONL_SUFFIXES and _looks_like_doc_jsonl(path):
        return _from_doc_jsonl(path)
    return _from_qa_file(path)


def _title_of(text: str, fallback: str) -> str:
    m = _HEADING_RE.search(text)
    return m.group(1).strip() if m else fallback


def _from_text_file(path: Path, doc_id: str) -> Document | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise DataFormatError(f"{path}: unreadable ({e})") from None
    if not text.strip():
        return None  # nothing to index
    return Document(id=doc_id, title=_title_of(text, path.stem), text=text.strip(), meta={"source": str(path)})


def _from_folder(folder: Path) -> list[Document]:
    docs: list[Document] = []
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        # Skip hidden files and folders (.git, editor swap files).
        if any(part.startswith(".") for part in rel.parts):
            continue
        if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES:
            doc = _from_text_file(p, rel.as_posix())
            if doc:
                docs.append(doc)
    return docs


def _first_record(path: Path) -> tuple[int, str] | None:
    with path.open(encoding="utf-8", errors="replace") as f:
        for ln, line in enumerate(f, 1):
            if line.strip():
                return ln, line
    return None


def _looks_like_doc_jsonl(path: Path) -> bool:
    """True when the first record is a document ({text, ...}, no QA keys). A malformed first
    line also counts: the document reader then reports it with its line number."""
    first = _first_record(path)
    if first is None:
        raise DataFormatError(f"{path}: empty file, no documents")
    try:
        rec = json.loads(first[1])
    except json.JSONDecodeError:
        return True
    return isinstance(rec, dict) and "text" in rec and not (_QA_KEYS & set(rec))


def _from_doc_jsonl(path: Path) -> list[Document]:
    docs: dict[str, Document] = {}
    with path.open(encoding="utf-8", errors="replace") as f:
        for ln, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataFormatError(f"{path}:{ln}: malformed JSON line ({e.msg})") from None
            if not isinstance(rec, dict):
                raise DataFormatError(
                    f"{path}:{ln}: expected a JSON object {{id, title, text}}, got {type(rec).__name__}"
                )
            text, title = rec.get("text"), rec.get("title", "")
            if not isinstance(text, str):
                raise DataFormatError(f"{path}:{ln}: field 'text' must be a string")
            if title is None:
                title = ""
            if not isinstance(title, str):
                raise DataFormatError(f"{path}:{ln}: field 'title' must be a string")
            doc_id = rec.get("id")
            if doc_id is None:
                # No id: the passage's content hash, so reloading the same file gives the same ids.
                doc_id = passage_id(title, text)
            elif not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool):
                raise DataFormatError(f"{path}:{ln}: field 'id' must be a string or integer")
            meta = {k: v for k, v in rec.items() if k not in ("id", "title", "text")}
            if text.strip():
                docs[str(doc_id)] = Document(id=str(doc_id), title=title, text=text, meta=meta)
    return list(docs.values())


def _from_qa_file(path: Path) -> list[Document]:
    try:
        ds = load_dataset(path)
    except UnknownFormatError as e:
        raise UnknownFormatError(f"{path}: unknown format. Supported: {SUPPORTED}. (QA reader: {e})") from None
    return [Document(id=p.id, title=p.title, text=p.text, meta={"dataset": ds.name}) for p in ds.passages]
