"""Issue 67's other half of the bar: does fine-tuning on one set lower another set's
leave-one-dataset-out score by more than 1 point? `bench specialist --lodo`.

For each other set d of the generalist's label files: the LODO fold's generalist is trained with
the generalist's own recipe (its card's settings, priors included) on every set but d, as
training.fitting.lodo trains a fold (fit_router after split_off_lists, the fold's priors without
d's); it is then fine-tuned with the variant chosen on validation, on the same training rows of
the target set as the specialist; both are judged through the Decider on d's rows. One generalist
training per set: minutes on two CPU cores, hence an option.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from training.adapt.specialist_others import compared


def lodo_check(
    recipe: str | Path,
    target_rows: Sequence[dict],
    variant,
    set_name: str,
    embedder,
    *,
    label_files: Sequence[str | Path] | None = None,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Per other set: n, the LODO generalist's and the LODO specialist's score and tokens (Decider),
    the difference and whether it stays within MAX_DROP."""
    from router.checkpoint import read_card
    from training.fitting.fit import config_from_card
    from training.fitting.set_priors import build_priors
    from training.labels.label_arrays import inputs_for, load_label_files, routes_of
    from training.labels.labels import card_label_paths

    cfg = config_from_card(recipe)
    files = [Path(f) for f in label_files] if label_files is not None else card_label_paths(read_card(recipe))
    rows = load_label_files(files)
    routes = list(routes_of(rows))
    x = inputs_for(rows, embedder, cfg.features, cfg.text_form)
    priors = build_priors(rows, routes, cfg, embedder)
    x_target = inputs_for(target_rows, embedder, cfg.features, cfg.text_form)
    out: dict = {"recipe": str(recipe), "files": [str(f) for f in files], "sets": {}}
    for d in sorted({str(r["dataset"]) for r in rows} - {set_name}):
        if progress:
            progress(f"LODO check: leaving out {d}")
        test = [i for i, r in enumerate(rows) if str(r["dataset"]) == d]
        target = (x_target, target_rows, variant, seed)
        out["sets"][d] = _fold(x, rows, test, routes, cfg, int(embedder.dim), priors, target)
    out["all_within_bar"] = all(v["within_bar"] for v in out["sets"].values())
    return out


def _fold(x, rows, test, routes, cfg, dim: int, priors, target) -> dict:
    """One fold: the generalist trained without rows[test]'s set, it fine-tuned as `target` says
    (inputs, rows, variant, seed), both judged on rows[test]."""
    from training.adapt.specialist_fit import decisions, fine_tune
    from training.fitting.list_gate_fit import split_off_lists
    from training.fitting.lodo import judge
    from training.fitting.train import fit_router, trained_on

    held = set(test)
    train = [i for i in range(len(rows)) if i not in held and trained_on(rows[i], cfg)]
    fold_priors = priors.without(str(rows[test[0]]["dataset"])) if priors is not None else None
    gate, mlp, mlp_priors = split_off_lists(x[train], [rows[i] for i in train], fold_priors, dim, cfg.seed)
    train = [train[i] for i in mlp]
    model = fit_router(x[train], [rows[i] for i in train], routes, cfg, dim, priors=mlp_priors)[0]
    x_target, target_rows, variant, seed = target
    specialist = fine_tune(model, x_target, target_rows, routes, variant, cfg.cost_weight, seed)
    test_rows = [rows[i] for i in test]
    g = judge(test_rows, decisions(model, gate, x[test], test_rows, routes)["decider"], routes)
    s = judge(test_rows, decisions(specialist, gate, x[test], test_rows, routes)["decider"], routes)
    return compared(len(test), g, s)
