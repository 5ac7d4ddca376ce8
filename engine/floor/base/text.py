"""What counts as text, for questions and documents alike: every door (the CLI, a questions file,
the HTTP server, MCP, a folder, a JSONL, the Python API) asks here.

Visible text. A text shows something when it holds a character that is not a separator (Z*),
a control or format character (Cc, Cf: NUL, U+200B, U+FEFF), a lone surrogate, an unassigned
code point, a mark with nothing to sit on (Mn, Me: U+034F the combining grapheme joiner,
U+FE0F and the other variation selectors, U+180B-U+180F the Mongolian free variation
selectors), or a letter that draws nothing (the Hangul fillers, the blank Braille pattern).
A question of such characters asks nothing, and a document of them gives a chunk no question
finds: both are refused in one line before any LLM call.

Lone surrogates. A name the file system gives as bytes that are not UTF-8 arrives as a str
holding lone surrogates (os.fsdecode's surrogateescape); so does a JSON string with a "\\ud800"
escape. No UTF-8 file, tokenizer or JSON reply can carry one. Text is repaired in one way:
each lone surrogate becomes U+FFFD, the replacement character (`repaired`). A file name is not
repaired, since the KB must open the file again by it: such a file is skipped and named
(`shown`: its bytes escaped, `caf\\xe9.txt`).
"""

from __future__ import annotations

import re
import unicodedata

_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")  # Hangul fillers, blank Braille
_BLANK = frozenset(("Cc", "Cf", "Cs", "Cn", "Mn", "Me"))  # control, format, surrogate, unassigned, lone marks
_SURROGATE = re.compile("[\ud800-\udfff]")


def has_text(text: str) -> bool:
    """Whether `text` holds a character that shows (see the module's notes). Stops at the first
    such character, so a text of words costs nothing."""
    return any(
        ch not in _BLANK_LETTERS and not (cat := unicodedata.category(ch)).startswith("Z") and cat not in _BLANK
        for ch in text
    )


def lone_surrogates(text: str) -> int:
    """How many lone surrogates `text` holds (0 for any text read from valid UTF-8)."""
    return len(_SURROGATE.findall(text))


def repaired(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD; as it is when it has none."""
    return _SURROGATE.sub("\ufffd", text)


def shown(name: str) -> str:
    """A name as a line can show it: the bytes a surrogate-escaped name stands for written as
    \\xNN, the rest as it is ("caf\\xe9.txt")."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
