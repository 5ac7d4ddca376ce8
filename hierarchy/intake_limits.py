"""How much one file may cost to read, and the checks that run before any converter does.

A small file can unpack to a huge one: a 1.2 MB DOCX whose document.xml inflates to 1 GB, a
3 MB one of a million short paragraphs that the DOCX reader turns into gigabytes of objects.
So before a converter sees a file (hierarchy.conversion runs these checks in its worker):

- every file: its size on disk (a text or HTML file against max_text_mb, others max_file_mb);
- a zip-based file (DOCX, PPTX): the sizes its entries declare, each entry's compression ratio,
  then what the entries actually inflate to, streamed with a cap so that a header that
  understates a size cannot pass, and the paragraphs its XML holds;
- a PDF: its page count and what its pages' content streams inflate to.

The converted text is held to max_text_mb too. Over a limit, the file is skipped with one line
that names the limit's setting (`logicroute index --set intake.KEY=VALUE` raises it), and the
run goes on. The time and memory limits hold the conversion itself (hierarchy.conversion).
"""

from __future__ import annotations

import struct
import tomllib
import zipfile
import zlib
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from engine.floor.base.errors import ConfigError

MB = 1 << 20
PREFIX = "intake."
RATIO_FLOOR = MB  # an entry that inflates to less is harmless whatever its ratio
_CHUNK = MB  # the most one step of a streamed inflate produces
_PARAGRAPH_TAGS = (b"<w:p>", b"<w:p ", b"<a:p>", b"<a:p ")  # WordprocessingML, DrawingML
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # a zip entry's local header, as zipfile reads it


@dataclass(frozen=True)
class IntakeLimits:
    """The limits on reading one file, and whether a site's aggregate pages are read too
    (docs/configuration.md, "Reading documents")."""

    max_file_mb: float = 200  # a PDF, DOCX or PPTX file on disk
    max_text_mb: float = 10  # a text, Markdown or HTML file; the text any file converts to (indexing holds ~40x it)
    max_inflated_mb: float = 200  # what a zip-based file unpacks to; a PDF's content streams
    max_ratio: float = 200  # an entry's inflated size over its compressed size (entries > 1 MB)
    max_paragraphs: int = 100_000  # the paragraphs of a DOCX or PPTX
    max_pages: int = 5_000  # the pages of a PDF
    max_seconds: float = 120  # converting one file
    max_memory_mb: float = 2_048  # the converting process's address space
    keep_aggregates: bool = False  # read a site's aggregate, navigation and duplicate pages too (hierarchy.site_pages)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "keep_aggregates":
                if not isinstance(value, bool):
                    raise ConfigError(f"{PREFIX}{f.name} must be true or false, got {value!r}")
            elif isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ConfigError(f"{PREFIX}{f.name} must be a number above 0, got {value!r}")

    @classmethod
    def from_sets(cls, sets: tuple[str, ...] | list[str] = ()) -> IntakeLimits:
        """The defaults with each `intake.KEY=VALUE` of `sets` over them; ConfigError for an
        unknown key or a bad value, in one line."""
        values: dict = {}
        known = [f.name for f in fields(cls)]
        for pair in sets:
            key, eq, raw = pair.partition("=")
            name = key.strip().removeprefix(PREFIX)
            if not eq or not key.strip().startswith(PREFIX) or name not in known:
                # NAME, not KEY: a message naming a KEY= is redacted as if it held a secret (engine.floor.llm.urls)
                raise ConfigError(f"--set {pair!r}: expected {PREFIX}NAME=VALUE, NAME one of {', '.join(known)}")
            try:
                values[name] = tomllib.loads(f"v = {raw.strip()}")["v"]
            except tomllib.TOMLDecodeError:
                raise ConfigError(f"--set {pair!r}: {raw.strip()!r} is not a number or true/false") from None
        return cls(**values)

    def to_dict(self) -> dict:
        return asdict(self)


class OverLimit(Exception):
    """A file over a limit; the message says which, as the setting that raises it."""


def over(what: str, key: str, limit: float) -> OverLimit:
    return OverLimit(f"{what}, over the limit {PREFIX}{key}={limit:g}")


def check_file(path: Path, kind: str, limits: IntakeLimits) -> None:
    """OverLimit when the file at `path` (a pdf, html, docx or pptx) is over a limit that can be
    checked without converting it. Reads at most a bounded amount at a time."""
    size = path.stat().st_size
    if kind == "html":
        if size > limits.max_text_mb * MB:
            raise over(f"an HTML file of {size / MB:,.0f} MB", "max_text_mb", limits.max_text_mb)
        return
    if size > limits.max_file_mb * MB:
        raise over(f"a file of {size / MB:,.0f} MB", "max_file_mb", limits.max_file_mb)
    if kind == "pdf":
        check_pdf(path, limits)
    else:
        check_archive(path, limits)


