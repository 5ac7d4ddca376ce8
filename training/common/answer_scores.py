"""The answer metrics that benchmarks and labels report, each under one name: em, f1,
string_acc (LogicRAG's string accuracy), and for sentence answers rouge_l (ROUGE-L F-measure)
and coverage (answer-token recall). Every metric takes the best score over the gold aliases,
and none counts the inline citation markers of reader-style answers as answer words.
`answer_scores` scores a reply's `answer_text`: a reference list after the answer (LightRAG's
replies end in "### References" and "- [1] Title" lines, as its prompt asks) is citation
material too, not answer words.

- `exact_match`: normalized prediction == normalized gold.
- `f1`: engine.floor.base.metrics (the product's demo scores with it too).
- `string_acc`: normalized gold is a substring of the normalized prediction (LogicRAG's
  `string_based_evaluation` accuracy). A gold that normalizes to "" (e.g. "The") never
  matches here, where LogicRAG would count it contained in any prediction.
- `rouge_l`: ROUGE-L F-measure from Google's rouge-score package (the reference
  implementation): lowercased alphanumeric tokens, Porter-stemmed, as GraphRAG-Bench scores.
- `coverage`: answer-token recall, the share of the normalized gold tokens (each occurrence
  once, as in token F1's recall) that the normalized prediction holds.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from engine.floor.base.errors import LogicRouteError
from engine.floor.base.metrics import f1, gold_list, normalize_answer, strip_citations

# a line that heads a reference list ("References", "### References", "**Sources:**") after the
# answer: the first line never does, so a one-word answer "Sources" stays an answer
_REFERENCE_LIST = re.compile(r"\n[ \t]*#{0,6}[ \t]*[*_]*(?:references?|sources?|citations?)[*_: \t]*(?:\n|$)", re.I)


def answer_text(reply: str) -> str:
    """The answer a reply gives: the reply without a reference list after it (its heading line
    and everything that follows)."""
    m = _REFERENCE_LIST.search(reply)
    return reply[: m.start()] if m else reply


def cites(s: str) -> bool:
    """Whether the text holds an inline citation marker ("[2]", "[1, 3]")."""
    return strip_citations(s) != s


def exact_match(pred: str, golds: str | list[str]) -> float:
    """1.0 if the normalized prediction equals any normalized gold, else 0.0."""
    p = normalize_answer(pred)
    return float(any(p == normalize_answer(g) for g in gold_list(golds)))


def string_acc(pred: str, golds: str | list[str]) -> float:
    """1.0 if any non-empty normalized gold occurs inside the normalized prediction."""
    p = normalize_answer(pred)
    return float(any(g and g in p for g in map(normalize_answer, gold_list(golds))))


def rouge_l(pred: str, golds: str | list[str]) -> float:
    """Best ROUGE-L F-measure over gold aliases (0.0 when either side has no token)."""
    scorer = _rouge_scorer()
    # float(): rouge-score gives an int 0 when a side has no token.
    pred = strip_citations(pred)
    return max((float(scorer.score(g, pred)["rougeL"].fmeasure) for g in gold_list(golds)), default=0.0)


@functools.cache
def _rouge_scorer() -> Any:
    # Imported on first use: rouge-score loads nltk (seconds), which EM/F1 users never need.
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def token_recall(pred: Counter, gold: Counter) -> float:
    """Share of the gold tokens (counted with repeats) that the prediction holds, on token counts
    of normalized text: coverage's formula, for callers that count one text against many golds."""
    total = gold.total()
    return sum(min(pred[w], n) for w, n in gold.items()) / total if total else 0.0


def _coverage_one(pred: str, gold: str) -> float:
    return token_recall(Counter(pred.split()), Counter(gold.split()))


def coverage(pred: str, golds: str | list[str]) -> float:
    """Best answer-token recall over gold aliases: share of the normalized gold tokens found
    in the normalized prediction (a gold that normalizes to "" scores 0)."""
    p = normalize_answer(pred)
    return max((_coverage_one(p, normalize_answer(g)) for g in gold_list(golds)), default=0.0)


METRICS: tuple[str, ...] = ("em", "f1", "string_acc", "rouge_l", "coverage")
# Other spellings accepted as input: label files and `--metric` arguments may say "acc".
ALIASES: dict[str, str] = {"acc": "string_acc"}
_FUNCTIONS: dict[str, Callable[[str, list[str]], float]] = {
    "em": exact_match,
    "f1": f1,
    "string_acc": string_acc,
    "rouge_l": rouge_l,
    "coverage": coverage,
}


def metric_name(name: str) -> str:
    """The metric's one name (an alias resolved), or a LogicRouteError naming the choices."""
    name = ALIASES.get(name, name)
    if name not in METRICS:
        raise LogicRouteError(f"unknown metric {name!r}: choose {', '.join(METRICS)}")
    return name


def metric_fn(name: str) -> Callable[[str, list[str]], float]:
    """The scoring function of a metric name (or alias): fn(prediction, gold answers)."""
    return _FUNCTIONS[metric_name(name)]


def answer_scores(pred: str, golds: list[str]) -> dict[str, float]:
    """Every metric of one prediction (its answer_text) against its gold answers, in METRICS order."""
    pred = answer_text(pred)
    return {m: _FUNCTIONS[m](pred, golds) for m in METRICS}


def gold_style(ds: Any) -> str:
    """The style a Dataset's gold answers are written in: "reader" (sentences) for sets with a
    shared corpus (GraphRAG-Bench), else "short" (phrases); engine.floor.prompts.answer has both."""
    return "reader" if ds.corpus else "short"
