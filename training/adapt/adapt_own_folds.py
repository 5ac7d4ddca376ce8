"""`bench adapt --own-folds K`: the user's own questions (`adapt --questions`) measured on a
left-out set's real questions, with no new LLM call and no question judged by a router that saw it.

For each split seed the set's real questions are cut into K seeded folds. For each fold B,
`adapt` (training.adapt.adapt.adapt, the product's own path) is given the other folds' questions as its
`questions_file`, text only; it labels them by agreement with the logic route
(training.adapt.adapt_labels.agreement_scores), trains on them beside the written questions, and fits
its escalation threshold on both. The router it makes (its argmax, and its threshold) is judged on
B only. So each real question is judged once per split, by the router that did not see it; the
splits' figures are averaged (and their minimum kept).

The routes' answers to the real questions are not made again: they are replayed from the set's
answer-label rows (`answers_pred`, `costs`, `confidence`, `flags` per route), which were made on the
label runs' KBs, not on the bench's KB of the set's passages. The written questions' rows are
copied from the main adaptation's folder (the same rows a rerun would make from the LLM call
cache); any question neither replays nor finds there goes to the real route. Each fold keeps its
own folder (<work>/own_folds/split<s>/fold<b>), and the KB's adapted router, which every fold's
`adapt` replaces, is put back afterwards.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from engine.floor.base.errors import LogicRouteError
from engine.floor.base.trace import Trace
from training.adapt.adapt_labels import normalized

SPLIT_SEEDS = (0, 1, 2)  # each seeds the folds and the fine-tuning of that split's routers
OWN = "adapted, own questions (K-fold)"
TITLE = "the user's own questions, K-fold: agreement labels replayed from the label rows"


def fold_split(n: int, k: int, seed: int) -> list[list[int]]:
    """The indices 0..n-1 in k folds of a seeded permutation (sizes differ by at most one)."""
    import numpy as np

    if k < 2 or k > n:
        raise LogicRouteError(f"{k} folds of {n} questions: each fold needs the others' questions and one of its own")
    order = np.random.default_rng(seed).permutation(n)
    return [sorted(int(i) for i in order[b::k]) for b in range(k)]


def replayed_answer(row: dict, route: str):
    """The answer `route` gave to `row`'s question on its label run, as score_answer reads an
    answer (text, usage, confidence, flags); a route with no answer there fails as it did."""
    from engine.floor.base.types import Answer, Usage

    text = (row.get("answers_pred") or {}).get(route)
    if text is None:
        why = (row.get("errors") or {}).get(route) or "no answer in its label row"
        raise LogicRouteError(f"{route} on {row.get('id')}: {why}")
    cost = row["costs"][route]
    completion = int(cost.get("completion_tokens", 0))
    usage = Usage(
        llm_calls=int(cost.get("llm_calls", 0)),
        prompt_tokens=int(cost.get("prompt_tokens", int(cost.get("tokens", 0)) - completion)),
        completion_tokens=completion,
        cached_calls=int(cost.get("cached_calls", 0)),
        seconds=float(cost.get("seconds", 0.0)),
    )
    trace = Trace(
        flags=list((row.get("flags") or {}).get(route, [])), confidence=(row.get("confidence") or {}).get(route)
    )
    return Answer(text=text, route=route, usage=usage, trace=trace)


def real_route(route: str, question: str, kb, llm, k: int = 3, style: str = "short", **_):
    """A written question's answer as adapt's labeller makes it (its logic preset for the style)."""
    from engine.core.routes.logic.config import resolve_preset
    from training.labels.label_scorers import answer_route

    return answer_route(route, question, kb, llm, k, style=style, logic_preset=resolve_preset("auto", style))


@dataclass
class OwnFoldsRun:
    """What every fold of a left-out set shares: its answer-label rows and routes, the LODO
    generalist's decisions on them, adapt (training.adapt.adapt.adapt) and its keywords, the written
    questions' runner and the split seeds."""

    rows: list[dict]
    routes: list[str]
    generalist_decided: list[str]
    adapt_fn: Callable
    options: dict
    fallback: Callable | None = None
    split_seeds: Sequence[int] = SPLIT_SEEDS


