"""Scoring an answer to a list question (training.global_qa.list_questions): which gold items it
names, which items it lists that are not gold, and the set's recall and precision.

An item is named when one of its aliases occurs whole-word (not inside a longer name: `http` is
not in `http2`, `--leak-check` not in `--leak-check-heuristics`), case-insensitively. The items an
answer lists are found by matching the whole vocabulary of the question's kind (every module,
command, option or tool of the corpus), so a wrong but real item counts against precision; an
item the question itself names ("... list `npm install` under See Also?") is not counted as
listed unless it is gold."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from training.global_qa.list_questions import Item

_CITATION = re.compile(r"\[\d+(?:\s*,\s*\d+)*\]")


@lru_cache(maxsize=8192)
def alias_pattern(alias: str) -> re.Pattern:
    return re.compile(r"(?<![\w-])" + re.escape(alias) + r"(?![\w-])", re.IGNORECASE)


def named(text: str, items: Iterable[Item]) -> set[str]:
    """The names of the items one of whose aliases (the name only if it is one) occurs in `text`.
    Longer matches win: where
    "Child process" is read as `child_process`, its "process" is not also `process`, nor the "npm"
    of "npm ci" the item `npm`."""
    text = _CITATION.sub(" ", text)
    hits = [(m.start(), m.end(), i.name) for i in items for a in i.aliases for m in alias_pattern(a).finditer(text)]
    taken: list[tuple[int, int]] = []
    out: set[str] = set()
    for start, end, name in sorted(hits, key=lambda h: (h[0] - h[1], h[0])):
        if all(end <= s or start >= e for s, e in taken):
            taken.append((start, end))
            out.add(name)
        elif (start, end) in taken:
            out.add(name)  # the same text is an alias of two items: both are named
    return out


@dataclass(frozen=True)
class ListScore:
    recall: float
    precision: float
    found: tuple[str, ...]  # gold items the answer names
    missed: tuple[str, ...]  # gold items it does not
    wrong: tuple[str, ...]  # items of the vocabulary it lists that are not gold

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 0.0 if p + r == 0 else 2 * p * r / (p + r)

    def to_json(self) -> dict:
        return {
            "recall": round(self.recall, 4),
            "precision": round(self.precision, 4),
            "f1": round(self.f1, 4),
            "found": list(self.found),
            "missed": list(self.missed),
            "wrong": list(self.wrong),
        }


def gold_items(question: Mapping) -> list[Item]:
    return [Item(g["name"], tuple(g["aliases"]), tuple(g.get("sources", ()))) for g in question["gold"]]


def score(answer: str, question: Mapping, vocabulary: Mapping[str, list[Item]]) -> ListScore:
    """Recall (gold items named / gold items) and precision (gold items named / items listed);
    an answer that lists nothing has precision 0."""
    gold = gold_items(question)
    gold_names = {g.name for g in gold}
    items = list({i.name: i for i in (*vocabulary.get(question["kind"], ()), *gold)}.values())
    in_answer = named(answer, items)
    found = in_answer & gold_names
    in_question = named(question["question"], items) - gold_names
    listed = in_answer - in_question
    wrong = listed - gold_names
    return ListScore(
        recall=len(found) / len(gold) if gold else 0.0,
        precision=len(found) / len(listed) if listed else 0.0,
        found=tuple(sorted(found)),
        missed=tuple(sorted(gold_names - found)),
        wrong=tuple(sorted(wrong)),
    )