def check_text(text: str, limits: IntakeLimits) -> None:
    if len(text) > limits.max_text_mb * MB:
        raise over(f"{len(text) / MB:,.0f} MB of text", "max_text_mb", limits.max_text_mb)


# ---------------------------------------------------------------- zip-based files


def check_archive(path: Path, limits: IntakeLimits) -> None:
    """The declared sizes first (free: the central directory says them), then each entry
    inflated for real, never more than the limit allows in all."""
    cap = limits.max_inflated_mb * MB
    with zipfile.ZipFile(path) as zf, path.open("rb") as raw:
        entries = zf.infolist()
        declared = sum(e.file_size for e in entries)
        if declared > cap:
            raise over(f"unpacks to {declared / MB:,.0f} MB (as its entries declare)", "max_inflated_mb", cap / MB)
        for e in entries:
            if e.file_size > RATIO_FLOOR and e.file_size > limits.max_ratio * max(e.compress_size, 1):
                ratio = e.file_size / max(e.compress_size, 1)
                raise over(f"{e.filename} is compressed {ratio:,.0f} to 1", "max_ratio", limits.max_ratio)
        inflated = paragraphs = 0
        for e in entries:
            for piece in _inflate(zf, raw, e):
                inflated += len(piece)
                if inflated > cap:
                    raise over(f"unpacks to more than {cap / MB:g} MB", "max_inflated_mb", cap / MB)
                if e.filename.endswith(".xml"):
                    paragraphs += sum(piece.count(tag) for tag in _PARAGRAPH_TAGS)
                    if paragraphs > (most := limits.max_paragraphs):
                        raise over(f"holds more than {most:,} paragraphs", "max_paragraphs", most)


def _inflate(zf: zipfile.ZipFile, raw, entry: zipfile.ZipInfo):
    """The entry's bytes, a bounded piece at a time. A deflated entry is inflated from its raw
    data, whatever size its header states (zipfile would stop at the stated size). A tag cut
    in two by a piece's edge goes uncounted: the count is a bound against floods, not a tally."""
    if entry.compress_type != zipfile.ZIP_DEFLATED:
        with zf.open(entry) as f:
            while piece := f.read(_CHUNK):
                yield piece
        return
    raw.seek(entry.header_offset)
    header = _LOCAL_HEADER.unpack(raw.read(_LOCAL_HEADER.size))
    if header[0] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"{entry.filename}: bad local header")
    raw.seek(header[-2] + header[-1], 1)  # past the name and the extra field
    inflater, left = zlib.decompressobj(-zlib.MAX_WBITS), entry.compress_size
    while left > 0 and not inflater.eof:
        data = raw.read(min(_CHUNK, left))
        if not data:
            break
        left -= len(data)
        while data and not inflater.eof:
            yield inflater.decompress(data, _CHUNK)
            data = inflater.unconsumed_tail


# ---------------------------------------------------------------- PDF


def check_pdf(path: Path, limits: IntakeLimits) -> None:
    """The page count, then what the pages' content streams inflate to in all (a stream that
    is not Flate-compressed counts its stored size). pypdf reads lazily: only the page tree and
    the streams are touched."""
    from pypdf import PdfReader
    from pypdf.generic import ArrayObject

    reader = PdfReader(path)
    if reader.is_encrypted:
        return  # the converter says whether it opens; its streams cannot be read before that
    pages = len(reader.pages)
    if pages > limits.max_pages:
        raise over(f"a PDF of {pages:,} pages", "max_pages", limits.max_pages)
    cap, inflated = limits.max_inflated_mb * MB, 0
    for page in reader.pages:
        contents = page.get("/Contents")
        contents = contents.get_object() if contents is not None else None
        streams = contents if isinstance(contents, ArrayObject) else [contents] if contents is not None else []
        for stream in streams:
            inflated += _stream_size(stream.get_object(), cap - inflated)
            if inflated > cap:
                raise over(f"its pages' streams unpack to more than {cap / MB:g} MB", "max_inflated_mb", cap / MB)


def _stream_size(stream, room: float) -> int:
    """What a content stream inflates to, counted until it passes `room`."""
    data = getattr(stream, "_data", b"") or b""
    filters = stream.get("/Filter") if hasattr(stream, "get") else None
    first = filters[0] if isinstance(filters, list) and filters else filters
    if first not in ("/FlateDecode", "/Fl"):
        return len(data)
    inflater, size = zlib.decompressobj(), 0
    try:
        while data and not inflater.eof and size <= room:
            size += len(inflater.decompress(data, _CHUNK))
            data = inflater.unconsumed_tail
    except zlib.error:
        pass  # a damaged stream: the converter reads what it can of it
    return size
