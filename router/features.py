"""What the router sees: the embedding of the question (as asked, or masked: engine.floor.question.structure),
followed by structural features of the question computed without any model.

Train and serve go through the same functions, `embedded_text` and `build_inputs`, so the
router never sees a different text form at inference than in training.

Every feature has a name, a width (its columns) and a version. A checkpoint records the names
and versions it was trained with (RouterConfig.to_dict); `feature_set_problem` says why a
checkpoint's features cannot be computed by this code (an unknown name, a changed version),
and loading such a checkpoint is refused (router.checkpoint). Changing what a feature computes
means a new version number here: old checkpoints then fail loudly instead of routing on inputs
that no longer mean what they learned.

The features (columns scaled to [0, 1]; counts are capped):

| name | columns | what |
|---|---|---|
| specificity | 1 | share of tokens after the first that are capitalised or numeric |
| length | 1 | log(1 + words) / log(64) |
| qword | 9 | one-hot question word: what who when where which why how, yes/no form, other |
| entities | 1 | capitalised spans after the first word + quoted titles, / 4 |
| comparison | 1 | 1 when a comparison / join word occurs (both, same, older, first, than, ...) or "X or Y?" |
| chain | 1 | relation links ("the X of", "X's") in the whole question, / 3 |
| relative | 1 | 1 when a relative clause describes an entity ("the film that won ...") |
| pair | 1 | 1 when two entities are joined by or / and |
| dates | 1 | dates: years, decades, centuries, full dates; / 2 |
| numbers | 1 | numbers that are not dates (digits, number words from "two"), / 2 |
| depth | 1 | deepest nested relation chain within one clause ("the mother of the director of X" = 2), / 3 |
| operators | 2 | comparative operators (older, earlier, more, than, same, both, ...) / 2; |
|  |  | superlative operators (-est words, first, last, most, least) / 2 |
| lookups | 1 | retrievals the form asks for (engine.floor.question.structure.count_lookups: "Where was the director of X |
|  |  | born?" 2, "Who is the director of X?" 1), (lookups - 1) / 3 |
| shape | 2 | the answer the question asks for (engine.floor.question.structure.answer_shape): 1 for a list |
|  |  | ("Which options does X take?"), 1 for an explanation ("Why ...", "How does X differ ..."); 0 0 for one value |
| form | 3 | the form that names the sub-questions (engine.floor.question.forms.form_plan), one-hot: date comparison, |
|  |  | same check, chain; the form stage's reading as an input (not in the default set) |

Only numpy at module level: the CLI imports this lazily, but it stays light anyway.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from engine.floor.question.parse import Question, text_of
from engine.floor.question.structure import (
    MAX_LOOKUPS,
    QUOTED,
    QWORDS,
    answer_shape,
    chain_depth,
    count_comparatives,
    count_dates,
    count_lookups,
    count_numbers,
    count_superlatives,
    mask_entities,
    normalize_question,
    question_word,
    tokens,
    unpunctuated,
)

__all__ = [
    "ALL_FEATURES",
    "DEFAULT_FEATURES",
    "FEATURES",
    "TEXT_FORMS",
    "build_inputs",
    "cheap_features",
    "embedded_text",
    "feature_dim",
    "feature_set_problem",
    "feature_versions",
    "mask_entities",
    "normalize_question",
]

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
# A maximal run of capitalized tokens (allowing short connectors: "Lord of the Rings").
SPAN = re.compile(r"(?:[A-Z0-9][\w'\-\.]*)(?:\s+(?:of|the|de|la|von|van|and|&)?\s*[A-Z0-9][\w'\-\.]*)*")

TEXT_FORMS = ("question", "masked", "plain")


def embedded_text(text: str, form: str = "question") -> str:
    """The text the router embeds: the question as asked, its masked form, or its plain form
    (closing marks removed: engine.floor.question.structure.unpunctuated)."""
    if form not in TEXT_FORMS:
        raise ValueError(f"unknown text form {form!r}; choose {', '.join(TEXT_FORMS)}")
    if form == "masked":
        return mask_entities(text)
    return unpunctuated(text) if form == "plain" else normalize_question(text)


def _capped(n: int, cap: int) -> float:
    return min(n, cap) / cap


def f_specificity(q: str) -> list[float]:
    """Share of tokens after the first that are capitalized or numeric (entity-like)."""
    toks = tokens(q)[1:]
    if not toks:
        return [0.0]
    return [sum(1 for t in toks if t[0].isupper() or t[0].isdigit()) / len(toks)]


def f_length(q: str) -> list[float]:
    """log(1 + words) / log(64): about 0.5 for 7 words, 1.0 for 63 (multi-hop questions run long)."""
    return [math.log1p(len(q.split())) / math.log(64)]


def f_qword(q: str) -> list[float]:
    """One-hot of the question word (engine.floor.question.structure.question_word), + 'other'."""
    return _qword_columns(question_word(q))


def _qword_columns(w: str) -> list[float]:
    out = [0.0] * (len(QWORDS) + 1)
    out[QWORDS.index(w) if w in QWORDS else -1] = 1.0
    return out


def f_entities(q: str) -> list[float]:
    """Count of entity-like spans (capitalized runs not at the sentence start, quoted titles), / 4, capped at 1."""
    body = q.split(" ", 1)[1] if " " in q else ""
    return [_capped(len(SPAN.findall(body)) + len(QUOTED.findall(q)), 4)]


# "the X of", "a X of", "X's": one relation each; two or more nest ("the mother of the director of X").
_CHAIN = re.compile(r"\b(?:the|a|an)\s+(?:\w+\s+){0,2}?of\b|\w's\b", re.IGNORECASE)
_RELATIVE = re.compile(r"\b\w+\s+(?:that|who|whose|which|where)\s+\w+", re.IGNORECASE)
# Two masked entities joined by or / and, each possibly inside a short phrase ("the founder of X or ...").
_PAIR = re.compile(r"\b[XN]\b[^?]{0,40}?\b(?:or|and)\b[^?]{0,40}?\b[XN]\b")


def f_chain(q: str) -> list[float]:
    """Relations ("the mother of the director of X", "X's father"): their count / 3, capped at 1."""
    return [_capped(len(_CHAIN.findall(mask_entities(q))), 3)]


def f_relative(q: str) -> list[float]:
    """1.0 when a relative clause describes an entity ("the film that won ..."), beyond the question word."""
    body = q.split(" ", 1)[1] if " " in q else ""
    return [float(bool(_RELATIVE.search(body)))]


def f_pair(q: str) -> list[float]:
    """1.0 when two entities are joined by or / and ("X or Y", "X and Y"): comparisons and joins."""
    return [float(bool(_PAIR.search(mask_entities(q))))]


def f_comparison(q: str) -> list[float]:
    """1.0 when a comparison / join word occurs, also 'X or Y' choices."""
    words = {w.lower() for w in tokens(q)}
    hit = bool(words & COMPARISON_WORDS) or bool(re.search(r"\w+ or \w+\?*$", q.strip()))
    return [float(hit)]


def f_dates(q: str) -> list[float]:
    """Dates (engine.floor.question.structure.count_dates), / 2, capped at 1."""
    return [_capped(count_dates(q), 2)]


def f_numbers(q: str) -> list[float]:
    """Numbers that are not dates (engine.floor.question.structure.count_numbers), / 2, capped at 1."""
    return [_capped(count_numbers(q), 2)]


def f_depth(q: str) -> list[float]:
    """Deepest nested relation chain in one clause (engine.floor.question.structure.chain_depth), / 3, capped at 1."""
    return [_capped(chain_depth(q), 3)]


def f_operators(q: str) -> list[float]:
    """[comparative operators / 2, superlative operators / 2], each capped at 1."""
    return [_capped(count_comparatives(q), 2), _capped(count_superlatives(q), 2)]


def f_lookups(q: str) -> list[float]:
    """Retrievals the question's form asks for (engine.floor.question.structure.count_lookups), (n - 1) / 3."""
    return [(count_lookups(q) - 1) / (MAX_LOOKUPS - 1)]


