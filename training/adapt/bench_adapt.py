"""`logicroute bench adapt`: does `logicroute adapt` make the router better on a corpus it never
saw? Judged leave-one-dataset-out on shared data (issue 43), for each left-out set S:

1. the LODO generalist: the shipped recipe (its card's settings) trained on every answer-label
   file but S's, and on no prior of S (training.fitting.train.train_generalist, leave_out);
2. S's corpus: a KB of the passages of S's answer-label questions only (training.common.passage_kb,
   with extractive summary layers so the summary route and overview questions exist);
3. `adapt` on that KB from the LODO generalist, with no question of S given to it
   (training.adapt.adapt.adapt): written questions, their labels, then fine-tuning once per seed (the
   questions and labels are made once and reused; only the fine-tuning seed changes);
4. both routers judged on S's real questions through S's existing answer-label rows (their
   per-route scores and costs, so no new answer is made), beside each fixed route and the oracle
   (training.fitting.lodo.judge), the specialist as the mean over the seeds.

The bar (issue 43): the adapted router's score >= the LODO generalist's + 2, or within 1 of the
best fixed route, at no more than 50% of always-logic's tokens."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.floor.base.errors import LogicRouteError
from training.adapt.adapt_verdict import (
    CONFIDENCE,
    GENERALIST,
    SPECIALIST,
    decisions,
    mean_tables,
    score_bar,
    verdict,
)

SETS = ("musique", "medical", "2wiki")
SEEDS = (0, 1, 2)
KB_CHUNK_CASCADE = "chunk + confidence (KB threshold)"


def shipped_label_files(checkpoint: str | Path | None = None) -> list[str]:
    """The answer-label files the shipped generalist (or `checkpoint`) was trained on, as its card
    lists them: the card file beside it (kept up to date when files move), else the embedded one."""
    from router.checkpoint import DEFAULT_CHECKPOINT, card_path, read_card

    ckpt = Path(checkpoint or DEFAULT_CHECKPOINT)
    side = card_path(ckpt)
    card = json.loads(side.read_text()) if side.is_file() else read_card(ckpt)
    files = [f["path"] for f in (card.get("training") or {}).get("label_files", [])]
    missing = [f for f in files if not Path(f).is_file()]
    if not files or missing:
        why = f"{', '.join(missing)} not found" if missing else "its card lists no label files"
        raise LogicRouteError(f"{ckpt}: {why}; pass --labels")
    return files


def is_set(dataset: str, name: str) -> bool:
    """A label row's dataset is the shared set `name` (GraphRAG-Bench rows say graphrag_<name>)."""
    return dataset == name or dataset.endswith(f"_{name}")


def split_files(files: Sequence[str | Path], name: str) -> tuple[list[str], list[dict], str]:
    """(the files without a row of `name`, the rows of `name`, its dataset as the rows spell it)."""
    from training.labels.label_arrays import load_label_files

    keep, held = [], []
    for f in files:
        rows = load_label_files([f])
        mine = [r for r in rows if is_set(str(r["dataset"]), name)]
        held += mine
        if not mine:
            keep.append(str(f))
    if not held:
        raise LogicRouteError(f"no answer-label row of {name!r} in {', '.join(map(str, files))}")
    return keep, held, str(held[0]["dataset"])


def set_passages(name: str, rows: Sequence[dict], data: str | Path | None = None) -> list:
    """The passages of the questions `rows` label (matched by id): the corpus S's questions come
    with. `data`: S's data file [default: the shared set named `name`]."""
    from hierarchy.datasets import load_dataset
    from training.common.shared_data import resolve_data

    data = data or resolve_data(name)
    ds = load_dataset(data)
    asked = {str(r["id"]) for r in rows}
    by_id = {p.id: p for p in ds.passages}
    taken = [q for q in ds.questions if str(q.id) in asked]
    if not taken:
        raise LogicRouteError(f"{name}: none of its {len(rows)} label rows' question ids is in {data}")
    ids = dict.fromkeys(pid for q in taken for pid in q.passages)
    return [by_id[pid] for pid in ids if pid in by_id]


