"""What the router sees: the MiniLM query embedding, optionally followed by a few cheap
surface features of the question (QA-GraphRAG's "specificity" and friends).

Train and serve go through the same two functions, `normalize_question` and
`build_inputs`, so the router never sees a different text form at inference than in
training (the reference QA-GraphRAG code trained and served on different prompt texts).

Only numpy at module level: the CLI imports this lazily, but it stays light anyway.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

import numpy as np

# Question words in the one-hot, in order; "yesno" = starts with an auxiliary verb
# (Is/Was/Did/...): comparison and verification questions often do.
QWORDS = ("what", "who", "when", "where", "which", "why", "how", "yesno")
_AUX = {
    "is",
    "are",
    "was",
    "were",
    "do",
    "does",
    "did",
    "has",
    "have",
    "had",
    "can",
    "could",
    "will",
    "would",
    "should",
}
# Words that signal a comparison or a join of two entities (2Wiki comparison / bridge-comparison).
COMPARISON_WORDS = {
    "both",
    "same",
    "older",
    "younger",
    "oldest",
    "youngest",
    "earlier",
    "later",
    "first",
    "last",
    "more",
    "less",
    "fewer",
    "larger",
    "smaller",
    "longer",
    "shorter",
    "higher",
    "lower",
    "bigger",
    "than",
    "compared",
    "either",
    "between",
}
_TOKEN = re.compile(r"[A-Za-z0-9][\w'\-\.]*")
# A maximal run of capitalized tokens (allowing short connectors: "Lord of the Rings").
SPAN = re.compile(r"(?:[A-Z0-9][\w'\-\.]*)(?:\s+(?:of|the|de|la|von|van|and|&)?\s*[A-Z0-9][\w'\-\.]*)*")
_QUOTED = re.compile(r"\"[^\"]+\"|“[^”]+”")


def normalize_question(text: str) -> str:
    """The one text form embedded at train and serve time: stripped, whitespace collapsed."""
    return " ".join(str(text).split())


TEXT_FORMS = ("question", "masked")
# An entity to mask: capitalized tokens joined by up to two short connectors ("The Lord of the
# Rings"), but not by "and" (two names stay two) and without a possessive "'s" (kept as a relation).
_NAME_TOKEN = r"[A-Z0-9][\w\-\.]*(?:'(?!s\b)\w+)*"
_MASK_SPAN = re.compile(rf"{_NAME_TOKEN}(?:\s+(?:(?:of|the|de|la|von|van)\s+){{0,2}}{_NAME_TOKEN})*")
_NUMBER = re.compile(r"\b\d[\d,.:/-]*\b")


def mask_entities(text: str) -> str:
    """The question's form without its topic: quoted titles and capitalized spans after the first
    word become "X", numbers and dates "N". "Who was born first, Ann Lee or Tom Ford?" ->
    "Who was born first, X or X?"."""
    q = normalize_question(text)
    q = _QUOTED.sub("X", q)
    head, sep, body = q.partition(" ")
    body = _MASK_SPAN.sub(lambda m: "N" if m.group(0)[0].isdigit() else "X", body)
    return _NUMBER.sub("N", head + sep + body)


def embedded_text(text: str, form: str = "question") -> str:
    """The text the router embeds: the question as asked, or its masked form."""
    if form not in TEXT_FORMS:
        raise ValueError(f"unknown text form {form!r}; choose {', '.join(TEXT_FORMS)}")
    return mask_entities(text) if form == "masked" else normalize_question(text)


def _tokens(q: str) -> list[str]:
    return _TOKEN.findall(q)


def f_specificity(q: str) -> list[float]:
    """Share of tokens after the first that are capitalized or numeric (entity-like)."""
    toks = _tokens(q)[1:]
    if not toks:
        return [0.0]
    return [sum(1 for t in toks if t[0].isupper() or t[0].isdigit()) / len(toks)]


def f_length(q: str) -> list[float]:
    """log(1 + words) / log(64): about 0.5 for 7 words, 1.0 for 63 (multi-hop questions run long)."""
    return [math.log1p(len(q.split())) / math.log(64)]


def f_qword(q: str) -> list[float]:
    """One-hot of the question word (first matching word among the first three), + 'other'."""
    words = [w.lower() for w in _tokens(q)[:3]]
    out = [0.0] * (len(QWORDS) + 1)
    if words and words[0] in _AUX:
        out[QWORDS.index("yesno")] = 1.0
        return out
    for w in words:
        if w in QWORDS:
            out[QWORDS.index(w)] = 1.0
            return out
    out[-1] = 1.0
    return out


def f_entities(q: str) -> list[float]:
    """Count of entity-like spans (capitalized runs not at the sentence start, quoted titles), / 4, capped at 1."""
    body = q.split(" ", 1)[1] if " " in q else ""
    n = len(SPAN.findall(body)) + len(_QUOTED.findall(q))
    return [min(n, 4) / 4.0]


# "the X of", "a X of", "X's": one relation each; two or more nest ("the mother of the director of X").
_CHAIN = re.compile(r"\b(?:the|a|an)\s+(?:\w+\s+){0,2}?of\b|\w's\b", re.IGNORECASE)
_RELATIVE = re.compile(r"\b\w+\s+(?:that|who|whose|which|where)\s+\w+", re.IGNORECASE)
# Two masked entities joined by or / and, each possibly inside a short phrase ("the founder of X or ...").
_PAIR = re.compile(r"\b[XN]\b[^?]{0,40}?\b(?:or|and)\b[^?]{0,40}?\b[XN]\b")


def f_chain(q: str) -> list[float]:
    """Relations ("the mother of the director of X", "X's father"): their count / 3, capped at 1."""
    return [min(len(_CHAIN.findall(mask_entities(q))), 3) / 3.0]


def f_relative(q: str) -> list[float]:
    """1.0 when a relative clause describes an entity ("the film that won ..."), beyond the question word."""
    body = q.split(" ", 1)[1] if " " in q else ""
    return [float(bool(_RELATIVE.search(body)))]


def f_pair(q: str) -> list[float]:
    """1.0 when two entities are joined by or / and ("X or Y", "X and Y"): comparisons and joins."""
    return [float(bool(_PAIR.search(mask_entities(q))))]


def f_comparison(q: str) -> list[float]:
    """1.0 when a comparison / join word occurs, also 'X or Y' choices."""
    words = {w.lower() for w in _tokens(q)}
    hit = bool(words & COMPARISON_WORDS) or bool(re.search(r"\w+ or \w+\?*$", q.strip()))
    return [float(hit)]


# name -> (function, width). The order of a feature set is the order of the columns.
FEATURES: dict[str, tuple[Callable[[str], list[float]], int]] = {
    "specificity": (f_specificity, 1),
    "length": (f_length, 1),
    "qword": (f_qword, len(QWORDS) + 1),
    "entities": (f_entities, 1),
    "comparison": (f_comparison, 1),
    "chain": (f_chain, 1),
    "relative": (f_relative, 1),
    "pair": (f_pair, 1),
}

ALL_FEATURES: tuple[str, ...] = tuple(FEATURES)


def check_feature_set(names: Sequence[str]) -> tuple[str, ...]:
    unknown = [n for n in names if n not in FEATURES]
    if unknown:
        raise ValueError(f"unknown router feature(s) {unknown}; known: {', '.join(FEATURES)}")
    return tuple(names)


def feature_dim(names: Sequence[str]) -> int:
    return sum(FEATURES[n][1] for n in check_feature_set(names))


def cheap_features(texts: Sequence[str], names: Sequence[str]) -> np.ndarray:
    """(n, feature_dim(names)) float32; empty columns when names is empty."""
    names = check_feature_set(names)
    rows = []
    for t in texts:
        q = normalize_question(t)
        row: list[float] = []
        for n in names:
            row.extend(FEATURES[n][0](q))
        rows.append(row)
    return np.asarray(rows, dtype=np.float32).reshape(len(texts), feature_dim(names))


def build_inputs(
    texts: Sequence[str],
    embedder,
    names: Sequence[str],
    embeddings: np.ndarray | None = None,
    text_form: str = "question",
) -> np.ndarray:
    """[embedding of embedded_text ‖ cheap features of the question] for each text, float32
    (n, embedder.dim + feature_dim).

    `embeddings` skips the embedder when the caller already has them (training caches them
    once per embedded text)."""
    qs = [normalize_question(t) for t in texts]
    if embeddings is None:
        shown = [embedded_text(q, text_form) for q in qs]
        embeddings = (
            np.asarray(embedder.encode(shown), dtype=np.float32) if qs else np.zeros((0, embedder.dim), np.float32)
        )
    return np.concatenate([np.asarray(embeddings, dtype=np.float32), cheap_features(qs, names)], axis=1)
