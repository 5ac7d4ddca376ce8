"""Scoring `logicroute bench docs`: whether an answer abstains, whether it holds the phrases a
right answer must contain, and the tallies of a system on a set (right, abstained, wrong on
positives; abstained and answered on negatives, by kind; cost a question), with the paired
difference against a reference system. Pure functions over answer texts and result rows."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from engine.core.routes.common import looks_unanswered
from training.docs_qa.bench_docs_sets import GROUPS, DocsQuestion, Must

_CITATION = re.compile(r"\s*\[\d+(?:\s*[,-–]\s*\d+)*\]")
_NUMBER = re.compile(r"[\d.,]+")

# What the documents are called in an answer that says they lack something.
_DOCS = (
    r"(?:the |these |those |any of the |any |provided |given )*(?:indexed |provided |given |retrieved |available |"
    r"above |supplied )?(?:documents?|passages?|context|sources?|texts?|documentation|docs|excerpts?|materials?)"
)
_LACK = (
    r"(?:state|say|mention|contain|specify|provide|include|describe|cover|answer|give|indicate|discuss|"
    r"address|list|offer|have|hold|tell)"
)
_UNSTATED = r"(?:stated|mentioned|specified|given|provided|documented|covered|described|discussed|listed|addressed)"
# A first sentence that says the documents do not hold the answer, in the phrasings the local
# model and the reader prompt ("Not in the indexed documents.") produce. Each pattern names
# the documents or ends the sentence on "is not stated", so that an answer that only contains
# a negation ("Valgrind cannot attach to a running program") is not taken for an abstention.
_ABSTAIN = [
    re.compile(p, re.IGNORECASE)
    for p in (
        rf"\bnot (?:explicitly )?(?:{_UNSTATED} |found |available |included |answered )?(?:anywhere )?in {_DOCS}\b",
        rf"\b{_DOCS}\b(?: (?:provided|given|shown|above|here))? (?:do|does|did)(?: not|n't) (?:explicitly )?{_LACK}",
        rf"\b(?:none of|nothing in|no part of) {_DOCS}\b",
        rf"^no {_DOCS}\b",
        r"\b(?:there is|there's|there are|i have|i found|i find|with) no (?:relevant |specific )?"
        r"(?:information|mention|details?|data|answer|reference)\b",
        rf"\b(?:cannot|can't|can not|unable to|could not|couldn't|not possible to) (?:be )?"
        rf"(?:determined?|answered|answer|tell|told|say|said|find|found|infer(?:red)?|know|known)\b.*\b{_DOCS}\b",
        rf"\b(?:is|are|was|were) not (?:explicitly )?{_UNSTATED}\b(?: (?:in|by|within|anywhere)\b.*)?$",
        r"\b(?:i|we) (?:do not|don't|cannot|can't) (?:know|find|see|tell)\b",
    )
]
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'`(\[])")


def strip_citations(text: str) -> str:
    """The text without its [n] / [1, 2] citation markers (a digit in one is no answer)."""
    return _CITATION.sub("", text or "")


def first_sentence(text: str) -> str:
    t = " ".join(strip_citations(text).split())
    return _SENTENCE_END.split(t, maxsplit=1)[0].strip() if t else ""


def abstention_reason(text: str) -> str | None:
    """Why the answer counts as "not in the documents", or None when it gives an answer: the
    pipeline's own rule (looks_unanswered), or a first sentence that says the documents do not
    state it. Only the first sentence: an answer that says what it found first and regrets a
    detail after ("..., though the passages do not say why") answered."""
    reason = looks_unanswered(text)
    if reason is not None:
        return reason
    first = first_sentence(text).rstrip(".!")
    for pattern in _ABSTAIN:
        if pattern.search(first):
            return f"first sentence says the documents lack it ({first[:80]!r})"
    return None


def phrase_in(phrase: str, text: str) -> bool:
    """Case-insensitive. An option matches as a whole option name (--trace-children not in
    --trace-children-skip, but in --trace-children=yes); a number or a phrase of three characters
    or fewer as a whole word (12 not in 120 or 1.2.0, -g not in --gen-suppressions); a longer
    one anywhere, so that a stem matches its forms (remov: removed, removes)."""
    p, t = phrase.casefold().strip(), text.casefold()
    if not p:
        return False
    if p.startswith("-") and p[-1].isalnum():  # an option is not the start of a longer option's name
        return re.search(r"(?<![\w-])" + re.escape(p) + r"(?![\w-])", t) is not None
    if len(p) > 3 and not _NUMBER.fullmatch(p):
        return p in t
    left = r"(?<![\w-])(?<!\d[.,])" if p[0].isalnum() or p[0] == "-" else ""
    right = r"(?!\w)(?![.,]\d)" if p[-1].isalnum() else ""
    return re.search(left + re.escape(p) + right, t) is not None


def missing_phrases(must: Must, text: str) -> list[str]:
    """The `must` elements the text lacks (a group is lacking when none of its spellings is in
    it), each as its first spelling. Citations are removed first."""
    t = strip_citations(text)
    out = []
    for part in must:
        options = (part,) if isinstance(part, str) else part
        if not any(phrase_in(o, t) for o in options):
            out.append(options[0])
    return out


def score(question: DocsQuestion, text: str) -> dict:
    """The verdict on one answer: abstained (with why), the phrases it lacks (positives), and
    the outcome: a positive is right, abstained or wrong; a negative abstained (right) or
    answered (a fabrication)."""
    why = abstention_reason(text)
    out: dict = {"abstained": why is not None, "abstain_reason": why}
    if question.kind == "positive":
        missing = missing_phrases(question.must, text)
        out["missing"] = missing
        out["outcome"] = "abstained" if why else "wrong" if missing else "right"
    else:
        out["outcome"] = "abstained" if why else "answered"
    out["right"] = out["outcome"] == "right" or (question.kind == "negative" and why is not None)
    return out


COSTS = ("llm_calls", "tokens", "seconds", "llm_seconds_uncached")


def _share(n: int, d: int) -> float | None:
    return round(100 * n / d, 1) if d else None


def _mean(xs: Sequence[float]) -> float | None:
    return round(sum(xs) / len(xs), 2) if xs else None


def tally(rows: Iterable[dict]) -> dict:
    """One system's figures over result rows (each with group, outcome, right and the costs):
    counts per group and outcome, right shares, and the mean cost a question."""
    rows = list(rows)
    by = {g: [r for r in rows if r["group"] == g] for g in GROUPS}
    pos, neg = by["positive"], by["off_topic"] + by["near_miss"]

    def count(rs: list[dict], outcome: str) -> int:
        return sum(1 for r in rs if r["outcome"] == outcome)

    out: dict = {
        "questions": len(rows),
        "positives": len(pos),
        "positives_right": count(pos, "right"),
        "positives_abstained": count(pos, "abstained"),
        "positives_wrong": count(pos, "wrong"),
        "negatives": len(neg),
        "negatives_abstained": count(neg, "abstained"),
        "negatives_answered": count(neg, "answered"),
    }
    for g in ("off_topic", "near_miss"):
        out[f"{g}"] = len(by[g])
        out[f"{g}_abstained"] = count(by[g], "abstained")
    out["positives_right_pct"] = _share(out["positives_right"], len(pos))
    out["negatives_abstained_pct"] = _share(out["negatives_abstained"], len(neg))
    out["right_pct"] = _share(sum(1 for r in rows if r["right"]), len(rows))
    for c in COSTS:
        out[f"{c}_per_q"] = _mean([float(r.get(c) or 0.0) for r in rows])
    out["errors"] = sum(1 for r in rows if r.get("error"))
    # the out-of-distribution guard replaced the router's decision (its flag is on the answer)
    out["positives_flagged_far"] = sum(1 for r in pos if any(str(f).startswith(FAR_FLAG) for f in r.get("flags") or []))
    return out


FAR_FLAG = "out of distribution"


def paired_against(rows: Sequence[dict], reference: Sequence[dict]) -> dict | None:
    """`rows` against `reference` on the questions both answered: the difference in right
    answers (points of %, with a 95% bootstrap interval), questions won and lost, and the
    difference in LLM calls a question. None when they share no question."""
    from training.peers.bench_peers_compare import paired_interval

    ref = {r["id"]: r for r in reference}
    both = [(r, ref[r["id"]]) for r in rows if r["id"] in ref]
    if not both:
        return None
    diffs = [100.0 * (int(a["right"]) - int(b["right"])) for a, b in both]
    low, high = paired_interval(diffs)
    calls = [float(a.get("llm_calls") or 0) - float(b.get("llm_calls") or 0) for a, b in both]
    return {
        "questions": len(both),
        "right_diff": round(sum(diffs) / len(diffs), 1),
        "ci95": [round(low, 1), round(high, 1)],
        "wins": sum(1 for d in diffs if d > 0),
        "losses": sum(1 for d in diffs if d < 0),
        "calls_diff": round(sum(calls) / len(calls), 2),
    }