def escalated(rows: Sequence[dict], first: Sequence[str], below: float | None, routes: Sequence[str]) -> dict:
    """The judge's figures of `first` with its cheap answers under `below` escalated to logic
    (both answers paid for); `first` unchanged when `below` is None."""
    from training.fitting.lodo import judge
    from training.fitting.lodo_cascade import escalate

    if below is None:
        return judge(rows, first, routes)
    decided, paid = escalate(rows, first, below)
    return {**judge(rows, decided, routes, paid), "below": below}


def chunk_first_threshold(files: Sequence[str | Path]) -> float | None:
    """The threshold fitted chunk-first on the rows of `files` (training.fitting.lodo_cascade.fit_threshold):
    the generalist's, fitted on the sets it was trained on, as leave-one-dataset-out fits it."""
    from training.fitting.lodo_cascade import fit_threshold
    from training.labels.label_arrays import load_label_files

    rows = load_label_files(list(files))
    below = fit_threshold(rows, ["chunk"] * len(rows))
    return below if below > 0.0 else None


def fixed_systems(rows: Sequence[dict], routes: Sequence[str], written_file: Path, budget: float | None) -> dict:
    """The systems no router decides: chunk escalated under the threshold fitted chunk-first on
    adapt's training rows as adapt fits its router's (the KB's own written questions, within adapt's
    escalation `budget`; absent without them), each fixed route, and the oracle."""
    from training.fitting.lodo import judge
    from training.fitting.lodo_cascade import fit_threshold_utility
    from training.labels.label_arrays import load_label_files

    out = {}
    if written_file.is_file():
        written = load_label_files([written_file])
        kb_below = fit_threshold_utility(written, ["chunk"] * len(written), max_token_share=budget) or None
        out[KB_CHUNK_CASCADE] = escalated(rows, ["chunk"] * len(rows), kb_below, routes)
    for r in routes:
        out[f"always {r}"] = judge(rows, [r] * len(rows), routes)
    out["oracle"] = judge(rows, [row["oracle"] for row in rows], routes)
    return out


def lodo_generalist(work: Path, train_files: list[str], dataset: str, cfg, embedder, echo: Callable) -> Path:
    """The generalist trained without `dataset` (its priors left out too), once: a rerun reuses it."""
    from training.fitting.train import train_generalist

    generalist = work / "generalist.ckpt"
    if not generalist.is_file():
        echo(f"training the LODO generalist on {len(train_files)} label files (none of {dataset})")
        notes = f"leave-one-dataset-out generalist without {dataset} (bench adapt)"
        train_generalist(train_files, generalist, cfg, embedder=embedder, leave_out=dataset, notes=notes)
    return generalist


@dataclass(frozen=True)
class BenchAdaptSettings:
    """What `bench adapt` runs every left-out set with, built once from the command's options.
    llm: the LLM adapt writes and labels with (llm_spec: its spec, as the label rows name it);
    n: questions adapt writes per set; seeds: the fine-tuning seeds; embedder and cfg: the
    generalist's (cfg: the shipped recipe); adapt_fn: training.adapt.adapt.adapt unless given
    (tests); adapt_options: more of its keywords (its escalation_budget); data: a set's data file
    by name [default: the shared set]; own_folds K > 1: the set's real questions given to adapt
    K-fold as the user's own (training.adapt.adapt_own_folds; 0: off); command: the command line
    the report names."""

    llm: Any
    n: int
    seeds: Sequence[int] = SEEDS
    embedder: Any = None
    cfg: Any = None
    llm_spec: str | None = None
    adapt_fn: Callable | None = None
    adapt_options: Mapping | None = None
    data: Mapping[str, str | Path] | None = None
    concurrency: int = 1
    progress: bool = True
    echo: Callable[[str], None] = print
    command: str = ""
    own_folds: int = 0

    def data_of(self, name: str) -> str | Path | None:
        """The data file of the set `name` (None: the shared set of that name)."""
        return (self.data or {}).get(name)

    def adapter(self) -> Callable:
        """The adapt function: adapt_fn, else training.adapt.adapt.adapt."""
        if self.adapt_fn is not None:
            return self.adapt_fn
        from training.adapt.adapt import adapt

        return adapt


