"""`logicroute bench specialist`: the specialist judged in-domain, as the paper does (issue 67,
item 2), from stored answer-scored label rows alone (no LLM call; seconds to minutes).

1. The set's rows are split first (training.adapt.specialist_split): a question the generalist
   trained on (its set priors draw silver rows from the same shared file: about half of the
   specialist label questions of HotpotQA) is a training row only, since it cannot be judged
   unseen; of the others, a salted hash of the question id holds out a share.
2. Epochs, learning rate and the treatment of rows where no route scored are chosen by k-fold
   validation over the training rows only (training.adapt.specialist_fit.select); the choice is
   written (selection.json) before a held-out row's labels are read. The shipped generalist is then
   fine-tuned on every training row with it.
3. The held-out rows are read once: routed F1 and tokens per question of the generalist and the
   specialist (each through the Decider, and each MLP's argmax), always-chunk, always-summary,
   always-logic and the oracle, with the paired bootstrap 95% interval of specialist minus
   generalist and its half-width (the smallest gain it could have shown).
4. The other sets: the generalist and the specialist on the generalist's own label rows of every
   other set (training.adapt.specialist_others).

Deterministic: the split is by hash, every fit seeded, the bootstrap seeded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from engine.floor.base.errors import LogicRouteError
from engine.floor.base.files import atomic_write_json, atomic_write_text
from training.adapt.specialist_fit import Variant, decisions, fine_tune, select
from training.adapt.specialist_split import paired_bootstrap, row_key, split_rows

MIN_ROWS = 6  # per side: fewer cannot be folded for validation and judged
# float16 reference rows put a question's own embedding at ~0.9999; distinct HotpotQA questions
# reached 0.65 at most against the shipped generalist's reference (59 rows, 2026-12-07)
SEEN_SIMILARITY = 0.99
SELECTION = "selection.json"


def _load(label_file, set_name: str) -> list[dict]:
    from training.labels.labels import read_labels

    rows = [r for r in read_labels(label_file) if str(r.get("dataset")) == set_name]
    if not rows:
        raise LogicRouteError(f"{label_file}: no label rows of the set {set_name!r}")
    return rows


def _parent(checkpoint, embedder):
    """(model, card, list gate, guard, routes, the cost weight its card records, its path as shown)
    of the generalist."""
    from router.checkpoint import DEFAULT_CHECKPOINT, check_embedder, load_checkpoint, load_gate, load_guard
    from training.fitting.fit import recorded_config

    path = Path(checkpoint) if checkpoint else DEFAULT_CHECKPOINT
    model, card = load_checkpoint(path)
    check_embedder(card, embedder, path)
    cost_weight = (recorded_config(card) or {}).get("cost_weight")
    try:  # the report names it as the repository does, not by this machine's folders
        shown = str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        shown = str(path)
    gate, guard = load_gate(path, card), load_guard(path, card)
    return model, card, gate, guard, tuple(model.config.routes), cost_weight, shown


def _default_embedder():
    from engine.floor.embedder import get_embedder

    return get_embedder()


def _split_record(rows, train, held, seen, held_share: float) -> dict:
    """How the rows were split, as selection.json and the report record it."""
    return {
        "rule": f"questions the generalist trained on (guard similarity >= {SEEN_SIMILARITY}) train only; "
        f"of the others, held out when sha256 of '<set>:<id>' (salted) is under {held_share:.4f}",
        "held_share": round(held_share, 4),
        "n_rows": len(rows),
        "n_seen_by_generalist": len(seen),
        "n_train": len(train),
        "n_held_out": len(held),
        "held_out_ids": [r["id"] for r in held],
    }


def _per_variant(progress: Callable[[str], None] | None):
    """select's progress callback (one validation row) as a line for `progress`."""
    if progress is None:
        return None
    return lambda v: progress(f"validation: {v['name']}: F1 {v['score']}, {v['tokens']:,.0f} tokens / q")


def _default_checkpoint():
    from router.checkpoint import DEFAULT_CHECKPOINT

    return DEFAULT_CHECKPOINT


def _check(rows, train, held, set_name: str, routes) -> None:
    """Enough rows on each side of the split, and the generalist's routes."""
    from training.labels.label_arrays import routes_of

    if len(train) < MIN_ROWS or len(held) < MIN_ROWS:
        raise LogicRouteError(
            f"{len(rows)} rows of {set_name}: {len(train)} to train, {len(held)} held out; "
            f"at least {MIN_ROWS} on each side are needed"
        )
    if routes_of(train) != routes:  # the held-out rows' are checked when they are judged
        raise LogicRouteError(f"the labels have routes {list(routes_of(train))}, the generalist {list(routes)}")


