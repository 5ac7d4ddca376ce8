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
from pathlib import Path

from engine.base.errors import LogicRouteError
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
    from hierarchy.datasets import load_dataset, resolve_data

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


def judge_set(
    name: str,
    label_files: Sequence[str | Path],
    work: Path,
    llm,
    *,
    n: int,
    seeds: Sequence[int] = SEEDS,
    embedder=None,
    cfg=None,
    llm_spec: str | None = None,
    adapt_fn: Callable | None = None,
    adapt_options: Mapping | None = None,
    data: str | Path | None = None,
    concurrency: int = 1,
    progress: bool = True,
    echo: Callable[[str], None] = print,
    own_folds: int = 0,
) -> dict:
    """Steps 1-4 of the module docstring for the left-out set `name`; every step resumes from
    what `work` holds (the generalist, the KB, adapt's questions and labels). `adapt_options`:
    more keywords of training.adapt.adapt.adapt (its escalation_budget). `own_folds` K > 1: the set's
    real questions given to adapt K-fold as the user's own (training.adapt.adapt_own_folds)."""
    from router.checkpoint import load_router
    from training.adapt.adapt_ceiling import retrieval_values, seed_groups, set_ceilings
    from training.adapt.adapt_own_folds import fold_split
    from training.common.passage_kb import passages_kb
    from training.fitting.lodo import judge
    from training.labels.label_arrays import routes_of

    if adapt_fn is None:
        from training.adapt.adapt import adapt as adapt_fn
    work.mkdir(parents=True, exist_ok=True)
    train_files, rows, dataset = split_files(label_files, name)
    if own_folds:  # a fold count the questions cannot fill fails now, not after the set's adaptation
        fold_split(len(rows), own_folds, seed=0)
    generalist = lodo_generalist(work, train_files, dataset, cfg, embedder, echo=lambda s: echo(f"{name}: {s}"))
    passages = set_passages(name, rows, data)
    echo(f"{name}: KB of the {len(passages)} passages of its {len(rows)} labelled questions")
    kb = passages_kb(work / "kb", passages, embedder, layers=True, show_progress=progress)
    routes = list(routes_of(rows))
    questions = [r["question"] for r in rows]

    def judged(router) -> tuple[dict, list[str], list[dict]]:
        """(the judge's figures and the guard's far share, the router's decisions, its probabilities)."""
        decided, far, probs = decisions(router, questions)
        return {**judge(rows, decided, routes), "far": far}, decided, probs

    systems: dict = {}
    systems[GENERALIST], gen_decided, gen_probs = judged(load_router(generalist, embedder=kb.embedder))
    systems[GENERALIST + CONFIDENCE] = escalated(rows, gen_decided, chunk_first_threshold(train_files), routes)
    options = {"n": n, "concurrency": concurrency, "llm_spec": llm_spec, "embedder": kb.embedder, "progress": progress}
    options |= dict(adapt_options or {})
    adapted, seed_probs, per_seed = _adapt_seeds(
        name, kb, llm, generalist, work, seeds, options, adapt_fn, judged, rows, routes, systems, echo
    )  # fmt: skip
    budget = adapted.get("escalation_budget")  # the one adapt fitted its router's threshold within
    systems |= fixed_systems(rows, routes, work / "adapt" / "train.jsonl", budget)
    say = lambda s: echo(f"{name}: {s}")  # noqa: E731
    own = _own_folds(own_folds, kb, llm, generalist, work, rows, routes, gen_decided, adapt_fn, options, systems, say)
    routers = {GENERALIST: gen_probs, **seed_groups(seed_probs, SPECIALIST)}
    signals = retrieval_values(kb, rows)
    ceiling = set_ceilings(rows, routers, list(routers)[-1], signals, bar=score_bar(systems, routes))
    return {
        "set": name,
        "dataset": dataset,
        "questions": len(rows),
        "passages": len(passages),
        "chunks": len(kb),
        "generalist_trained_on": train_files,
        "systems": systems,
        "specialist_seeds": per_seed,
        "verdict": verdict(systems, routes),  # the adapted router as `ask` routes by default
        "verdict_escalating": verdict(systems, routes, SPECIALIST + CONFIDENCE),  # with escalation on
        "escalation_budget": budget,
        "adaptation": {k: adapted.get(k) for k in ("questions", "writing", "writing_notes", "labels", "phases")},
        "ceiling": ceiling,  # training.adapt.adapt_ceiling: the best one threshold reaches, fitted on these rows
        **({"own_folds": own} if own else {}),  # the user's own questions, K-fold (--own-folds)
    }