@dataclass(frozen=True)
class _SetRun:
    """One left-out set's state once its generalist and KB exist, as its steps share it."""

    name: str
    work: Path
    settings: BenchAdaptSettings
    kb: Any
    generalist: Path
    rows: list[dict]
    routes: list[str]
    options: dict  # adapt's keywords for this set

    def echo(self, s: str) -> None:
        self.settings.echo(f"{self.name}: {s}")


def judge_set(name: str, label_files: Sequence[str | Path], work: Path, settings: BenchAdaptSettings) -> dict:
    """Steps 1-4 of the module docstring for the left-out set `name`; every step resumes from
    what `work` holds (the generalist, the KB, adapt's questions and labels)."""
    from training.adapt.adapt_own_folds import fold_split
    from training.common.passage_kb import passages_kb
    from training.labels.label_arrays import routes_of

    work.mkdir(parents=True, exist_ok=True)
    train_files, rows, dataset = split_files(label_files, name)
    if settings.own_folds:  # a fold count the questions cannot fill fails now, not after the set's adaptation
        fold_split(len(rows), settings.own_folds, seed=0)
    say = lambda s: settings.echo(f"{name}: {s}")  # noqa: E731
    generalist = lodo_generalist(work, train_files, dataset, settings.cfg, settings.embedder, echo=say)
    passages = set_passages(name, rows, settings.data_of(name))
    settings.echo(f"{name}: KB of the {len(passages)} passages of its {len(rows)} labelled questions")
    kb = passages_kb(work / "kb", passages, settings.embedder, layers=True, show_progress=settings.progress)
    run = _SetRun(name, work, settings, kb, generalist, rows, list(routes_of(rows)), _adapt_options(settings, kb))
    systems, gen_decided, gen_probs = _generalist_systems(run, train_files)
    adapted, seed_probs, per_seed = _adapt_seeds(run, systems)
    budget = adapted.get("escalation_budget")  # the one adapt fitted its router's threshold within
    systems |= fixed_systems(rows, run.routes, work / "adapt" / "train.jsonl", budget)
    own = _own_folds(run, gen_decided, systems)
    ceiling = _ceiling(run, gen_probs, seed_probs, systems)
    head = {"set": name, "dataset": dataset, "questions": len(rows), "passages": len(passages), "chunks": len(kb)}
    return {
        **head,
        "generalist_trained_on": train_files,
        "systems": systems,
        "specialist_seeds": per_seed,
        "verdict": verdict(systems, run.routes),  # the adapted router as `ask` routes by default
        "verdict_escalating": verdict(systems, run.routes, SPECIALIST + CONFIDENCE),  # with escalation on
        "escalation_budget": budget,
        "adaptation": {k: adapted.get(k) for k in ("questions", "writing", "writing_notes", "labels", "phases")},
        "ceiling": ceiling,  # training.adapt.adapt_ceiling: the best one threshold reaches, fitted on these rows
        **({"own_folds": own} if own else {}),  # the user's own questions, K-fold (--own-folds)
    }


def _adapt_options(settings: BenchAdaptSettings, kb) -> dict:
    """The keywords every adapt call of a set takes: the settings' and adapt_options."""
    options = {
        "n": settings.n,
        "concurrency": settings.concurrency,
        "llm_spec": settings.llm_spec,
        "embedder": kb.embedder,
        "progress": settings.progress,
    }
    return options | dict(settings.adapt_options or {})


def _judged(run: _SetRun, router) -> tuple[dict, list[str], list[dict]]:
    """(the judge's figures and the guard's far share, the router's decisions, its probabilities)."""
    from training.fitting.lodo import judge

    decided, far, probs = decisions(router, [r["question"] for r in run.rows])
    return {**judge(run.rows, decided, run.routes), "far": far}, decided, probs


def _generalist_systems(run: _SetRun, train_files: list[str]) -> tuple[dict, list[str], list[dict]]:
    """(the systems with the LODO generalist, with and without escalation; its decisions; its probabilities)."""
    from router.checkpoint import load_router
    from router.kb_router import fit_to_kb

    systems: dict = {}
    generalist = fit_to_kb(load_router(run.generalist, embedder=run.kb.embedder), run.kb)
    systems[GENERALIST], decided, probs = _judged(run, generalist)
    systems[GENERALIST + CONFIDENCE] = escalated(run.rows, decided, chunk_first_threshold(train_files), run.routes)
    return systems, decided, probs


