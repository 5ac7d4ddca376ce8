"""The specific words of an answer (numbers of three digits or more, flags, key=value) and whether
a text holds them as written: what keeps an answer within its evidence (engine.core.absence) and a
listed item spelled as its passage spells it (the summary route's global mode).

Names and code words (package.json, snake_case) are not specific words: an answer may bring the
common ones from outside the passages without inventing its claim."""

from __future__ import annotations

import re

from engine.core.routes.common import strip_citations

_SPECIFIC = re.compile(r"\d|^--?[A-Za-z]|\w=\w")  # a number, a flag (--save-dev) or a key=value
_WORD = re.compile(r"(?:[^\s\[\]()\"'`,;:!?]|(?<=\d)[,:](?=\d))+")  # 6,650 and 7:30 are one word
_EDGE = ".,;:!?\"'`()[]{}<>*"


def specific_words(text: str) -> list[str]:
    """The words of `text` that state a checkable specific (numbers of three digits or more,
    flags, key=value), citation markers [n] left out, once each."""
    out = []
    for raw in _WORD.findall(strip_citations(text)):
        w = raw.strip(_EDGE)
        if w and _SPECIFIC.search(w) and not re.fullmatch(r"\d{1,2}", w):
            out.append(w)  # a small number is phrasing as often as a claim ("20 million" for 20000000)
    return list(dict.fromkeys(out))


def plain(text: str) -> str:
    """Lower case, with a number's thousands separators dropped (10,000 and 10000 are one claim)."""
    return re.sub(r"(?<=\d)[,_](?=\d{3})", "", text.lower())


def holds_as_written(plain_text: str, word: str) -> bool:
    """Whether `plain_text` (already `plain`) holds `word` as a whole word."""
    return re.search(r"(?<![\w.-])" + re.escape(plain(word)) + r"(?![\w-])", plain_text) is not None


def unread_words(text: str, evidence: str) -> list[str]:
    """The specific words of `text` (numbers, flags, key=value) that `evidence` does not hold as
    words, case and thousands separators ignored."""
    held = plain(evidence)
    return [w for w in specific_words(text) if not holds_as_written(held, w)]
