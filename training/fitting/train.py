"""Router training recipes: a generalist on a mix of label files, a specialist fine-tuned
from it on one target set (QA-GraphRAG). Each saves a checkpoint and its card.

- Inputs and targets: training.labels.label_arrays (embedding + cheap features; preference vectors,
  rows where no route scored dropped by default: TrainConfig.all_zero says why).
- Validation: a stratified split (by dataset x oracle route) of the training labels.
- Fitting (loss, early stopping, kept weights, seeds): training.fitting.fit.
- Out-of-distribution guard (router.ood): the embeddings of the questions trained on are
  stored with the checkpoint as its reference set (a specialist adds its own to its parent's).

torch loads inside functions (the CLI imports this module lazily anyway).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from engine.floor.base.errors import CheckpointError, LogicRouteError
from router.ood import build_guard
from training.fitting.eval_router import evaluate_predictions
from training.fitting.fit import TrainConfig, fit, recorded_config, specialist_config
from training.fitting.list_gate_fit import is_list_row, split_off_lists
from training.fitting.route_metrics import routing_metrics
from training.fitting.set_priors import SET_ROUTES, Priors, build_priors
from training.labels.label_arrays import (
    inputs_for,
    load_label_files,
    routes_of,
    split_keys,
    stratified_split,
    target_matrix,
    training_targets,
)


def _file_summary(rows: Sequence[dict]) -> list[dict]:
    out: dict[str, dict] = {}
    for r in rows:
        f = out.setdefault(
            r["_file"],
            {
                "path": r["_file"],
                "rows": 0,
                "datasets": {},
                "scorer": r.get("scorer"),
                "llm": r.get("llm"),
                "all_zero": 0,
                "oracle": {},
            },
        )
        f["rows"] += 1
        f["datasets"][r.get("dataset")] = f["datasets"].get(r.get("dataset"), 0) + 1
        f["all_zero"] += bool(r.get("all_zero"))
        f["oracle"][r["oracle"]] = f["oracle"].get(r["oracle"], 0) + 1
    return list(out.values())


def trained_on(row: dict, cfg: TrainConfig) -> bool:
    """Under all_zero=drop a row where no route scored teaches nothing and is left out of
    training (TrainConfig.all_zero says why); a judge still scores it."""
    return not (cfg.all_zero == "drop" and row.get("all_zero"))


def _training_record(
    rows: Sequence[dict], n_train: int, n_val: int, cfg: TrainConfig, history: dict, t0: float
) -> dict:
    """The card's "training" entry: the labels read (per file: the rows read, so that the first
    that many rows of each file give the same checkpoint again, all-zero ones included), the rows
    trained on, the settings and the fit history."""
    return {
        "label_files": _file_summary(rows),
        "n_rows": len(rows),
        "n_dropped_all_zero": sum(not trained_on(r, cfg) for r in rows),
        "n_train": n_train,
        "n_val": n_val,
        "label_scorer": sorted({str(r.get("scorer")) for r in rows}),
        "label_llm": sorted({str(r.get("llm")) for r in rows}),
        "config": _jsonable(asdict(cfg)),
        "history": {k: v for k, v in history.items() if k != "curve"},
        "curve": history["curve"],
        "seconds": round(time.perf_counter() - t0, 1),
    }


def _get_embedder(embedder):
    if embedder is not None:
        return embedder
    from engine.floor.embedder import get_embedder

    return get_embedder()


def _heldout(model, train_rows, x_train, eval_files, embedder, routes) -> dict:
    if not eval_files:
        return {}
    test_rows = load_label_files(eval_files)
    if routes_of(test_rows) != tuple(routes):
        raise LogicRouteError(f"held-out labels have routes {list(routes_of(test_rows))}, the router {list(routes)}")
    x_test = inputs_for(test_rows, embedder, model.config.features, model.config.text_form)
    return evaluate_predictions(model, train_rows, x_train, test_rows, x_test, routes)


def fit_router(
    x: np.ndarray,
    rows: Sequence[dict],
    routes: Sequence[str],
    cfg: TrainConfig,
    embed_dim: int,
    *,
    progress: bool = False,
    priors: Priors | None = None,
):
    """A new RouterMLP trained on `rows` (inputs `x`) with a stratified validation split:
    (model, train indices, validation indices, fit history). The one recipe of the generalist
    and of every leave-one-dataset-out fold. `priors` (training.fitting.set_priors) join the training
    part only: validation, and so early stopping, stays on answers."""
    import torch

    from router.model import RouterConfig, RouterMLP

    if not rows:
        raise LogicRouteError(
            "no answer labels left to train the router's MLP on: the list questions' labels train "
            "its list gate only; add labels of another set"
        )
    t, o = training_targets(rows, routes, cfg.all_zero, cfg.cost_weight)
    tr, va = stratified_split(split_keys(rows), cfg.val_frac, cfg.seed)
    x_fit, t_fit = x[tr], t[tr]
    if priors is not None and len(priors.rows):
        x_fit = np.concatenate([x_fit, priors.x])
        t_fit = np.concatenate([t_fit, target_matrix(priors.rows, routes, cfg.all_zero)])
    torch.manual_seed(cfg.seed)
    model = RouterMLP(
        RouterConfig(
            routes=tuple(routes),
            embed_dim=embed_dim,
            features=tuple(cfg.features),
            hidden=tuple(cfg.hidden),
            activation=cfg.activation,
            dropout=cfg.dropout,
            text_form=cfg.text_form,
        )
    )
    model.set_normalization(x_fit)
    history = fit(model, x_fit, t_fit, x[va], t[va], o[va], cfg, progress=progress)
    return model, tr, va, history


def train_generalist(
    label_files: Sequence[str | Path],
    out: str | Path,
    cfg: TrainConfig | None = None,
    *,
    eval_files: Sequence[str | Path] = (),
    embedder=None,
    progress: bool = False,
    notes: str = "",
    card_extras: dict | None = None,
    leave_out: str | None = None,
) -> dict:
    """Train on the mix of label files, save checkpoint + card, return the card. The list
    questions' rows (answer labels and list priors) train the list gate, every other row the MLP
    (list_gate_fit.split_off_lists). card_extras: more card entries (e.g. "lodo": the recipe's
    leave-one-dataset-out figures). leave_out: a data set none of whose priors train it either
    (a leave-one-dataset-out generalist)."""
    from router.checkpoint import save_checkpoint

    cfg = cfg or TrainConfig()
    t0 = time.perf_counter()
    embedder = _get_embedder(embedder)
    read = load_label_files(label_files)
    routes = routes_of(read)
    rows = [r for r in read if trained_on(r, cfg)]
    x = inputs_for(rows, embedder, cfg.features, cfg.text_form)
    priors = build_priors(read, routes, cfg, embedder)
    if priors is not None and leave_out:
        priors = priors.without(leave_out)
    dim = int(embedder.dim)
    gate, mlp, mlp_priors = split_off_lists(x, rows, priors, dim, cfg.seed)
    mlp_rows, x_mlp = [rows[i] for i in mlp], x[mlp]
    model, tr, va, history = fit_router(x_mlp, mlp_rows, routes, cfg, dim, progress=progress, priors=mlp_priors)

    train_rows = [mlp_rows[i] for i in tr]
    val_rows = [mlp_rows[i] for i in va]
    val = routing_metrics(_argmax_routes(model, x_mlp[va], routes), val_rows, routes) if len(va) else {}
    card = {
        "kind": "generalist",
        "embedder": {"id": embedder.id, "dim": int(embedder.dim)},
        "features": list(cfg.features),
        "training": _training_record(read, len(tr), len(va), cfg, history, t0),
        "priors": {"per_set": priors.counts(), "routes": SET_ROUTES, "strength": cfg.prior_strength} if priors else {},
        "validation": _summary(val),
        "heldout": _heldout(model, train_rows, x_mlp[tr], eval_files, embedder, routes),
        "notes": notes,
    }
    card.update(card_extras or {})
    # the guard's reference: every question the router learned from, the priors' included
    seen = x[:, : int(embedder.dim)] if priors is None else np.concatenate([x, priors.x])[:, : int(embedder.dim)]
    sources = [str(p) for p in label_files] + ([f"set priors {priors.counts()}"] if priors else [])
    guard = build_guard(seen, sources=sources, seed=cfg.seed)
    return save_checkpoint(out, model, card, guard, gate)


def train_specialist(
    from_ckpt: str | Path,
    label_files: Sequence[str | Path],
    out: str | Path,
    cfg: TrainConfig | None = None,
    *,
    eval_files: Sequence[str | Path] = (),
    holdout_frac: float = 0.2,
    embedder=None,
    progress: bool = False,
    notes: str = "",
) -> dict:
    """Fine-tune a generalist on target-domain labels; report generalist vs specialist on
    the target held-out split (eval_files, or a stratified holdout_frac of the labels)."""
    from router.checkpoint import check_embedder, load_checkpoint, load_gate, load_guard, save_checkpoint

    cfg = cfg or specialist_config()
    t0 = time.perf_counter()
    embedder = _get_embedder(embedder)
    base, base_card = load_checkpoint(from_ckpt)
    check_embedder(base_card, embedder, from_ckpt)
    routes = tuple(base.config.routes)
    rows = load_label_files(label_files)
    if routes_of(rows) != routes:
        raise CheckpointError(
            f"{from_ckpt} routes {list(routes)}, but the labels have {list(routes_of(rows))}: "
            "label the target set with the generalist's routes"
        )
    features = tuple(base.config.features)
    if eval_files:
        test_rows = load_label_files(eval_files)
        pool = rows
    else:
        keep, held = stratified_split(split_keys(rows), holdout_frac, cfg.seed + 1)
        pool, test_rows = [rows[i] for i in keep], [rows[i] for i in held]
    pool = [r for r in pool if trained_on(r, cfg) and not is_list_row(r)]  # they train a gate, kept from the parent
    if not test_rows:
        raise LogicRouteError("no held-out rows for the specialist: give --eval-labels or more labels")
    x = inputs_for(pool, embedder, features, base.config.text_form)
    if cfg.cost_weight is None:  # the generalist's trade of quality for tokens: fine-tuning keeps it
        cfg = replace(cfg, cost_weight=(recorded_config(base_card) or {}).get("cost_weight"))
    t, o = training_targets(pool, routes, cfg.all_zero, cfg.cost_weight)
    tr, va = stratified_split(split_keys(pool), cfg.val_frac, cfg.seed)
    x_test = inputs_for(test_rows, embedder, features, base.config.text_form)

    before = routing_metrics(_argmax_routes(base, x_test, routes), test_rows, routes)
    model = copy.deepcopy(base)  # keeps the generalist's input normalization: same input space
    history = fit(model, x[tr], t[tr], x[va], t[va], o[va], cfg, progress=progress, keep_initial=True)
    after = routing_metrics(_argmax_routes(model, x_test, routes), test_rows, routes)

    card = {k: v for k, v in base_card.items() if k not in ("format", "config", "routes", "created")}
    card["kind"] = "specialist"
    card["parent"] = {
        "path": str(from_ckpt),
        "created": base_card.get("created"),
        "training": {k: base_card.get("training", {}).get(k) for k in ("label_files", "n_rows")},
    }
    card["training"] = _training_record(pool, len(tr), len(va), cfg, history, t0)
    card["validation"] = (
        _summary(routing_metrics(_argmax_routes(model, x[va], routes), [pool[i] for i in va], routes))
        if len(va)
        else {}
    )
    card["heldout"] = {
        "target": {
            "n": len(test_rows),
            "source": [str(p) for p in eval_files]
            or f"stratified {holdout_frac:.0%} of the labels (seed {cfg.seed + 1})",
            "generalist": _summary(before),
            "specialist": _summary(after),
        }
    }
    card["notes"] = notes
    parent_guard = load_guard(from_ckpt, base_card)
    own = x[:, : base.config.embed_dim]
    guard = _specialist_guard(from_ckpt, parent_guard, own, label_files, cfg.seed)
    return save_checkpoint(out, model, card, guard, load_gate(from_ckpt, base_card))  # the parent's list gate


def _specialist_guard(from_ckpt, parent, own: np.ndarray, label_files, seed: int):
    """The parent's reference set plus the specialist's own questions' embeddings (`own`): a
    fine-tuned router still routes what its parent learned. Without a parent guard, its own alone."""
    sources = [str(p) for p in label_files]
    if parent is None:
        return build_guard(own, sources=sources, seed=seed)
    reference = np.concatenate([parent.reference.astype(np.float32), own], axis=0)
    return build_guard(reference, sources=[f"parent {from_ckpt}", *sources], seed=seed)


def _argmax_routes(model, x: np.ndarray, routes: Sequence[str]) -> list[str]:
    if len(x) == 0:
        return []
    p = model.predict_proba(x)
    return [routes[i] for i in p.argmax(1)]


def _summary(m: dict) -> dict:
    keep = ("n", "accuracy", "macro_f1", "quality", "score", "oracle_score", "route_share", "confusion")
    return {k: m[k] for k in keep if k in m}


def _jsonable(d):
    if isinstance(d, dict):
        return {k: _jsonable(v) for k, v in d.items()}
    if isinstance(d, (list, tuple)):
        return [_jsonable(v) for v in d]
    return d