def _ceiling(run: _SetRun, gen_probs: list[dict], seed_probs: dict, systems: dict) -> dict:
    """training.adapt.adapt_ceiling.set_ceilings on this set's rows, the generalist and each seed's specialist."""
    from training.adapt.adapt_ceiling import retrieval_values, seed_groups, set_ceilings

    routers = {GENERALIST: gen_probs, **seed_groups(seed_probs, SPECIALIST)}
    signals = retrieval_values(run.kb, run.rows)
    return set_ceilings(run.rows, routers, list(routers)[-1], signals, bar=score_bar(systems, run.routes))


def _own_folds(run: _SetRun, gen_decided: list[str], systems: dict) -> dict:
    """training.adapt.adapt_own_folds.own_folds for this set when folds are asked for ({} at 0)."""
    k = run.settings.own_folds
    if not k:
        return {}
    from training.adapt.adapt_own_folds import OwnFoldsRun, own_folds

    folds = OwnFoldsRun(list(run.rows), run.routes, gen_decided, run.settings.adapter(), run.options)
    return own_folds(run.kb, run.settings.llm, run.generalist, run.work, k, folds, systems, run.echo)


def _adapt_seeds(run: _SetRun, systems: dict) -> tuple[dict, dict, list[dict]]:
    """Adapt once per fine-tuning seed (the questions, labels and held-out split of seed 0 shared
    by all) and judge each specialist, with and without escalation: their means go into
    `systems`. Returns (adapt's last report, each seed's probabilities, each seed's figures)."""
    from router.checkpoint import load_router
    from router.kb_router import fit_to_kb

    adapt_fn, work = run.settings.adapter(), run.work
    per_seed, per_seed_escalated, adapted, seed_probs = [], [], {}, {}
    for seed in run.settings.seeds:
        run.echo(f"adapting (fine-tuning seed {seed})")
        res = adapt_fn(
            run.kb.path, run.settings.llm, generalist=run.generalist, seed=0, out=work / "adapt",
            train_options={"seed": seed}, **run.options,
        )  # fmt: skip
        shutil.copyfile(res.checkpoint, work / f"specialist-seed{seed}.ckpt")  # the KB's own copy is the next seed's
        specialist = fit_to_kb(load_router(res.checkpoint, embedder=run.kb.embedder), run.kb)
        table, decided, seed_probs[seed] = _judged(run, specialist)
        per_seed.append({"seed": seed, **table})
        escalated_table = escalated(run.rows, decided, specialist.escalate_below, run.routes)
        per_seed_escalated.append({"seed": seed, **escalated_table})
        adapted = res.report
    systems[SPECIALIST] = mean_tables(per_seed)
    systems[SPECIALIST + CONFIDENCE] = {
        **mean_tables(per_seed_escalated),
        "below": [t.get("below") for t in per_seed_escalated],
    }
    return adapted, seed_probs, per_seed


def bench_adapt(
    sets: Sequence[str],
    label_files: Sequence[str | Path],
    work: str | Path,
    out: str | Path,
    settings: BenchAdaptSettings,
) -> dict:
    """judge_set for each set, then report.md + report.json under `out` (written after each set,
    so a long run shows what it has)."""
    from training.adapt.bench_adapt_report import write_report

    seeds, files = list(settings.seeds), [str(f) for f in label_files]
    report: dict = {"command": settings.command, "n": settings.n, "seeds": seeds, "label_files": files}
    if settings.own_folds:
        report["own_folds"] = settings.own_folds
    report["sets"] = {}
    for name in sets:
        try:
            report["sets"][name] = judge_set(name, label_files, Path(work) / name, settings)
        except LogicRouteError as e:  # a set that cannot be adapted (no question kept) does not stop the others
            settings.echo(f"{name}: {e}")
            report["sets"][name] = {"set": name, "error": str(e)}
        write_report(Path(out), report)
    return report