def _own_folds(k, kb, llm, generalist, work, rows, routes, gen_decided, adapt_fn, options, systems, echo) -> dict:
    """training.adapt.adapt_own_folds.own_folds for this set when `k` folds are asked for ({} at 0)."""
    if not k:
        return {}
    from training.adapt.adapt_own_folds import OwnFoldsRun, own_folds

    run = OwnFoldsRun(list(rows), routes, gen_decided, adapt_fn, options)
    return own_folds(kb, llm, generalist, work, k, run, systems, echo)


def _adapt_seeds(name, kb, llm, generalist, work, seeds, options, adapt_fn, judged, rows, routes, systems, echo):
    """Adapt once per fine-tuning seed (the questions, labels and held-out split of seed 0 shared
    by all) and judge each specialist, with and without escalation: their means go into
    `systems`. Returns (adapt's last report, each seed's probabilities, each seed's figures)."""
    from router.checkpoint import load_router

    per_seed, per_seed_escalated, adapted, seed_probs = [], [], {}, {}
    for seed in seeds:
        echo(f"{name}: adapting (fine-tuning seed {seed})")
        res = adapt_fn(
            kb.path, llm, generalist=generalist, seed=0, out=work / "adapt", train_options={"seed": seed}, **options
        )
        shutil.copyfile(res.checkpoint, work / f"specialist-seed{seed}.ckpt")  # the KB's own copy is the next seed's
        specialist = load_router(res.checkpoint, embedder=kb.embedder)
        table, decided, seed_probs[seed] = judged(specialist)
        per_seed.append({"seed": seed, **table})
        per_seed_escalated.append({"seed": seed, **escalated(rows, decided, specialist.escalate_below, routes)})
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
    llm,
    *,
    n: int,
    seeds: Sequence[int] = SEEDS,
    embedder=None,
    cfg=None,
    llm_spec: str | None = None,
    adapt_fn: Callable | None = None,
    adapt_options: Mapping | None = None,
    data: Mapping[str, str | Path] | None = None,
    concurrency: int = 1,
    progress: bool = True,
    echo: Callable[[str], None] = print,
    command: str = "",
    own_folds: int = 0,
) -> dict:
    """judge_set for each set, then report.md + report.json under `out` (written after each set,
    so a long run shows what it has). `data`: a set's data file by name [default: the shared set];
    `own_folds`: judge_set's (0: off)."""
    from training.adapt.bench_adapt_report import write_report

    report: dict = {"command": command, "n": n, "seeds": list(seeds), "label_files": [str(f) for f in label_files]}
    if own_folds:
        report["own_folds"] = own_folds
    report["sets"] = {}
    for name in sets:
        try:
            report["sets"][name] = judge_set(
                name,
                label_files,
                Path(work) / name,
                llm,
                n=n,
                seeds=seeds,
                embedder=embedder,
                cfg=cfg,
                llm_spec=llm_spec,
                adapt_fn=adapt_fn,
                adapt_options=adapt_options,
                data=(data or {}).get(name),
                concurrency=concurrency,
                progress=progress,
                echo=echo,
                own_folds=own_folds,
            )
        except LogicRouteError as e:  # a set that cannot be adapted (no question kept) does not stop the others
            echo(f"{name}: {e}")
            report["sets"][name] = {"set": name, "error": str(e)}
        write_report(Path(out), report)
    return report
