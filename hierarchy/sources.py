"""Where documents come from: a folder of text files, a JSONL of documents, or the passages of
any supported QA data file.

Markdown files (.md, .markdown) are cut along their headings (hierarchy.chunking): a YAML front
matter block is read for its `title` and left out of the text; the title is that, else the first
level-1 heading, else the file name. Plain text keeps the word-window chunking, titled by its
first Markdown-style heading or its file name.

Text files are read as UTF-8; a file that is not valid UTF-8 is decoded as Windows-1252 (every
byte maps to a character, and it is what such files usually are), and the document records it
(meta["encoding"]) with a warning on the "logicroute" logger. A file with NUL bytes is binary
whatever its name, and is skipped with a warning; so are files of a folder with no text that
shows (empty, only whitespace or zero-width characters: hierarchy.kb_intake.has_text), and
files over the size limit (hierarchy.intake_limits).

PDF, HTML, DOCX and PPTX files are converted to Markdown (hierarchy.converters, the `docs`
extra) and chunked along their headings; a PDF's chunks carry their pages. Conversion is
bounded (hierarchy.conversion: sizes checked first, then a time and a memory limit per file).
A PDF that is encrypted or scanned, or a file over a limit, is skipped with one line of its
own. Files of a folder that no reader takes (.rst, images; a PDF when the extra is missing,
with the command that installs it) are counted by kind in one warning, and listed at debug
level (`index -v`). A folder is read as
hierarchy.folder_walk walks it: links that lead outside it are skipped and named, and named
pipes, sockets and devices are never opened, in a folder or named alone. A documentation site's
aggregate and navigation pages (print.html, genindex.html) and copies of pages are left out with
one line each (hierarchy.site_pages; intake.keep_aggregates reads them). A source that yields no
document at all is refused: indexing nothing is always a mistake.

A file's id is its path below the folder named (a file named alone: its name); the document
records its resolved absolute path (meta["source"], kept in its chunks) and that folder
(Document.root), so that a KB tells a second folder's x.txt from the first's (hierarchy.kb_intake)."""

from __future__ import annotations

import json
import logging
import os
import re
import stat
from collections import Counter
from pathlib import Path

from engine.floor.base.errors import DataFormatError, LogicRouteError, UnknownFormatError
from engine.floor.base.text import has_text, lone_surrogates, shown
from hierarchy import conversion, converters, site_pages
from hierarchy.chunking import MARKDOWN, markdown_title
from hierarchy.datasets import load_dataset, passage_id
from hierarchy.documents import Document
from hierarchy.folder_walk import report, special_kind, walk_folder
from hierarchy.intake_limits import MB, PREFIX, IntakeLimits

TEXT_SUFFIXES = (".txt", ".md", ".markdown")
MARKDOWN_SUFFIXES = (".md", ".markdown")
DOC_JSONL_SUFFIXES = (".jsonl", ".ndjson")
SUPPORTED = (
    "a folder of .txt/.md/.pdf/.html/.docx/.pptx files (searched recursively); "
    "one such file; "
    'a JSONL file of documents, one {"id", "title", "text"} object per line; '
    "a QA data file (HotpotQA, 2WikiMultihopQA, MuSiQue, NQ-open, SQuAD, generic QA JSONL: "
    "its passages become the documents)"
)
# Keys that mark a QA record rather than a document record.
_QA_KEYS = {"question", "question_text", "answers", "answer", "contexts", "context", "paragraphs", "ctxs", "data"}
_HEADING_RE = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.M)
FALLBACK_ENCODING = "cp1252"
_BINARY_PROBE = 8192  # bytes looked at for a NUL
log = logging.getLogger("logicroute.sources")