@dataclass
class ReplayRunner:
    """adapt's `runner`: a real question's answers replayed from its label row, never the LLM;
    any other question (a written one) answered by `fallback`. Counts both."""

    rows: Sequence[dict]
    fallback: Callable = real_route
    replayed: int = 0
    answered: int = 0
    by_text: dict = field(init=False)

    def __post_init__(self) -> None:
        self.by_text = {normalized(r["question"]): r for r in self.rows}

    def __call__(self, route: str, question: str, kb, llm, k: int = 3, style: str = "short", **kw):
        row = self.by_text.get(normalized(question))
        if row is None:
            self.answered += 1
            return self.fallback(route, question, kb, llm, k, style=style, **kw)
        self.replayed += 1
        return replayed_answer(row, route)


def seed_fold_folder(out: Path, main: Path) -> None:
    """A fold's adapt folder starts from the main adaptation's written questions and their label
    rows (what a rerun would make again from the LLM call cache); a rerun keeps what it holds."""
    from engine.floor.base.files import atomic_write_text

    out.mkdir(parents=True, exist_ok=True)
    for name in ("questions.jsonl", "labels.jsonl"):
        if (main / name).is_file() and not (out / name).exists():
            atomic_write_text(out / name, (main / name).read_text())


@contextmanager
def kept_kb_router(kb_path: Path, embedder) -> Iterator[None]:
    """Whatever the folds' `adapt` runs record in the KB, its adapted router and manifest entry
    are what they were before (the router the rest of the bench judges and `ask` uses): none
    again when it had none."""
    from hierarchy.kb import KnowledgeBase
    from router.checkpoint import card_path
    from router.kb_router import ADAPTED, MANIFEST_ENTRY

    files = [Path(kb_path) / ADAPTED, card_path(Path(kb_path) / ADAPTED)]
    saved = {f: f.read_bytes() for f in files if f.is_file()}
    entry = (KnowledgeBase.open(kb_path, embedder).manifest or {}).get(MANIFEST_ENTRY)
    try:
        yield
    finally:
        from engine.floor.base.files import atomic_write_bytes

        for f in files:
            if f in saved:
                atomic_write_bytes(f, saved[f])
            else:
                f.unlink(missing_ok=True)
        kb = KnowledgeBase.open(kb_path, embedder)
        if (kb.manifest or {}).get(MANIFEST_ENTRY) != entry:
            with kb.writing():
                kb.annotate(MANIFEST_ENTRY, entry)


def adapt_fold(kb, llm, generalist: Path, out: Path, main: Path, given: Sequence[dict], seed: int, run: OwnFoldsRun):
    """`adapt` given the questions of `given` (their text only) in its own folder `out`; returns
    (the adapted router, loaded from its copy in `out`; the runner, with its counts)."""
    from engine.floor.base.files import atomic_write_text
    from router.checkpoint import load_router
    from router.kb_router import fit_to_kb

    seed_fold_folder(out, main)
    questions = out / "own_questions.jsonl"
    atomic_write_text(questions, "".join(_json({"question": r["question"]}) + "\n" for r in given))
    runner = ReplayRunner(run.rows, run.fallback or real_route)
    res = run.adapt_fn(
        kb.path, llm, generalist=generalist, seed=0, out=out, questions_file=questions, runner=runner,
        train_options={"seed": seed}, **run.options,
    )  # fmt: skip
    shutil.copyfile(res.checkpoint, out / "adapted.ckpt")  # the KB's copy is the next fold's
    return fit_to_kb(load_router(out / "adapted.ckpt", embedder=kb.embedder), kb), runner


