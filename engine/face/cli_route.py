"""`logicroute ask --dry-run`: where the router sends a question, or every question of a file in
one process, with no retrieval and no LLM call.

One question: the route probabilities, the route and its out-of-distribution line (--json: one
object). A file (--questions FILE):

Input: any questions file hierarchy.question_files reads (.txt, .jsonl, a QA data file).

Output: one JSON line per input item, in input order, on stdout: ``{"line", "question"}`` and the
decision as `ask` makes it (engine.core.decide.Decision.to_dict: route, router_route, probs, policy,
list_gate, threshold, ood, escalate, router); an item that cannot be routed (not
JSON, no "question" string, not UTF-8, an empty or overlong question) gets
``{"line", "question" (when one was read), "error"}`` instead, and the run goes on. A warning on
stderr counts the failed lines; the exit status is 0 unless the file as a whole cannot be read.

`engine.face.cli_options.read_items(path)` reads the file (answering with `ask --questions` reads it the same way),
`route_items(decide, items)` routes and prints. With --kb the decision is the KB's own (its adapted
router, its headings in the out-of-distribution guard), exactly as `ask --kb` answers; without,
the named or shipped checkpoint's. Questions are decided in batches of BATCH (one embedding batch
each) and printed as each batch is done.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field

import click

from hierarchy.question_files import QuestionItem

BATCH = 256
NOTICE_MIN_QUESTIONS = 10  # a batch this size all on one route (or all far) says something about the router
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


def route_items(decide, items: list[QuestionItem], *, source: object = "", echo=click.echo) -> Routed:
    """Route the items of `read_items` with `decide` (questions -> engine.core.decide.Decision list),
    echoing one JSON line per item in input order; see the module docstring. `source` names the
    file in the warnings."""
    done = Routed()
    for start in range(0, len(items), BATCH):
        batch = items[start : start + BATCH]
        good = [i for i in batch if i.error is None]
        decided = iter(decide([i.question for i in good])) if good else iter(())
        for item in batch:
            if item.error is not None:
                done.failed += 1
                echo(json.dumps(item.error_record(), ensure_ascii=False))
                continue
            d = next(decided)
            done.routes.append(d.router_route)
            done.oods.append(d.ood)
            echo(json.dumps({"line": item.line, "question": item.question, **d.to_dict()}, ensure_ascii=False))
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


def dry_run(ctx, question: str | None, questions_file: str | None, config, kb_dir: str | None, as_json: bool) -> None:
    """`ask --dry-run`: the decision `ask` would make for QUESTION, or for every question of the
    file (engine.core.decide): with --kb the KB's own router and guard, else the checkpoint's."""
    from engine.core.routes.common import check_question

    if questions_file:
        from engine.face.cli_options import read_items

        items = read_items(questions_file)  # a file that cannot be read at all fails before the models load
        decide, _ = _decider(ctx, config, kb_dir)
        routed = route_items(decide, items, source=questions_file)  # one JSON line each; bad ones: error
        notice = routing_notice(routed.routes, routed.oods)
        if notice:
            log.warning(notice)
        return
    q = check_question(question)
    decide, checkpoint = _decider(ctx, config, kb_dir)
    decide(["warm-up"])  # load the embedder first: the time shown is the decision's, not the model load's
    t0 = time.perf_counter()
    (d,) = decide([q])
    seconds = time.perf_counter() - t0
    if as_json:
        click.echo(json.dumps({"question": q, **d.to_dict(), "checkpoint": checkpoint}, ensure_ascii=False))
        return
    click.echo("  ".join(f"{r} {p:.3f}" for r, p in d.probs.items()))
    click.echo(f"route: {d.route}  ({d.decided_by}, {1000 * seconds:.1f} ms, {d.router or checkpoint})")
    click.echo(ood_line(d.ood))


def _decider(ctx, config, kb_dir: str | None):
    """(questions -> decisions, the checkpoint's path): `ask`'s own decision on the KB at `kb_dir`,
    or, with no KB, the named (else shipped) checkpoint's under the same policies."""
    from engine.core.decide import decide_many

    if kb_dir is not None:
        from engine.core.pipeline import RoutedRAG

        rag = RoutedRAG.open(kb_dir, **config.options())
        router = rag.get_router()
        return (lambda qs: rag.decide_many(qs)), str(router.path)
    from engine.face.cli_options import injected_embedder
    from router.checkpoint import load_router

    router = load_router(config.checkpoint, embedder=injected_embedder(ctx))

    def decide(qs):
        return decide_many(router, qs, config.budget, config.ood_policy, config.style, config.list_gate)

    return decide, str(router.path)


def ood_line(ood: dict | None) -> str:
    """One line on how far a question is from the router's training questions."""
    if ood is None:
        return "ood: no guard (this checkpoint stores no reference set of training questions)"
    measured = f"similarity {ood['similarity']:.3f}, threshold {ood['threshold']:.3f}"
    if ood["far"]:
        return f"ood: FAR from the router's training questions ({measured}): `ask` falls back per its ood_policy"
    return f"ood: near the router's training questions ({measured})"


def routing_notice(routes: list[str], oods: list[dict | None]) -> str | None:
    """A line for a batch the router handles badly: every question far from its training
    questions, or every question on one route. None for a batch under NOTICE_MIN_QUESTIONS."""
    n = len(routes)
    if n < NOTICE_MIN_QUESTIONS:
        return None
    advice = (
        "calibrate a threshold on questions like these (`logicroute calibrate QUESTIONS --logic-share S --out "
        "thresholds.json`, then `--set budget.thresholds=thresholds.json`), or adapt the router to the KB "
        "(`logicroute adapt --kb DIR`: no labelled question needed; `logicroute train specialist` takes your labels)"
    )
    if all(o is not None and o.get("far") for o in oods):
        return (
            f"all {n} questions are far from the router's training questions, so its routes are guesses "
            f"(each was answered per the ood_policy setting): {advice}"
        )
    if len(set(routes)) == 1:
        return f"the router sent all {n} questions to the {routes[0]} route; if they need different routes, {advice}"
    return None
