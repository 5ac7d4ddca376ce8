"""One question, read once: `read_question(text)` makes the `Question` that the pipeline hands to
every reader of the question's form (the Decider's form stage, the summary route's mode, the logic
route's plan, the absence rules, escalation) instead of each reading the text again.

Each reading is a cached property, computed on first use: a question routed to the chunk route
and answered never reads its key terms, and the form is read only where it can change the route.
The readings are those of engine.floor.question.forms and engine.floor.question.structure on the text as given.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

# A term counts as present when a word of its family is ("director" in a KB that says "directed"):
# the lexical index's terms are singular forms only, and a question words a fact its own way.
_SUFFIXES = ("ation", "ition", "ment", "ing", "ion", "ed", "er", "or", "es", "ly", "s", "e")
# Pronouns stand for something the question names elsewhere (or the conversation did): no term.
_PRONOUNS = frozenset("he she him his her hers its they them their you your we our us my me".split())  # noqa: SIM905


def word_family(term: str) -> set[str]:
    """`term` and the forms that share its root under a few English suffixes (modification:
    modify, modified)."""
    roots = {term} | {term[: -len(x)] for x in _SUFFIXES if term.endswith(x) and len(term) - len(x) >= 4}
    family = {term} | {r + x for r in roots for x in ("", *_SUFFIXES)}
    if term.endswith("ication") and len(term) > 10:
        family |= {term[: -len("ication")] + x for x in ("y", "ies", "ied", "ying")}
    return family


def key_terms(text: str) -> list[str]:
    """The terms of a question (or a sub-question) as the lexical index reads them (stop and
    question words, pronouns dropped), once each."""
    from engine.floor.words import tokens

    return [t for t in dict.fromkeys(tokens(text)) if len(t) > 1 and t not in _PRONOUNS]  # "'s" is no term


@dataclass(frozen=True)
class Question:
    """A checked question's text and what the grammar reads off it. Equal questions are equal
    texts; the readings are cached on the instance (frozen: nothing else changes it)."""

    text: str

    @cached_property
    def form_plan(self) -> tuple[str, list[str]] | None:
        """(the form's name, its sub-questions) when the question has a fixed form
        (engine.floor.question.forms.form_plan), else None."""
        from engine.floor.question.forms import form_plan

        return form_plan(self.text)

    @property
    def form(self) -> str | None:
        """The form's name ("chain", "date comparison", "same check"), or None."""
        return self.form_plan[0] if self.form_plan else None

    @property
    def hops(self) -> list[str]:
        """The form's sub-questions (#qN names the N-th one's answer); empty without a form."""
        return list(self.form_plan[1]) if self.form_plan else []

    @cached_property
    def shape(self) -> str:
        """The answer asked for: "list", "explanation" or "value" (engine.floor.question.structure.answer_shape)."""
        from engine.floor.question.structure import answer_shape

        return answer_shape(self.text)

    @cached_property
    def word(self) -> str:
        """The question word (engine.floor.question.structure.question_word): "who", "yesno", ... or "other"."""
        from engine.floor.question.structure import question_word

        return question_word(self.text)

    @cached_property
    def key_terms(self) -> list[str]:
        """The question's terms as the lexical index reads them (key_terms)."""
        return key_terms(self.text)

    @cached_property
    def term_families(self) -> list[set[str]]:
        """word_family of each key term, in order."""
        return [word_family(t) for t in self.key_terms]


def read_question(text: str) -> Question:
    """The one Question of a checked question's text: the pipeline calls this once per answer."""
    return Question(text)


def as_question(question: str | Question) -> Question:
    """`question` when it is a Question already, else read from its text: the boundary of a public
    function that also takes a string."""
    return question if isinstance(question, Question) else read_question(question)


def text_of(question: str | Question) -> str:
    """The text of a question given either way."""
    return question.text if isinstance(question, Question) else question