def judge_split(kb, llm, generalist: Path, work: Path, seed: int, k: int, run: OwnFoldsRun) -> dict:
    """One split seed: every fold's router judged on its fold; the figures over all the questions,
    argmax and escalated, with each fold's threshold, best epoch and what its runner did. `work`:
    the set's folder (the main adaptation in <work>/adapt, the folds under <work>/own_folds)."""
    from training.adapt.adapt_verdict import decisions
    from training.fitting.lodo import judge
    from training.fitting.lodo_cascade import escalate

    rows, routes = run.rows, run.routes
    decided, escalated, paid, folds = [""] * len(rows), [""] * len(rows), [{}] * len(rows), []
    for b, judged in enumerate(fold_split(len(rows), k, seed)):
        given = [r for i, r in enumerate(rows) if i not in judged]  # the other folds' questions
        out = work / "own_folds" / f"split{seed}" / f"fold{b}"
        router, runner = adapt_fold(kb, llm, generalist, out, work / "adapt", given, seed, run)
        mine = [rows[i] for i in judged]
        first, _, _ = decisions(router, [r["question"] for r in mine])
        below = router.escalate_below
        after, extra = escalate(mine, first, below) if below is not None else (first, [{}] * len(mine))
        for j, i in enumerate(judged):
            decided[i], escalated[i], paid[i] = first[j], after[j], extra[j]
        history = (router.card.get("training") or {}).get("history") or {}
        folds.append(
            {"fold": b, "judged": judged, "given": len(given), "escalate_below": below,
             "best_epoch": history.get("best_epoch"), "replayed": runner.replayed, "answered": runner.answered}
        )  # fmt: skip
    moved = sum(d != g for d, g in zip(decided, run.generalist_decided)) / max(len(rows), 1)
    return {
        "seed": seed,
        "router": judge(rows, decided, routes),
        "escalating": judge(rows, escalated, routes, paid),
        "moved_from_generalist": round(moved, 3),
        "folds": folds,
    }


def own_folds(
    kb, llm, generalist: Path, work: Path, k: int, run: OwnFoldsRun, systems: Mapping, echo: Callable
) -> dict:
    """K-fold over the set's real questions for each of run.split_seeds: the splits, their mean
    and minimum, and issue 43's verdict on the mean, beside `systems` (the bench's, for the bar)."""
    from training.adapt.adapt_verdict import CONFIDENCE, mean_tables, verdict

    seeds = list(run.split_seeds)
    splits = []
    with kept_kb_router(kb.path, kb.embedder):
        for seed in seeds:
            echo(f"own questions: split seed {seed}, {k} folds")
            splits.append(judge_split(kb, llm, generalist, work, seed, k, run))
    own = {
        OWN: mean_tables([s["router"] for s in splits]),
        OWN + CONFIDENCE: mean_tables([s["escalating"] for s in splits]),
    }
    both = {**systems, **own}
    per_split = {name: [verdict({**both, name: s[key]}, run.routes, name)["passes"] for s in splits]
                 for name, key in ((OWN, "router"), (OWN + CONFIDENCE, "escalating"))}  # fmt: skip
    return {
        "folds": k,
        "split_seeds": seeds,
        "systems": own,
        "min_score": {
            OWN: min(s["router"]["score"] for s in splits),
            OWN + CONFIDENCE: min(s["escalating"]["score"] for s in splits),
        },  # fmt: skip
        "splits_passing": {name: sum(p) for name, p in per_split.items()},
        "moved_from_generalist": round(sum(s["moved_from_generalist"] for s in splits) / len(splits), 3),
        "replayed_only": all(f["answered"] == 0 for s in splits for f in s["folds"]),
        "verdict": verdict(both, run.routes, OWN),
        "verdict_escalating": verdict(both, run.routes, OWN + CONFIDENCE),
        "splits": splits,
    }


def _json(obj) -> str:
    import json

    return json.dumps(obj, ensure_ascii=False)


# ---------------------------------------------------------------- report


def _share(m: dict, logic: float | None) -> str:
    return f" ({m['tokens'] / logic:.0%})" if logic else ""


