"""`logicroute route --questions FILE`: route every question of a file in one process.

Input: any questions file hierarchy.question_files reads (.txt, .jsonl, a QA data file).

Output: one JSON line per input item, in input order, on stdout:
``{"line", "question", "route", "probs", "policy", "ood"}``; an item that cannot be routed (not
JSON, no "question" string, not UTF-8, an empty or overlong question) gets
``{"line", "question" (when one was read), "error"}`` instead, and the run goes on. A warning on
stderr counts the failed lines; the exit status is 0 unless the file as a whole cannot be read.

`engine.cli_options.read_items(path)` reads the file (`ask --questions` reads it the same way),
`route_items(router, items)` routes and prints. The router
(embedder + MLP) is loaded once by the caller; questions are decided in batches of
BATCH (one embedding batch each) and printed as each batch is done.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

import click

from hierarchy.question_files import QuestionItem

BATCH = 256
log = logging.getLogger("logicroute.cli")


@dataclass
class Routed:
    """What `route_file` did: every routed question's route and OOD measure, and the failed items."""

    routes: list[str] = field(default_factory=list)
    oods: list[dict | None] = field(default_factory=list)
    failed: int = 0

    @property
    def items(self) -> int:
        return len(self.routes) + self.failed


def route_items(router, items: list[QuestionItem], policy=None, *, source: object = "", echo=click.echo) -> Routed:
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
