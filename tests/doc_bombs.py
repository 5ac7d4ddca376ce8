"""Zip bombs in a few KB, written at test time with the standard library: a DOCX whose
document.xml is a long run of one character (it inflates about a thousand to one), one of many
short paragraphs, and headers rewritten to state a size the data does not have. The XML is
streamed into the archive, so building one costs no more memory than a piece of it."""

from __future__ import annotations

import struct
import zipfile
from collections.abc import Iterable
from pathlib import Path

DOCUMENT = "word/document.xml"
MB = 1 << 20
_TYPES = (
    '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
)
_RELS = (
    '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
    'relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
    'relationships/officeDocument" Target="word/document.xml"/></Relationships>'
)
_OPEN = (
    b'<?xml version="1.0" encoding="UTF-8"?><w:document '
    b'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
)
_CLOSE = b"</w:body></w:document>"


def docx(path: Path, body: Iterable[bytes]) -> Path:
    """A DOCX whose document body is the pieces of `body`, deflated as they come."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", _TYPES)
        z.writestr("_rels/.rels", _RELS)
        with z.open(DOCUMENT, "w") as f:
            f.write(_OPEN)
            for piece in body:
                f.write(piece)
            f.write(_CLOSE)
    return path


def zeros_docx(path: Path, mb: int = 20) -> Path:
    """One paragraph of `mb` MB of "0": about 1 KB a MB on disk."""
    block = b"0" * MB
    return docx(path, [b"<w:p><w:r><w:t>", *(block for _ in range(mb)), b"</w:t></w:r></w:p>"])


def paragraphs_docx(path: Path, n: int) -> Path:
    """`n` paragraphs of one letter each, 35 bytes apiece inflated, a few KB in all."""
    paragraph, batch = b"<w:p><w:r><w:t>a</w:t></w:r></w:p>", 10_000
    return docx(path, (paragraph * min(batch, n - i) for i in range(0, n, batch)))


def state_size(path: Path, size: int, name: str = DOCUMENT) -> Path:
    """Rewrite what the headers of entry `name` (local and central) say it inflates to."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as z:
        local = z.getinfo(name).header_offset
    struct.pack_into("<L", data, local + 22, size)
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        (length,) = struct.unpack_from("<H", data, at + 28)
        if data[at + 46 : at + 46 + length] == name.encode():
            struct.pack_into("<L", data, at + 24, size)
        at = data.find(b"PK\x01\x02", at + 1)
    path.write_bytes(bytes(data))
    return path
