"""Answer metrics: exact match and token F1 (official SQuAD / HotpotQA scripts), LogicRAG's
string accuracy, and for sentence answers (GraphRAG-Bench) ROUGE-L and answer-token coverage.
Every metric takes the best score over the gold aliases, and none counts the inline citation
markers ("[2]", "[1, 3]") of reader-style answers as answer words.

- `exact_match`: normalized prediction == normalized gold.
- `f1`: token F1 of the normalized strings; HotpotQA rule: when either side normalizes to
  "yes", "no" or "noanswer" and the two differ, the score is 0.
- `string_acc`: normalized gold is a substring of the normalized prediction (LogicRAG's
  `string_based_evaluation` accuracy). A gold that normalizes to "" (e.g. "The") never
  matches here, where LogicRAG would count it contained in any prediction.
- `rouge_l`: ROUGE-L F-measure (longest common subsequence of tokens) from Google's
  rouge-score package, the reference implementation of ROUGE-1.5.5: lowercased alphanumeric
  tokens, Porter-stemmed, as GraphRAG-Bench scores fact and reasoning answers.
- `coverage`: answer-token recall, the share of the normalized gold tokens (each occurrence
  once, as in token F1's recall) that the normalized prediction holds: what a long answer
  covers of the gold, without the precision penalty F1 gives it for its extra words.
"""

from __future__ import annotations

import functools
import re
import string
from collections import Counter
from typing import Any

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
_SPECIAL = ("yes", "no", "noanswer")
_CITATION = re.compile(r"\s*\[\d+(?:\s*[,;-]\s*\d+)*\]")


def strip_citations(s: str) -> str:
    """The text without inline citation markers: "Warsaw [1]." -> "Warsaw."."""
    return _CITATION.sub("", s)


def cites(s: str) -> bool:
    """Whether the text holds an inline citation marker ("[2]", "[1, 3]")."""
    return bool(_CITATION.search(s))


def normalize_answer(s: str) -> str:
    """Official SQuAD normalization: lowercase, drop punctuation, articles, extra whitespace."""
    s = strip_citations(s).lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def _golds(golds: str | list[str]) -> list[str]:
    # A bare string is one gold answer, not a list of characters.
    return [golds] if isinstance(golds, str) else list(golds)


def _f1_one(pred: str, gold: str) -> float:
    if (pred in _SPECIAL or gold in _SPECIAL) and pred != gold:
        return 0.0
    p, g = pred.split(), gold.split()
    same = sum((Counter(p) & Counter(g)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def exact_match(pred: str, golds: str | list[str]) -> float:
    """1.0 if the normalized prediction equals any normalized gold, else 0.0."""
    p = normalize_answer(pred)
    return float(any(p == normalize_answer(g) for g in _golds(golds)))


def f1(pred: str, golds: str | list[str]) -> float:
    """Best token F1 over gold aliases (HotpotQA yes/no/noanswer rule applies)."""
    p = normalize_answer(pred)
    return max((_f1_one(p, normalize_answer(g)) for g in _golds(golds)), default=0.0)


def string_acc(pred: str, golds: str | list[str]) -> float:
    """1.0 if any non-empty normalized gold occurs inside the normalized prediction."""
    p = normalize_answer(pred)
    return float(any(g and g in p for g in map(normalize_answer, _golds(golds))))


def rouge_l(pred: str, golds: str | list[str]) -> float:
    """Best ROUGE-L F-measure over gold aliases (0.0 when either side has no token)."""
    scorer = _rouge_scorer()
    # float(): rouge-score gives an int 0 when a side has no token.
    pred = strip_citations(pred)
    return max((float(scorer.score(g, pred)["rougeL"].fmeasure) for g in _golds(golds)), default=0.0)


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
    return max((_coverage_one(p, normalize_answer(g)) for g in _golds(golds)), default=0.0)