def _seen(rows, x, guard, dim: int) -> set[str]:
    """The row_keys of the questions the generalist trained on: its guard's reference holds every
    training question's embedding (priors included, float16), so one of them is at similarity ~1."""
    if guard is None:
        return set()
    sims = guard.similarity(x[:, :dim])
    return {row_key(r) for r, s in zip(rows, sims) if s >= SEEN_SIMILARITY}


def bench_specialist(
    label_file: str | Path,
    set_name: str,
    out: str | Path,
    variants: Sequence[Variant],
    *,
    held_share: float = 0.5,
    folds: int = 3,
    checkpoint: str | Path | None = None,
    other_labels: Sequence[str | Path] | None = None,
    seed: int = 0,
    resamples: int = 10_000,
    embedder=None,
    note: str = "",
    lodo: bool = False,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Run steps 1-4 and write report.md, results.json and selection.json into `out`; the results.
    lodo: also the leave-one-dataset-out check (training.adapt.specialist_lodo: minutes)."""
    from training.adapt.bench_specialist_report import format_report
    from training.adapt.specialist_others import other_sets
    from training.labels.label_arrays import inputs_for

    t0 = time.perf_counter()
    embedder = embedder if embedder is not None else _default_embedder()
    out, rows = Path(out), _load(label_file, set_name)
    base, card, gate, guard, routes, parent_cw, parent_path = _parent(checkpoint, embedder)
    # every question's text is embedded first: the generalist's guard says which ones it trained on
    x = inputs_for(rows, embedder, base.config.features, base.config.text_form)
    seen = _seen(rows, x, guard, int(base.config.embed_dim))
    train, held = split_rows(rows, held_share, seen)
    _check(rows, train, held, set_name, routes)
    at = {row_key(r): i for i, r in enumerate(rows)}
    x_train, x_held = x[[at[row_key(r)] for r in train]], x[[at[row_key(r)] for r in held]]

    # 2. the choice, on the training rows only; written before a held-out row's labels are read
    chosen = select(
        base,
        gate,
        x_train,
        train,
        routes,
        variants,
        folds=folds,
        parent_cost_weight=parent_cw,
        seed=seed,
        progress=_per_variant(progress),
    )
    split = _split_record(rows, train, held, seen, held_share)
    atomic_write_json(out / SELECTION, {"split": split, "validation": chosen})
    variant = Variant(**chosen["chosen"])
    specialist = fine_tune(base, x_train, train, routes, variant, parent_cw, seed)

    # 3. the held-out rows, read once
    table, paired = _judged(base, specialist, gate, held, x_held, routes, resamples, seed)
    others = other_sets(base, specialist, gate, card, set_name, embedder, other_labels)
    if lodo:
        from training.adapt.specialist_lodo import lodo_check

        recipe = checkpoint or _default_checkpoint()
        others["lodo"] = lodo_check(
            recipe, train, variant, set_name, embedder, label_files=other_labels, seed=seed, progress=progress
        )
    results = {
        "set": set_name,
        "label_file": str(label_file),
        "generalist": parent_path,
        "parent_cost_weight": parent_cw,
        "seed": seed,
        "note": note,
        "split": split,
        "validation": chosen,
        "held_out": table,
        "paired": paired,
        "other_sets": others,
    }
    atomic_write_json(out / "results.json", results)  # no wall time in it: a rerun writes the same bytes
    atomic_write_text(out / "report.md", format_report(results))
    return {**results, "seconds": round(time.perf_counter() - t0, 1)}


def _judged(base, specialist, gate, held: list[dict], x, routes, resamples: int, seed: int):
    """(every system's figures on the held-out rows, the paired intervals of specialist minus
    generalist through the Decider and by the MLP's argmax alone)."""
    from training.fitting.lodo import judge
    from training.labels.label_arrays import routes_of

    if routes_of(held) != tuple(routes):
        raise LogicRouteError(f"the held-out rows have routes {list(routes_of(held))}, the generalist {list(routes)}")
    gen, spec = decisions(base, gate, x, held, routes), decisions(specialist, gate, x, held, routes)
    systems = {
        "generalist (Decider)": gen["decider"],
        "specialist (Decider)": spec["decider"],
        "generalist MLP argmax": gen["mlp"],
        "specialist MLP argmax": spec["mlp"],
        **{f"always {r}": [r] * len(held) for r in routes},
        "oracle": [r["oracle"] for r in held],
    }
    table = {name: judge(held, taken, routes) for name, taken in systems.items()}
    score = {name: [r["scores"][d] for r, d in zip(held, taken)] for name, taken in systems.items()}
    paired = {
        kind: paired_bootstrap(score[f"specialist {who}"], score[f"generalist {who}"], resamples=resamples, seed=seed)
        for kind, who in (("decider", "(Decider)"), ("mlp", "MLP argmax"))
    }
    return table, paired