def load_documents(source: str | Path, limits: IntakeLimits | None = None) -> list[Document]:
    """Documents from a folder, a text file, a documents JSONL, or a QA data file; `limits`: the
    limits on reading one file (hierarchy.intake_limits; None: the defaults)."""
    path = Path(source).expanduser()
    limits = limits or IntakeLimits()
    if not path.exists():
        raise LogicRouteError(f"no such file or folder: {path} (expected {SUPPORTED})")
    if lone_surrogates(path.name):
        raise DataFormatError(f"{shown(str(path))}: the file's name is not UTF-8: rename it to index it")
    mode = path.stat().st_mode
    if special_kind(mode):  # opening a named pipe blocks until a writer comes
        raise DataFormatError(f"{path}: {special_kind(mode)}, not a file: not read (give a file or a folder)")
    if path.is_dir():
        docs = _from_folder(path, limits)
    elif path.suffix.lower() in TEXT_SUFFIXES:
        doc = _from_text_file(path.resolve(), path.name, path.resolve().parent, limits)
        docs = [doc] if doc else []
    elif converters.kind_of(path):
        doc = _from_converted_file(path.resolve(), path.name, path.resolve().parent, limits)
        docs = [doc] if doc else []
    elif path.suffix.lower() in DOC_JSONL_SUFFIXES and _looks_like_doc_jsonl(path):
        docs = _from_doc_jsonl(path)
    else:
        docs = _from_qa_file(path)
    if not docs:
        raise DataFormatError(f"{path}: no document with text to index (expected {SUPPORTED})")
    return docs


def _title_of(text: str, fallback: str) -> str:
    m = _HEADING_RE.search(text)
    return m.group(1).strip() if m else fallback


def read_text_file(path: Path, limits: IntakeLimits | None = None) -> tuple[str, str] | None:
    """(text, encoding) of a text file, or None (with a warning) when it is binary, not a regular
    file or over the size limit. Opened without blocking and checked on the open file, so a
    file swapped for a named pipe after the folder was listed is not waited on either."""
    limit = (limits or IntakeLimits()).max_text_mb
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                log.warning("%s: skipped, %s (never read)", path, special_kind(info.st_mode))
                return None
            if info.st_size > limit * MB:
                log.warning(
                    "%s: skipped, a file of %s MB, over the limit %smax_text_mb=%g",
                    path, f"{info.st_size / MB:,.0f}", PREFIX, limit,
                )  # fmt: skip
                return None
            raw = f.read()
    except OSError as e:
        raise DataFormatError(f"{path}: unreadable ({e.strerror or e})") from None
    if b"\x00" in raw[:_BINARY_PROBE]:
        log.warning("%s: skipped, binary content (NUL bytes) in a text-named file", path)
        return None
    try:
        return raw.decode("utf-8-sig"), "utf-8"
    except UnicodeDecodeError as e:
        log.warning("%s: not UTF-8 (%s at byte %d): read as %s", path, e.reason, e.start, FALLBACK_ENCODING)
        return raw.decode(FALLBACK_ENCODING, errors="replace"), FALLBACK_ENCODING


def _from_text_file(path: Path, doc_id: str, root: Path, limits: IntakeLimits) -> Document | None:
    got = read_text_file(path, limits)
    if got is None:
        return None
    text, encoding = got
    meta = {"source": str(path)}
    if encoding != "utf-8":
        meta["encoding"] = encoding
    if path.suffix.lower() in MARKDOWN_SUFFIXES:
        front, text = split_front_matter(text, path)
        meta["format"] = MARKDOWN
        title = _front_matter_title(front) or markdown_title(text) or path.stem
    else:
        title = _title_of(text, path.stem)
    if not has_text(text):
        log.warning("%s: skipped, no text in it (empty, or only whitespace or zero-width characters)", path)
        return None
    return Document(id=doc_id, title=title, text=text.strip(), meta=meta, root=str(root))


def _from_converted_file(
    path: Path, doc_id: str, root: Path, limits: IntakeLimits, marks: dict | None = None
) -> Document | None:
    """A PDF, HTML, DOCX or PPTX file as a Markdown document (None when it holds no text we can
    read or breaks a limit: hierarchy.conversion warned why); `marks` gains what the converter
    saw of the page besides its text (hierarchy.site_pages)."""
    converted = conversion.convert(path, limits)
    if converted is None:
        return None
    if marks is not None:
        marks[doc_id] = site_pages.Marks(converted.link_share)
    meta = {"source": str(path), "format": MARKDOWN, "converted_from": converters.kind_of(path)}
    if converted.pages:
        meta["pages"] = converted.pages
    title = converted.title or markdown_title(converted.text) or path.stem
    return Document(id=doc_id, title=title, text=converted.text, meta=meta, root=str(root))


