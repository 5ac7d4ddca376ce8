"""`logicroute route --questions FILE`: route every question of a file in one process.

Input, by file name:
- ``.txt``: one question per line (blank lines skipped);
- ``.jsonl``: one JSON object per line with a ``"question"`` string (label files too); a JSONL
  file in which no line has one is read as a QA data file (e.g. IRCoT's ``question_text``);
- anything else: a QA data file hierarchy.datasets reads (its "line" is the record number).

Output: one JSON line per input item, in input order, on stdout:
``{"line", "question", "route", "probs", "policy", "ood"}``; an item that cannot be routed (not
JSON, no "question" string, not UTF-8, an empty or overlong question) gets
``{"line", "question" (when one was read), "error"}`` instead, and the run goes on. A warning on
stderr counts the failed lines; the exit status is 0 unless the file as a whole cannot be read.

`read_items(path)` reads the file, `route_items(router, items)` routes and prints. The router
(embedder + MLP) is loaded once by the caller; questions are decided in batches of
BATCH (one embedding batch each) and printed as each batch is done.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import click

from engine.base.errors import LogicRouteError

BATCH = 256
log = logging.getLogger("logicroute.cli")


@dataclass
class Item:
    """One input item: its line (record number for a QA data file), the question read from it,
    and why it cannot be routed (None when it can)."""

    line: int
    question: str | None
    error: str | None = None

    def error_record(self) -> dict:
        rec: dict = {"line": self.line}
        if self.question is not None:
            rec["question"] = self.question
        rec["error"] = self.error
        return rec


@dataclass
class Routed:
    """What `route_file` did: every routed question's route and OOD measure, and the failed items."""

    routes: list[str] = field(default_factory=list)
    oods: list[dict | None] = field(default_factory=list)
    failed: int = 0

    @property
    def items(self) -> int:
        return len(self.routes) + self.failed


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


def _jsonl_item(n: int, text: str) -> tuple[Item, bool]:
    """The item of one JSONL line, and whether the line is a JSON object at all."""
    try:
        obj = json.loads(text)
    except ValueError as e:
        return Item(n, None, f"not JSON ({getattr(e, 'msg', e)} at column {getattr(e, 'colno', '?')})"), False
    if not isinstance(obj, dict):
        return Item(n, None, f'not a JSON object with a "question" field (a JSON {type(obj).__name__})'), False
    q = obj.get("question")
    if not isinstance(q, str):
        what = "no" if q is None else f"a non-string ({type(q).__name__})"
        return Item(n, None, f'{what} "question" field'), True
    return Item(n, q), True


def read_items(path: str | Path) -> list[Item]:
    """Every item of a questions file, bad ones included (their error says why). Raises a
    LogicRouteError only when the file as a whole cannot be read (an unknown QA data format)."""
    from engine.routes.common import check_question

    path = Path(path)
    if path.name.endswith(".txt"):
        items = [Item(n, t) if t is not None else Item(n, None, "not UTF-8 text") for n, t in _lines(path)]
    elif path.name.endswith(".jsonl"):
        items, objects = [], 0
        for n, t in _lines(path):
            item, is_object = _jsonl_item(n, t) if t is not None else (Item(n, None, "not UTF-8 text"), False)
            items.append(item)
            objects += is_object
        if objects and all(i.question is None for i in items):
            items = _dataset_items(path, fallback=items)  # a QA data file in JSONL (IRCoT's question_text, ...)
    else:
        items = _dataset_items(path)
    for item in items:
        if item.error is None:
            try:
                item.question = check_question(item.question)
            except LogicRouteError as e:
                item.error = str(e)
    return items


def _dataset_items(path: Path, fallback: list[Item] | None = None) -> list[Item]:
    from hierarchy.datasets import load_dataset

    try:
        return [Item(i, q.text) for i, q in enumerate(load_dataset(path).questions, start=1)]
    except LogicRouteError:
        if fallback is None:
            raise
        return fallback  # not a QA data file either: the per-line errors say what each line lacks


def route_items(router, items: list[Item], policy=None, *, source: object = "", echo=click.echo) -> Routed:
    """Route the items of `read_items` with `router` (router.checkpoint.Router) under `policy`
    (None: argmax), echoing one JSON line per item in input order; see the module docstring.
    `source` names the file in the warnings."""
    done = Routed()
    for start in range(0, len(items), BATCH):
        batch = items[start : start + BATCH]
        good = [i for i in batch if i.error is None]
        decided = iter(router.decide_many([i.question for i in good], policy)) if good else iter(())
        for item in batch:
            if item.error is not None:
                done.failed += 1
                echo(json.dumps(item.error_record(), ensure_ascii=False))
                continue
            d = next(decided)
            done.routes.append(d["route"])
            done.oods.append(d["ood"])
            echo(json.dumps({"line": item.line, **d}, ensure_ascii=False))
    if not items:
        log.warning("no questions in %s", source)
    elif done.failed:
        log.warning(
            '%d of %d items of %s could not be routed: their records hold an "error" instead of a route',
            done.failed,
            done.items,
            source,
        )
    return done