def f_shape(q: str) -> list[float]:
    """[asks for a list, asks for an explanation] (engine.floor.question.structure.answer_shape)."""
    return _shape_columns(answer_shape(q))


def _shape_columns(shape: str) -> list[float]:
    return [float(shape == "list"), float(shape == "explanation")]


FORMS = ("date comparison", "same check", "chain")  # engine.floor.question.forms.form_plan's names


def f_form(q: str) -> list[float]:
    """One-hot of the form that names the question's sub-questions (engine.floor.question.forms:
    what the decision's form stage reads), all zero for none: the rule's signal as an input."""
    from engine.floor.question.forms import form_plan

    plan = form_plan(q)
    return [float(plan is not None and plan[0] == name) for name in FORMS]


# The features a Question read once already holds (engine.floor.question.parse): its question word and answer
# shape are read off the text as asked, which gives what the normalized text gives (both readers
# normalize or tokenize first), so a routed question is not read again for them.
_READ_ONCE: dict[str, Callable[[Question], list[float]]] = {
    "qword": lambda read: _qword_columns(read.word),
    "shape": lambda read: _shape_columns(read.shape),
}


class Feature(NamedTuple):
    compute: Callable[[str], list[float]]  # normalized question -> `width` floats
    width: int
    version: int  # a new number whenever what `compute` returns changes