def split_front_matter(text: str, where: str | Path = "") -> tuple[dict, str]:
    """(front matter fields, the text after it). Front matter is a YAML block between a first
    line "---" and the next "---" or "..." line (Jekyll, Hugo, MkDocs, Docusaurus). A block that
    does not read as YAML (a template, say) is still left out, with a warning; one that reads
    as a plain string is prose between two rules and stays in the text."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        return {}, text
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), None)
    if end is None:
        return {}, text
    import yaml

    try:
        fields = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f", line {mark.line + 2}" if mark is not None else ""  # + the "---" line, 1-based
        problem = getattr(e, "problem", None) or " ".join(str(e).split())
        log.warning("%s: front matter is not YAML (%s%s): left out of the text", where, problem, at)
        fields = None
    if isinstance(fields, (str, int, float, list)):
        return {}, text
    return (fields if isinstance(fields, dict) else {}), "".join(lines[end + 1 :])


def _front_matter_title(fields: dict) -> str:
    title = fields.get("title")
    return " ".join(str(title).split()) if isinstance(title, (str, int, float)) else ""


def _from_folder(folder: Path, limits: IntakeLimits) -> list[Document]:
    root = folder.resolve()  # ids are paths below it; sources are absolute (hierarchy.kb_intake compares them)
    docs: list[Document] = []
    skipped: Counter[str] = Counter()
    walk = walk_folder(root)
    report(folder, walk)
    site, named, marks = site_pages.Site(walk.files), [], {}
    for rel, p in walk.files:
        suffix, kind = Path(rel).suffix.lower(), converters.kind_of(Path(rel))
        readable = suffix in TEXT_SUFFIXES or (kind is not None and converters.available(kind))
        if readable and not limits.keep_aggregates and (why := site.named(rel)):
            named.append(f"{rel} ({why})")  # never converted: print.html is the whole book
            continue
        if suffix in TEXT_SUFFIXES:
            doc = _from_text_file(p, rel, root, limits)
        elif kind is not None and converters.available(kind):
            doc = _from_converted_file(p, rel, root, limits, marks)
        else:
            label = suffix or "(no extension)"
            log.debug("%s: skipped, no reader for %s files", p, label)
            skipped[label] += 1
            continue
        if doc:
            docs.append(doc)
    if skipped:
        log.warning("%s: %s", folder, skipped_line(skipped))
    return docs if limits.keep_aggregates else site_pages.select(folder, docs, marks, named)


def skipped_line(skipped: Counter[str]) -> str:
    """The files of a folder no reader took, in one line, whatever the count: a folder of 300
    PDFs must not read as indexed. Kinds that the docs extra reads name its install command."""
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])))
    line = f"skipped {skipped.total()} files: {kinds} (no reader; -v lists them)"
    convertible = sorted(k for k in skipped if k in converters.KINDS)
    if convertible:
        line += f"; {', '.join(convertible)} files are read with the docs extra: {converters.DOCS_EXTRA}"
    return line


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
            if has_text(text):
                docs[str(doc_id)] = Document(id=str(doc_id), title=title, text=text, meta=meta)
    return list(docs.values())


def _from_qa_file(path: Path) -> list[Document]:
    try:
        ds = load_dataset(path)
    except UnknownFormatError as e:
        raise UnknownFormatError(f"{path}: unknown format. Supported: {SUPPORTED}. (QA reader: {e})") from None
    # A passage with no text gives no chunk (and an add refuses a document without text).
    passages = [p for p in ds.passages if has_text(p.text)]
    return [Document(id=p.id, title=p.title, text=p.text, meta={"dataset": ds.name}) for p in passages]
