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
    texts: Sequence[str], embedder, names: Sequence[str], embeddings: np.ndarray | None = None
) -> np.ndarray:
    """[embedding ‖ cheap features] for each text, float32 (n, embedder.dim + feature_dim).

    `embeddings` skips the embedder when the caller already has them (training caches them
    once per question text)."""
    qs = [normalize_question(t) for t in texts]
    if embeddings is None:
        embeddings = (
            np.asarray(embedder.encode(qs), dtype=np.float32) if qs else np.zeros((0, embedder.dim), np.float32)
        )
    return np.concatenate([np.asarray(embeddings, dtype=np.float32), cheap_features(qs, names)], axis=1)
