"""The labels of `logicroute adapt`: every route the KB can run answers each question with the
user's LLM, and the answers become label rows exactly as `logicroute label` makes them
(training.labels.label_scorers.score_answer, training.labels.labels.make_row, one resumable JSONL file).

- Written questions (training.adapt.adapt_questions) carry their answer by construction: each route's
  answer is scored by token F1 against it (short style), as `label` scores a QA set.
- The user's own questions (`--questions`) have no answer. They are labelled by agreement: a
  cheap route scores 1 when its answer's token F1 against the logic route's answer is at least
  AGREEMENT_F1, else 0; logic scores 1 when it answered. The preference's cost term then prefers
  the cheap route wherever it agrees, and logic elsewhere.
- A route of the generalist that the KB cannot run (summary without summary layers) or that
  `--routes` leaves out is not run: it scores 0 and is listed under "skipped", so training puts
  no mass on it (training.labels.label_arrays.target_matrix), and the rows keep the generalist's routes.

Each finished question is appended at once, so a run that is killed loses at most the
questions in flight, and a rerun labels only the questions the file lacks (the LLM call cache
answers the calls a killed question had made). `concurrency` questions run at once, for a
remote endpoint; `deadline` stops taking new questions once it passes.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path

from engine.floor.base.errors import LogicRouteError
from engine.floor.base.files import content_hash
from engine.floor.base.metrics import f1
from hierarchy.datasets import Question
from router.policy import NOMINAL_TOKENS
from training.labels.label_scorers import NOMINAL_CALLS, LabelConfig, answer_route, score_answer
from training.labels.labels import make_row, open_label_file, row_key

WRITTEN = "adapt"  # the dataset name of the written questions' rows
OWN = "own"  # the dataset name of the user's own questions' rows
AGREEMENT_F1 = 0.5  # a cheap answer agrees with logic's at this token F1 or more
AGREEMENT_METRIC = f"agreement: token F1 >= {AGREEMENT_F1} with the logic route's answer"


def written_questions(written: Sequence) -> list[Question]:
    """Label questions of the writer's questions (training.adapt.adapt_questions.WrittenQuestion)."""
    return [
        Question(id=w.id, text=w.question, answers=[w.answer], type=w.kind, supporting=[], dataset=WRITTEN)
        for w in written
    ]


def normalized(text: str) -> str:
    """A question as adapt holds the user's own: runs of whitespace as one space."""
    return " ".join(text.split())


def own_questions(texts: Sequence[str]) -> list[Question]:
    """Label questions of the user's own questions; the id is the text's hash, so a file edited
    between runs keeps the labels of the questions it still holds."""
    uniq = list(dict.fromkeys(normalized(t) for t in texts if t.strip()))
    return [
        Question(id=f"own-{content_hash(t)[:12]}", text=t, answers=[], type="own", supporting=[], dataset=OWN)
        for t in uniq
    ]


def runnable_routes(kb, routes: Sequence[str], wanted: Sequence[str] | None = None) -> tuple[str, ...]:
    """The routes of `routes` (the generalist's) that adapt runs: those `wanted` (all by default)
    that the KB can run. At least two, logic among them (agreement labels and a choice need it)."""
    from hierarchy.layers.persist import has_summary_layers

    if wanted is not None:
        unknown = sorted(set(wanted) - set(routes))
        if unknown:
            raise LogicRouteError(f"routes {unknown} are not the router's ({', '.join(routes)})")
    run = [r for r in routes if (wanted is None or r in wanted) and (r != "summary" or has_summary_layers(kb))]
    if len(run) < 2 or "logic" not in run:
        raise LogicRouteError(
            f"adapt needs logic and a cheaper route to run on this KB, not {run or 'none'} (summary needs the KB's "
            "summary layers: `logicroute index --kb DIR` builds them)"
        )
    return tuple(run)


def agreement_scores(answers: dict[str, str], routes: Sequence[str]) -> dict[str, float]:
    """Per route: logic 1.0 when it answered; a cheap route 1.0 when it agrees with logic (token
    F1 >= AGREEMENT_F1), else 0.0. Without a logic answer every route scores 0 (nothing to agree with)."""
    logic = answers.get("logic")
    if not logic:
        return {r: 0.0 for r in routes}
    return {r: 1.0 if r == "logic" else float(f1(answers.get(r) or "", [logic]) >= AGREEMENT_F1) for r in routes}


