"""Fine-tuning the shipped generalist on one set's training rows, and choosing how, for `bench
specialist` (training.adapt.bench_specialist).

- A Variant is one setting of what the choice is made over: epochs, learning rate, the treatment
  of rows where no route scored (drop, cheapest, pref: their computed vector, uniform), the
  cost weight the targets are computed at and the loss. The rest is `train specialist`'s recipe
  (training.fitting.fit.specialist_config).
- Every fit trains for exactly its epochs, no early stopping: the epochs are what the choice
  picks, on validation folds of the training rows (select), so the final fit on all of them has
  no validation share to stop on.
- Decisions: the Decider's (engine.core.decide: argmax, list gate, form stage; no out-of-distribution
  stage, as on every lab path that judges the router's own choice), and the MLP's argmax beside it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from engine.core.routes.summary_config import GLOBAL_MODE
from training.adapt.specialist_split import validation_folds
from training.fitting.fit import fit, specialist_config
from training.fitting.list_gate_fit import is_list_row
from training.labels.label_arrays import training_targets

ALL_ZERO = ("drop", "cheapest", "pref", "uniform")


@dataclass(frozen=True)
class Variant:
    """One fine-tuning setting. cost_weight None: the generalist's own (its card's), as `train
    specialist` keeps it; 0: the targets follow the answer score alone."""

    epochs: int
    lr: float
    all_zero: str
    cost_weight: float | None = None
    loss: str = "reward"

    def name(self) -> str:
        cw = "" if self.cost_weight is None else f", cost weight {self.cost_weight:g}"
        loss = "" if self.loss == "reward" else f", loss {self.loss}"
        return f"{self.epochs} epochs, lr {self.lr:g}, all-zero {self.all_zero}{cw}{loss}"

    def to_dict(self) -> dict:
        return asdict(self)


def grid(
    epochs: Sequence[int],
    lrs: Sequence[float],
    all_zero: Sequence[str],
    cost_weights: Sequence[float | None] = (None,),
    losses: Sequence[str] = ("reward",),
) -> list[Variant]:
    """Every combination, in a fixed order (the order breaks exact ties: the earlier wins)."""
    bad = [a for a in all_zero if a not in ALL_ZERO]
    if bad:
        raise ValueError(f"all-zero treatment must be one of {', '.join(ALL_ZERO)}, got {bad}")
    return [
        Variant(e, lr, a, cw, loss)
        for cw in cost_weights
        for loss in losses
        for a in all_zero
        for lr in lrs
        for e in sorted(epochs)
    ]


def trainable(rows: Sequence[dict], variant: Variant) -> list[int]:
    """The rows a variant fine-tunes on: list questions train the list gate, kept from the parent
    (as train_specialist); under "drop", rows where no route scored teach nothing."""
    return [
        i for i, r in enumerate(rows) if not is_list_row(r) and not (variant.all_zero == "drop" and r.get("all_zero"))
    ]


def targets(rows: Sequence[dict], routes: Sequence[str], variant: Variant, parent_cost_weight) -> np.ndarray:
    """Preference targets; "uniform": a row where no route scored says nothing about which route
    fits, so it asks for no route over another (it still pulls the router's confidence down)."""
    cw = parent_cost_weight if variant.cost_weight is None else variant.cost_weight
    treatment = "pref" if variant.all_zero in ("uniform", "drop") else variant.all_zero
    t, _ = training_targets(rows, routes, treatment, cw)
    if variant.all_zero == "uniform":
        for i, r in enumerate(rows):
            if r.get("all_zero"):
                t[i] = 1.0 / len(routes)
    return t


def fine_tune(base, x: np.ndarray, rows: Sequence[dict], routes, variant: Variant, parent_cost_weight, seed: int = 0):
    """A copy of `base` (its input normalization kept: the same input space) fine-tuned on `rows`
    (inputs `x`) for exactly variant.epochs."""
    keep = trainable(rows, variant)
    model = copy.deepcopy(base)
    if not keep or variant.epochs == 0:
        return model
    cfg = specialist_config(lr=variant.lr, max_epochs=variant.epochs, loss=variant.loss, seed=seed, val_frac=0.0)
    t = targets([rows[i] for i in keep], routes, variant, parent_cost_weight)
    empty = np.zeros((0, x.shape[1]), np.float32)
    fit(model, x[keep], t, empty, np.zeros((0, len(routes)), np.float32), np.zeros(0, np.int64), cfg)
    return model


def decisions(model, gate, x: np.ndarray, rows: Sequence[dict], routes: Sequence[str]) -> dict[str, list[str]]:
    """{"decider": the Decider's routes, "mlp": the MLP's argmax} for the rows. The list gate has
    its say only on rows whose summary route answered in its global mode (a KB of documents), as
    router.kb_router.fit_to_kb keeps it off on a KB of single passages."""
    from engine.core.decide import Decider, Learned

    if not rows:
        return {"decider": [], "mlp": []}
    probs = model.predict_proba(x)
    dim = int(model.config.embed_dim)
    questions = [r["question"] for r in rows]
    fired = gate.fires(x[:, :dim], questions) if gate is not None else [None] * len(rows)
    decider = Decider()
    decided = [
        decider.decide(
            Learned(dict(zip(routes, map(float, p))), None, g if r.get("summary_mode") == GLOBAL_MODE else None), q
        ).route
        for p, q, g, r in zip(probs, questions, fired, rows)
    ]
    return {"decider": decided, "mlp": [routes[i] for i in probs.argmax(1)]}


def mean_score(rows: Sequence[dict], routes_taken: Sequence[str]) -> float:
    return 100 * sum(r["scores"][d] for r, d in zip(rows, routes_taken)) / max(len(rows), 1)


def select(
    base,
    gate,
    x: np.ndarray,
    rows: Sequence[dict],
    routes,
    variants: Sequence[Variant],
    *,
    folds: int,
    parent_cost_weight,
    seed: int = 0,
    progress=None,
) -> dict:
    """Each variant judged by k-fold validation over the training rows `rows` only: each fold's
    rows decided (the Decider) by the variant fine-tuned on the other folds, so every training
    row is judged once by a router that did not see it. The choice: the highest mean F1, then
    fewer tokens, then the earlier variant. The generalist's figure on the same rows is beside it."""
    from training.fitting.lodo import judge

    parts = validation_folds(rows, folds)
    table = []
    for v in variants:
        taken = [""] * len(rows)
        for f, held in enumerate(parts):
            if not held:
                continue
            rest = [i for g, part in enumerate(parts) if g != f for i in part]
            model = fine_tune(base, x[rest], [rows[i] for i in rest], routes, v, parent_cost_weight, seed)
            for i, route in zip(held, decisions(model, gate, x[held], [rows[i] for i in held], routes)["decider"]):
                taken[i] = route
        table.append({"variant": v.to_dict(), "name": v.name(), **judge(rows, taken, routes)})
        if progress:
            progress(table[-1])
    general = judge(rows, decisions(base, gate, x, rows, routes)["decider"], routes)
    best = max(range(len(table)), key=lambda i: (table[i]["score"], -table[i]["tokens"], -i))
    return {
        "folds": [len(p) for p in parts],
        "generalist": general,
        "table": table,
        "chosen": table[best]["variant"],
        "chosen_name": table[best]["name"],
        "beats_generalist_on_validation": table[best]["score"] > general["score"],
    }
