"""What every route shares: question validation, and the rule for an answer that says it does not know."""

from __future__ import annotations

import re

from engine.floor.base.errors import BadQuestionError
from engine.floor.base.text import has_text, repaired
from engine.floor.base.trace import Trace
from engine.floor.base.types import Completion
from engine.floor.llm.base import answer_confidence
from engine.floor.prompts.answer import NOT_IN_DOCUMENTS

# The local model has a 4,096-token window; few-shots + 3 passages take ~700 tokens.
# A question longer than this leaves no room for evidence.
MAX_QUESTION_WORDS = 400
# Words alone let one 100 KB "word" through: tokens follow characters (~4 per token in English),
# so 4,000 characters (~1,000 tokens, what 400 words of 10 letters take) keep the same room.
MAX_QUESTION_CHARS = 4000


# Short answers are phrases: a cap stops rambling on the small model. Reader answers are a few
# sentences with citations.
ANSWER_MAX_TOKENS = {"short": 32, "reader": 256}


def clean_answer(text: str, style: str = "short") -> str:
    """short: the first line, without an 'Answer:' prefix or trailing period (the scorers compare
    phrases); reader: the whole reply, without the prefix."""
    t = (text or "").strip()
    for prefix in ("Answer:", "answer:", "A:"):
        if t.startswith(prefix):
            t = t[len(prefix) :].strip()
    if style == "reader":
        return t
    line = t.splitlines()[0] if t else ""
    return line.rstrip(".").strip()


_CITATION = re.compile(r"(\s?)\[(\d+(?:\s*[,;-]\s*\d+)*)\]")
_RANGE_MAX = 20  # "[1-3]" lists its numbers; a wider range is not a citation anyone means


def _cited(marker: str) -> list[int]:
    out: list[int] = []
    for part in re.split(r"\s*[,;]\s*", marker):
        a, _, b = part.partition("-")
        lo, hi = int(a), int(b or a)
        out.extend(range(lo, hi + 1) if 0 <= hi - lo <= _RANGE_MAX else (lo, hi))
    return list(dict.fromkeys(out))


def strip_citations(text: str) -> str:
    """The text with its [n] citation markers replaced by a space."""
    return _CITATION.sub(" ", text)


def cited_numbers(text: str) -> list[int]:
    """Every source number the text's [n] markers cite, as resolve_citations reads them."""
    return [n for m in _CITATION.finditer(text) for n in _cited(m.group(2))]


def resolve_citations(text: str, numbered: set[int]) -> tuple[str, list[int]]:
    """(text, the numbers dropped): every [n] of a reader answer names a listed source; a
    marker's numbers that name none are removed, and a marker left empty goes with its space."""
    dropped: list[int] = []

    def fix(m: re.Match) -> str:
        nums = _cited(m.group(2))
        kept = [n for n in nums if n in numbered]
        dropped.extend(n for n in nums if n not in numbered)
        if len(kept) == len(nums):
            return m.group(0)
        return f"{m.group(1)}[{', '.join(map(str, kept))}]" if kept else ""

    return _CITATION.sub(fix, text), list(dict.fromkeys(dropped))


def note_confidence(trace: Trace, c: Completion) -> None:
    """trace.confidence: how sure the model was of the route's answer (geometric mean of its
    tokens' probabilities), where the backend reports log-probabilities (the local model does)."""
    confidence = answer_confidence(c)
    if confidence is not None:
        trace.confidence = round(confidence, 4)


def check_question(question: str) -> str:
    """Return the stripped question or raise BadQuestionError with a one-line reason. A question of
    characters that show nothing (engine.floor.base.text.has_text: zero-width, control, format
    characters, lone marks) is refused as an empty one is, before any LLM call; lone surrogates
    are replaced by U+FFFD, as in documents."""
    if not isinstance(question, str) or not question.strip():
        raise BadQuestionError("the question is empty")
    if not has_text(question):
        raise BadQuestionError("the question has no visible text (only invisible, control or format characters)")
    q = " ".join(repaired(question).split())
    n = len(q.split())
    if n > MAX_QUESTION_WORDS:
        raise BadQuestionError(
            f"the question has {n} words; the limit is {MAX_QUESTION_WORDS} (it must leave room for evidence)"
        )
    if len(q) > MAX_QUESTION_CHARS:
        raise BadQuestionError(
            f"the question has {len(q)} characters; the limit is {MAX_QUESTION_CHARS} (it must leave room for evidence)"
        )
    return q


# Replies that mean "no answer" (the answer prompt asks for a best guess, so these are rare but
# decisive). Matched against the whole cleaned answer, or as a phrase inside a short one.
_UNKNOWN_WHOLE = re.compile(
    r"^(unknown|unanswerable|none|n/?a|no answer|not known|no information|not available|"
    r"not (given|mentioned|stated|specified|provided|found)|i (do not|don't|cannot|can't) (know|say|tell)|"
    r"(it is |it's )?(unclear|impossible to (say|tell|determine))|cannot be determined|insufficient information)$",
    re.IGNORECASE,
)
_UNKNOWN_PHRASE = re.compile(
    r"(not in the (passages?|context|text|indexed documents)|(passages?|context|text) (do|does) not|"
    r"not (mentioned|stated|given|provided|specified) in|no (relevant )?information|not enough information|"
    r"cannot (be )?(answer|determin)|"
    r"can't (answer|determine)|unable to (answer|determine)|i (do not|don't) know|does not (say|mention|specify))",
    re.IGNORECASE,
)

_NOT_IN_DOCUMENTS = NOT_IN_DOCUMENTS.rstrip(".").lower()

# A logic-route sub-answer (a short phrase from its structured step) carrying any of these
# markers holds no fact: it is left out of the notes and may be asked again.
_UNKNOWN_MARKER = re.compile(r"\b(unknown|not (mentioned|provided|stated|given|specified)|no information|n/a)\b", re.I)


def looks_unanswered(text: str) -> str | None:
    """A reason string when the answer text says it has no answer, else None."""
    t = (text or "").strip().strip(".!\"'").strip()
    if not t:
        return "empty answer"
    if t.lower().startswith(_NOT_IN_DOCUMENTS):  # the answer prompt's own reply, whatever follows it
        return f"answer says it is not in the documents ({t[:80]!r})"
    if _UNKNOWN_WHOLE.match(t):
        return f"answer says it does not know ({t!r})"
    if len(t.split()) <= 25 and _UNKNOWN_PHRASE.search(t):
        return f"answer says the passages do not answer it ({t[:80]!r})"
    return None


def says_unknown(text: str) -> bool:
    """A sub-answer with a "no answer" marker anywhere in it. Unlike `looks_unanswered` it looks
    at any length but knows fewer phrasings: each keeps the rule its callers were measured with."""
    return bool(_UNKNOWN_MARKER.search(text))
