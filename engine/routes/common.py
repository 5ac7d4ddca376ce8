"""What every route shares: question validation."""
from __future__ import annotations

from engine.errors import BadQuestionError

# The local model has a 4,096-token window; few-shots + 3 passages take ~700 tokens.
# A question longer than this leaves no room for evidence.
MAX_QUESTION_WORDS = 400


def check_question(question: str) -> str:
    """Return the stripped question or raise BadQuestionError with a one-line reason."""
    if not isinstance(question, str) or not question.strip():
        raise BadQuestionError("the question is empty")
    q = " ".join(question.split())
    n = len(q.split())
    if n > MAX_QUESTION_WORDS:
        raise BadQuestionError(
            f"the question has {n} words; the limit is {MAX_QUESTION_WORDS} (it must leave room for evidence)"
        )
    return q
