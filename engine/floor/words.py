"""The words of a text as the lexical index and the question reader both see them: lower-cased
runs of letters and digits, stop words out, plurals folded to their singular."""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[^\W_]+")
# Lucene's English stop set, with the question words and auxiliaries every question carries: a
# question's "what" or "does" matched on them would only add noise to the ranking.
_LUCENE_STOP = "a an and are as at be but by for if in into is it no not of on or such that the their then there these"
_QUESTION = "they this to was will with what which who whom whose when where why how do does did can could would should"
STOPWORDS = frozenset(f"{_LUCENE_STOP} {_QUESTION} i".split())


def _stem(w: str) -> str:
    """Plural forms to their singular (queries -> query, classes -> class, files -> file): Harman's
    S-stemmer, with -es dropped whole after s, x, z, ch and sh as English forms those plurals."""
    if len(w) <= 3 or not w.endswith("s") or w.endswith(("us", "ss", "is")):
        return w
    if w.endswith("ies") and not w.endswith(("eies", "aies")):
        return w[:-3] + "y"
    if w.endswith(("sses", "xes", "zes", "ches", "shes")):
        return w[:-2]
    if w.endswith(("aes", "ees", "oes")):
        return w
    return w[:-1]


def tokens(text: str) -> list[str]:
    """The terms BM25 sees in a text, in order."""
    return [_stem(w) for w in _TOKEN.findall(text.lower()) if w not in STOPWORDS]