def full_row(q: Question, scores: dict, costs: dict, extra: dict, cfg: LabelConfig, index: int) -> dict:
    """The label row over every route of `cfg`, the routes not run scoring 0 and listed as skipped."""
    not_run = [r for r in cfg.routes if r not in scores]
    # the costliest measured route's tokens: the preference's cost scale (max cost) stays the measured one
    top = max((float(c.get("tokens") or 0.0) for c in costs.values()), default=0.0)
    for r in not_run:
        scores[r] = 0.0
        costs[r] = {
            "tokens_est": top or NOMINAL_TOKENS.get(r, 0.0),
            "llm_calls_est": NOMINAL_CALLS.get(r, 1),
            "skipped": True,
        }
    if not_run:
        extra = {**extra, "skipped": not_run, "not_run": not_run}
    ordered = ({r: scores[r] for r in cfg.routes}, {r: costs[r] for r in cfg.routes})
    return make_row(q, *ordered, cfg, index=index, extra=extra)


def _key(q: Question) -> str:
    return row_key({"dataset": q.dataset, "id": q.id})


def label_one(q: Question, kb, llm, cfg: LabelConfig, run_routes: Sequence[str], runner: Callable, index: int) -> dict:
    """One question's label row: written questions scored against their answer, own ones by agreement."""
    scores, costs, extra = score_answer(q, kb, llm, replace(cfg, routes=tuple(run_routes)), runner)
    if q.dataset == OWN:
        scores = agreement_scores(extra.get("answers_pred", {}), run_routes)
        extra = {**extra, "metric": AGREEMENT_METRIC, "labelled_by": "agreement"}
    return full_row(q, scores, costs, extra, cfg, index)


@dataclass
class LabelRun:
    """What one labelling run did: `rows` are the label file's rows of the questions asked (earlier
    runs' included); `new` of them this run, `left` questions not reached (the time budget)."""

    rows: list[dict]
    new: int
    left: int
    seconds: float
    llm_calls: int
    cached_calls: int
    tokens: int


def label_all(
    questions: Sequence[Question],
    kb,
    llm,
    out: str | Path,
    cfg: LabelConfig,
    run_routes: Sequence[str],
    *,
    runner: Callable = answer_route,
    concurrency: int = 1,
    deadline: float | None = None,
    progress: bool = True,
) -> LabelRun:
    """Label the questions the file at `out` lacks; `deadline` (time.monotonic) stops new ones."""
    from engine.floor.base.progress import progress_bar

    t0 = time.perf_counter()
    store = open_label_file(Path(out), cfg)
    if runner is answer_route:  # the logic route's settings, as `label` runs them
        runner = functools.partial(answer_route, logic_preset=cfg.logic_preset)
    index = {_key(q): i for i, q in enumerate(questions)}
    todo = [q for q in questions if _key(q) not in store]
    new: list[dict] = []
    bar = progress_bar(len(todo), "labelling (every route answers)", "q", progress)
    pending, queue, width = set(), list(reversed(todo)), max(1, concurrency)
    in_time = lambda: deadline is None or time.monotonic() < deadline  # noqa: E731
    with ThreadPoolExecutor(max_workers=width, thread_name_prefix="adapt-label") as pool:
        try:
            while queue or pending:
                while queue and len(pending) < width and in_time():
                    q = queue.pop()
                    pending.add(pool.submit(label_one, q, kb, llm, cfg, run_routes, runner, index[_key(q)]))
                if not pending:
                    break  # the time budget is spent: the rest waits for a rerun
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    row = f.result()
                    store.append(row)
                    new.append(row)
                    bar.update(1)
        finally:
            for f in pending:
                f.cancel()
            bar.close()
    rows = [r for q in questions if (r := store.get(_key(q))) is not None]
    spent = [c for r in new for c in r["costs"].values() if not c.get("skipped")]
    return LabelRun(
        rows=rows,
        new=len(new),
        left=len(queue),
        seconds=round(time.perf_counter() - t0, 1),
        llm_calls=sum(int(c.get("llm_calls", 0)) for c in spent),
        cached_calls=sum(int(c.get("cached_calls", 0)) for c in spent),
        tokens=sum(int(c.get("tokens", 0)) for c in spent),
    )