# name -> Feature. The order of a feature set is the order of the columns.
FEATURES: dict[str, Feature] = {
    "specificity": Feature(f_specificity, 1, 1),
    "length": Feature(f_length, 1, 1),
    "qword": Feature(f_qword, len(QWORDS) + 1, 1),
    "entities": Feature(f_entities, 1, 1),
    "comparison": Feature(f_comparison, 1, 1),
    "chain": Feature(f_chain, 1, 1),
    "relative": Feature(f_relative, 1, 1),
    "pair": Feature(f_pair, 1, 1),
    "dates": Feature(f_dates, 1, 1),
    "numbers": Feature(f_numbers, 1, 1),
    "depth": Feature(f_depth, 1, 1),
    "operators": Feature(f_operators, 2, 1),
    "lookups": Feature(f_lookups, 1, 1),
    "shape": Feature(f_shape, 2, 1),
    "form": Feature(f_form, len(FORMS), 1),
}

ALL_FEATURES: tuple[str, ...] = tuple(FEATURES)
# What the MLP trains on by default: every feature but `shape`, which is the list gate's (router.list_gate)
DEFAULT_FEATURES: tuple[str, ...] = tuple(f for f in FEATURES if f not in ("shape", "form"))


def check_feature_set(names: Sequence[str]) -> tuple[str, ...]:
    unknown = [n for n in names if n not in FEATURES]
    if unknown:
        raise ValueError(f"unknown router feature(s) {unknown}; known: {', '.join(FEATURES)}")
    return tuple(names)


def feature_dim(names: Sequence[str]) -> int:
    return sum(FEATURES[n].width for n in check_feature_set(names))


def feature_versions(names: Sequence[str]) -> dict[str, int]:
    """{name: version} of a feature set, as a checkpoint records it."""
    return {n: FEATURES[n].version for n in check_feature_set(names)}


def feature_set_problem(names: Sequence[str], versions: Mapping[str, int] | None) -> str | None:
    """Why a checkpoint trained with features `names` at `versions` cannot be served by this
    code, or None when it can. A card without versions predates them: version 1 each."""
    unknown = [n for n in names if n not in FEATURES]
    if unknown:
        return (
            f"it was trained with router feature(s) {', '.join(unknown)} that this version of logicroute "
            f"does not compute (known: {', '.join(FEATURES)})"
        )
    versions = versions or {}
    changed = [
        f"{n} (version {versions.get(n, 1)} in the checkpoint, {FEATURES[n].version} here)"
        for n in names
        if int(versions.get(n, 1)) != FEATURES[n].version
    ]
    if changed:
        return f"these router features are computed differently now: {'; '.join(changed)}"
    return None


def cheap_features(texts: Sequence[str | Question], names: Sequence[str]) -> np.ndarray:
    """(n, feature_dim(names)) float32; empty columns when names is empty. A Question's own
    readings give the features it holds (_READ_ONCE)."""
    names = check_feature_set(names)
    rows = []
    for t in texts:
        q = normalize_question(text_of(t))
        row: list[float] = []
        for n in names:
            read_once = _READ_ONCE.get(n) if isinstance(t, Question) else None
            row.extend(read_once(t) if read_once is not None else FEATURES[n].compute(q))
        rows.append(row)
    return np.asarray(rows, dtype=np.float32).reshape(len(texts), feature_dim(names))


def build_inputs(
    texts: Sequence[str | Question],
    embedder,
    names: Sequence[str],
    embeddings: np.ndarray | None = None,
    text_form: str = "question",
) -> np.ndarray:
    """[embedding of embedded_text ‖ structural features of the question] for each text, float32
    (n, embedder.dim + feature_dim).

    `embeddings` skips the embedder when the caller already has them (training caches them
    once per embedded text)."""
    qs = [normalize_question(text_of(t)) for t in texts]
    if embeddings is None:
        shown = [embedded_text(q, text_form) for q in qs]
        embeddings = (
            np.asarray(embedder.encode(shown), dtype=np.float32) if qs else np.zeros((0, embedder.dim), np.float32)
        )
    return np.concatenate([np.asarray(embeddings, dtype=np.float32), cheap_features(texts, names)], axis=1)
