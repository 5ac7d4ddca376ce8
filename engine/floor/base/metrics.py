"""Token F1 of an answer against gold answers (official SQuAD / HotpotQA scripts), best over the
gold aliases, inline citation markers ("[2]", "[1, 3]") of reader-style answers not counted as
answer words. HotpotQA rule: when either side normalizes to "yes", "no" or "noanswer" and the
two differ, the score is 0. The benchmarks' other metrics are in training.common.answer_scores.
"""

from __future__ import annotations

import re
import string
from collections import Counter

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
_SPECIAL = ("yes", "no", "noanswer")
_CITATION = re.compile(r"\s*\[\d+(?:\s*[,;-]\s*\d+)*\]")


def strip_citations(s: str) -> str:
    """The text without inline citation markers: "Warsaw [1]." -> "Warsaw."."""
    return _CITATION.sub("", s)


def normalize_answer(s: str) -> str:
    """Official SQuAD normalization: lowercase, drop punctuation, articles, extra whitespace."""
    s = strip_citations(s).lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def gold_list(golds: str | list[str]) -> list[str]:
    """The gold answers as a list: a bare string is one gold answer, not a list of characters."""
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


def f1(pred: str, golds: str | list[str]) -> float:
    """Best token F1 over gold aliases (HotpotQA yes/no/noanswer rule applies)."""
    p = normalize_answer(pred)
    return max((_f1_one(p, normalize_answer(g)) for g in gold_list(golds)), default=0.0)
