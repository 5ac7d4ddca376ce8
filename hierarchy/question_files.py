"""Files of questions to ask or route, one reader for every command that takes `--questions`.

By file name:
- ``.txt``: one question per line (blank lines skipped);
- ``.jsonl``: one JSON object per line with a ``"question"`` string (label files too); a JSONL
  file in which no line has one is read as a QA data file (e.g. IRCoT's ``question_text``);
- anything else: a QA data file hierarchy.datasets reads (its "line" is the record number).

`read_question_items` keeps going past a bad line (its item says why); `read_questions` is the
strict form for commands that need every question: the first bad line is one error naming it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from engine.floor.base.errors import LogicRouteError


@dataclass
class QuestionItem:
    """One input item: its line (record number for a QA data file), the question read from it,
    and why it cannot be used (None when it can)."""

    line: int
    question: str | None
    error: str | None = None

    def error_record(self) -> dict:
        rec: dict = {"line": self.line}
        if self.question is not None:
            rec["question"] = self.question
        rec["error"] = self.error
        return rec


def read_question_items(path: str | Path) -> list[QuestionItem]:
    """Every item of a questions file, bad ones included. Raises a LogicRouteError only when the
    file as a whole cannot be read (an unknown QA data format)."""
    path = Path(path)
    if path.name.endswith(".txt"):
        return [
            QuestionItem(n, t) if t is not None else QuestionItem(n, None, "not UTF-8 text") for n, t in _lines(path)
        ]
    if path.name.endswith(".jsonl"):
        items, objects = [], 0
        for n, t in _lines(path):
            item, is_object = _jsonl_item(n, t) if t is not None else (QuestionItem(n, None, "not UTF-8 text"), False)
            items.append(item)
            objects += is_object
        if objects and all(i.question is None for i in items):
            return _dataset_items(path, fallback=items)  # a QA data file in JSONL (IRCoT's question_text, ...)
        return items
    return _dataset_items(path)


def read_questions(path: str | Path) -> list[str]:
    """Every question of a questions file; the first line that holds none is a LogicRouteError."""
    items = read_question_items(path)
    for item in items:
        if item.error is not None:
            raise LogicRouteError(f"{path}, line {item.line}: {item.error}")
    return [item.question.strip() for item in items]


def _dataset_items(path: Path, fallback: list[QuestionItem] | None = None) -> list[QuestionItem]:
    from hierarchy.datasets import load_dataset

    try:
        return [QuestionItem(i, q.text) for i, q in enumerate(load_dataset(path).questions, start=1)]
    except LogicRouteError:
        if fallback is None:
            raise
        return fallback  # not a QA data file either: the per-line errors say what each line lacks


def _lines(path: Path) -> Iterator[tuple[int, str | None]]:
    """(1-based line number, text) per non-blank line; text None for a line that is not UTF-8."""
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for n, raw in enumerate(data.split(b"\n"), start=1):
        try:
            text = raw.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError:
            yield n, None
            continue
        if text.strip():
            yield n, text


def _jsonl_item(n: int, text: str) -> tuple[QuestionItem, bool]:
    """The item of one JSONL line, and whether the line is a JSON object at all."""
    try:
        obj = json.loads(text)
    except ValueError as e:
        return QuestionItem(n, None, f"not JSON ({getattr(e, 'msg', e)} at column {getattr(e, 'colno', '?')})"), False
    if not isinstance(obj, dict):
        return QuestionItem(n, None, f'not a JSON object with a "question" field (a JSON {type(obj).__name__})'), False
    q = obj.get("question")
    if not isinstance(q, str):
        what = "no" if q is None else f"a non-string ({type(q).__name__})"
        return QuestionItem(n, None, f'{what} "question" field'), True
    return QuestionItem(n, q), True