def summary_lines(sets: Mapping[str, dict]) -> list[str]:
    """One row per set with own folds: the LODO generalist, the adapted router without questions,
    the own-folds router (argmax and escalated; mean and min over splits) and the bar."""
    from training.adapt.adapt_verdict import CONFIDENCE, GENERALIST, SPECIALIST, score_bar

    parts = {n: p for n, p in sets.items() if p.get("own_folds")}
    if not parts:
        return []
    first = next(iter(parts.values()))["own_folds"]
    lines = [
        f"With the user's own questions ({first['folds']}-fold over each set's real questions, split seeds "
        f"{', '.join(map(str, first['split_seeds']))}; agreement labels, the routes' answers replayed from the label "
        "rows; tokens as a share of always-logic's):",
        "",
        "| left out | bar | LODO generalist | adapted, no questions | own questions: mean, min | own questions, "
        "escalation on: mean, min | decisions moved | passes (router; escalation on) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, part in parts.items():
        s, o = part["systems"], part["own_folds"]
        logic = s.get("always logic", {}).get("tokens")
        cells = [f"{s[GENERALIST]['score']}{_share(s[GENERALIST], logic)}", f"{s[SPECIALIST]['score']}"]
        for key in (OWN, OWN + CONFIDENCE):
            m = o["systems"][key]
            cells.append(f"{m['score']}{_share(m, logic)}, {o['min_score'][key]}")
        routes = [k.removeprefix("always ") for k in s if k.startswith("always ")]
        passes = "; ".join(
            _yes(o[v]["passes"], o["splits_passing"][o[v]["system"]], len(o["splits"])) for v in VERDICTS
        )
        lines.append(
            f"| {name} | {score_bar(s, routes)} | {' | '.join(cells)} | {o['moved_from_generalist']:.0%} | {passes} |"
        )
    return [*lines, ""]


VERDICTS = ("verdict", "verdict_escalating")


def _yes(passes: bool, splits_passing: int, splits: int) -> str:
    return f"{'yes' if passes else 'no'} ({splits_passing} of {splits} splits)"


def section_lines(part: dict) -> list[str]:
    """A set's own-folds section: the splits, every fold's threshold and best epoch, the verdicts."""
    o = part.get("own_folds")
    if not o:
        return []
    logic = part["systems"].get("always logic", {}).get("tokens")
    others = "the other fold's questions" if o["folds"] == 2 else f"the other {o['folds'] - 1} folds' questions"
    lines = [
        f"### {TITLE}",
        "",
        f"Each real question judged once per split by the router `adapt` made with {others} given as `--questions` "
        "(labelled by agreement with logic's answer; the split seed also seeds the fine-tuning). The routes' answers "
        "to the real questions were replayed from the set's answer-label rows (made on the label runs' KBs, not the "
        f"bench's KB); no LLM call was made for them{'' if o['replayed_only'] else ' (some written question was not'}"
        f"{'' if o['replayed_only'] else ' in the main labels and was answered: see answered below)'}.",
        "",
        "| split seed | own questions | escalation on | decisions moved from the LODO generalist | thresholds "
        "(per fold) | best epoch (per fold; -1 = the generalist's weights kept) |",
        "|---|---|---|---|---|---|",
    ]
    for s in o["splits"]:
        r, e = s["router"], s["escalating"]
        cuts = ", ".join("none" if f["escalate_below"] is None else f"{f['escalate_below']:.3f}" for f in s["folds"])
        epochs = ", ".join(str(f["best_epoch"]) for f in s["folds"])
        lines.append(
            f"| {s['seed']} | {r['score']}{_share(r, logic)} | {e['score']}{_share(e, logic)} | "
            f"{s['moved_from_generalist']:.0%} | {cuts} | {epochs} |"
        )
    lines.append("")
    for key in VERDICTS:
        v = o[key]
        lines.append(_verdict_line(v, o["min_score"][v["system"]], o["splits_passing"][v["system"]], len(o["splits"])))
        lines.append("")
    return lines


def _verdict_line(v: dict, low: float, passing: int, splits: int) -> str:
    share = f", {v['token_share_of_logic']:.0%} of always-logic's tokens" if v["token_share_of_logic"] else ""
    return (
        f"verdict for {v['system']} (mean over splits): {'PASSES' if v['passes'] else 'does not pass'}: "
        f"{v['gain_over_generalist']:+} over the LODO generalist (bar +2), {v['below_best_fixed']} below the best "
        f"fixed route ({v['best_fixed_route']}; bar 1){share} (bar 50%); lowest split {low}; {passing} of {splits} "
        "splits pass"
    )
