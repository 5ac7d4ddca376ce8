"""Fitting a router MLP with Lightning on CPU, and the settings of a training run.

- Loss: straight-through Gumbel-Softmax, temperature annealed tau_start -> tau_end
  (gumbel_routing_loss explains the choice of loss).
- Validation (when a share is held, `val_frac` > 0, as for specialists): early stopping and the
  kept weights follow validation routing quality = mean preference mass of the route chosen by
  the deterministic argmax (eval mode, no noise). A generalist trains on every answer row for
  max_epochs by default.
- Seeds fixed, deterministic algorithms on: the same labels give the same checkpoint.

torch / lightning load inside functions (the CLI imports this module lazily anyway).
"""

from __future__ import annotations

import copy
import logging
import warnings
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine.floor.base.errors import CheckpointError, LogicRouteError
from router.features import DEFAULT_FEATURES

if TYPE_CHECKING:
    import torch


@dataclass
class TrainConfig:
    """Router training settings (generalist defaults; `specialist_config` lowers lr/epochs)."""

    hidden: tuple[int, int] = field(default=(64, 16), metadata={"help": "widths of the two hidden layers"})
    activation: str = field(default="gelu", metadata={"help": "relu | gelu | tanh | silu"})
    dropout: float = field(default=0.3, metadata={"help": "dropout after each hidden layer (off at inference)"})
    features: tuple[str, ...] = field(
        default=DEFAULT_FEATURES,
        metadata={"help": "cheap features appended to the embedding; () = embedding only (shape: the list gate's)"},
    )
    text_form: str = field(
        default="question",
        metadata={
            "help": "text embedded: question | masked (entities and numbers replaced) | plain (no closing marks)"
        },
    )
    lr: float = field(default=3e-4, metadata={"help": "AdamW learning rate"})
    weight_decay: float = field(default=1e-2, metadata={"help": "AdamW weight decay"})
    batch_size: int = field(default=64, metadata={"help": "questions per step"})
    max_epochs: int = field(
        default=80, metadata={"help": "epochs trained (fewer when a validation share stops training early)"}
    )
    patience: int = field(default=15, metadata={"help": "epochs without validation improvement before stopping"})
    tau_start: float = field(default=1.0, metadata={"help": "Gumbel-Softmax temperature at epoch 0"})
    tau_end: float = field(default=0.2, metadata={"help": "temperature reached at max_epochs (exponential annealing)"})
    loss: str = field(
        default="reward", metadata={"help": "reward: -(y_hard . pref) + ce_weight*CE | ce: CE on the soft sample"}
    )
    ce_weight: float = field(default=0.1, metadata={"help": "weight of the cross-entropy anchor in the reward loss"})
    # 0: on a few hundred answer rows, early stopping on a 15% share (25-30 rows) kept a nearly
    # untrained router and swung leave-one-dataset-out by +-3.2 over 10 seeds, against +-0.3 for
    # every row trained for max_epochs at the same mean (docs/results/router/router_shortcuts.md).
    val_frac: float = field(
        default=0.0,
        metadata={"help": "stratified share of the answer labels held for early stopping; 0 = train on all of them"},
    )
    # drop: a row where no route scored says nothing about which route fits the question, and
    # labelled "cheapest" it teaches that hard multi-hop forms belong on chunk (leave-one-dataset-
    # out over seeds 0-2: 56.6 pooled vs 48.6 on 113 answer labels, 60.2 vs 58.7 on 92).
    all_zero: str = field(default="drop", metadata={"help": "rows where no route scored: drop | cheapest | pref"})
    monitor: str = field(default="quality", metadata={"help": "early-stopping metric: quality (pref mass) | accuracy"})
    prior_per_set: int = field(
        default=0,
        metadata={
            "help": "silver rows per shared set labelled by the set's kind, single-hop -> chunk, multi-hop -> "
            "logic (training.fitting.set_priors); 0 = answer labels only"
        },
    )
    hop_priors: int = field(
        default=0,
        metadata={
            "help": "silver rows per multi-hop set that writes out its sub-questions (2Wiki): those one-hop "
            "lookups labelled chunk, so that topic alone does not decide logic (training.fitting.set_priors.hop_rows)"
        },
    )
    hop_pairs: int = field(
        default=0,
        metadata={
            "help": "multi-hop questions (2Wiki's) taken with their own one-hop sub-questions, the question "
            "labelled logic and each sub-question chunk: same topic, only the form differs "
            "(training.fitting.set_priors.pair_rows)"
        },
    )
    list_priors: int = field(
        default=0,
        metadata={
            "help": "silver rows per list-question corpus (the tune halves of training/data/global_lists), "
            "labelled summary: questions about a whole corpus (training.fitting.set_priors.list_rows)"
        },
    )
    cost_weight: float | None = field(
        default=None,
        metadata={
            "help": "lam of each answer row's preference, recomputed from its scores and costs "
            "(training.labels.labels.with_cost_weight): higher spends fewer tokens; None = the rows' own (0.1)"
        },
    )
    prior_strength: float = field(default=0.8, metadata={"help": "preference of a silver row for its set's route"})
    seed: int = field(default=0, metadata={"help": "seed for splits, init, Gumbel noise and shuffling"})
    threads: int = field(default=2, metadata={"help": "torch CPU threads"})


def recorded_config(card: dict) -> dict | None:
    """The training settings a checkpoint's card records (train.py writes them), or None."""
    recorded = (card.get("training") or {}).get("config")
    return recorded if isinstance(recorded, dict) else None


def config_from_card(checkpoint: str | Path) -> TrainConfig:
    """The TrainConfig a checkpoint's card records (its recipe); CheckpointError when it has none."""
    from router.checkpoint import read_card

    recorded = recorded_config(read_card(checkpoint))
    if recorded is None:
        raise CheckpointError(f"{checkpoint}: its card records no training settings")
    known = {f.name for f in fields(TrainConfig)}
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in recorded.items() if k in known}
    return TrainConfig(**values)


def specialist_config(**overrides) -> TrainConfig:
    """Fine-tuning defaults: 3x lower learning rate on small batches (a target set has a few
    hundred questions), at most 40 epochs, short patience, a cooler Gumbel start."""
    return replace(
        TrainConfig(lr=1e-4, batch_size=16, max_epochs=40, patience=10, tau_start=0.5, val_frac=0.2), **overrides
    )


def _quiet_lightning() -> None:
    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "pytorch_lightning"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", ".*does not have many workers.*")
    warnings.filterwarnings("ignore", ".*GPU available but not used.*")
    warnings.filterwarnings("ignore", ".*LeafSpec.*")
    warnings.filterwarnings("ignore", ".*_pytree.*")
    warnings.filterwarnings(
        "ignore", ".*but have no `val_dataloader`.*"
    )  # a tiny fine-tuning set has no validation rows


def fit(
    model,
    x_train: np.ndarray,
    t_train: np.ndarray,
    x_val: np.ndarray,
    t_val: np.ndarray,
    o_val: np.ndarray,
    cfg: TrainConfig,
    progress: bool = False,
    keep_initial: bool = False,
) -> dict:
    """Train `model` in place with Lightning; it ends holding the best-validation weights.
    keep_initial: the starting weights compete too (epoch -1), so fine-tuning never ends
    worse on validation than the generalist it started from.
    Returns the history {epochs_run, best_epoch, best, curve}."""
    import lightning as L
    import torch

    _quiet_lightning()
    # Process-wide torch settings changed here are put back afterwards (library callers).
    prev_threads, prev_det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(max(1, cfg.threads))
    try:
        return _fit(L, torch, model, x_train, t_train, x_val, t_val, o_val, cfg, progress, keep_initial)
    finally:
        torch.set_num_threads(prev_threads)
        torch.use_deterministic_algorithms(prev_det)


def _fit(
    L, torch, model, x_train, t_train, x_val, t_val, o_val, cfg: TrainConfig, progress: bool, keep_initial: bool
) -> dict:
    from torch.utils.data import DataLoader, TensorDataset

    L.seed_everything(cfg.seed, workers=True, verbose=False)
    has_val = len(x_val) > 0
    monitor = "val_quality" if cfg.monitor == "quality" else "val_acc"
    if cfg.monitor not in ("quality", "accuracy"):
        raise LogicRouteError(f"monitor must be quality or accuracy, got {cfg.monitor!r}")
    g = torch.Generator().manual_seed(cfg.seed)
    train_dl = DataLoader(
        TensorDataset(torch.from_numpy(x_train), torch.from_numpy(t_train)),
        batch_size=cfg.batch_size,
        shuffle=True,
        generator=g,
        num_workers=0,
    )
    keep = _keep_best(L, monitor)
    if keep_initial and has_val:
        _score_initial(torch, model, x_val, t_val, o_val, keep, monitor)
    callbacks = [keep]
    val_dl = None
    if has_val:
        from lightning.pytorch.callbacks import EarlyStopping

        val_dl = DataLoader(
            TensorDataset(torch.from_numpy(x_val), torch.from_numpy(t_val), torch.from_numpy(o_val)),
            batch_size=max(1, len(x_val)),
            shuffle=False,
            num_workers=0,
        )
        callbacks.append(EarlyStopping(monitor=monitor, mode="max", patience=cfg.patience, min_delta=1e-4))
    trainer = L.Trainer(
        max_epochs=cfg.max_epochs,
        accelerator="cpu",
        devices=1,
        deterministic=True,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=progress,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=callbacks,
        limit_val_batches=1.0 if has_val else 0,
    )
    lit = _lightning_module(L, torch, model, cfg)
    model.train()  # a loaded generalist arrives in eval mode
    trainer.fit(lit, train_dl, val_dl)
    if keep.state is not None:
        model.load_state_dict(keep.state)
    model.eval()
    return {
        "epochs_run": trainer.current_epoch,
        "best_epoch": keep.best_epoch,
        f"best_{monitor}": round(keep.best, 4),
        "curve": keep.curve,
    }


def _lightning_module(L, torch, model, cfg: TrainConfig):
    """`model` wrapped for Lightning: Gumbel-Softmax training, argmax validation."""

    class RouterLit(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = model
            self.tau = cfg.tau_start

        def on_train_epoch_start(self):
            self.tau = anneal_tau(self.current_epoch, cfg.max_epochs, cfg.tau_start, cfg.tau_end)

        def training_step(self, batch, _):
            x, p = batch
            loss = gumbel_routing_loss(self.model(x), p, self.tau, loss=cfg.loss, ce_weight=cfg.ce_weight)
            self.log("train_loss", loss, on_step=False, on_epoch=True, batch_size=len(x))
            return loss

        def validation_step(self, batch, _):
            x, p, o = batch  # Lightning has put the module in eval mode: no dropout, and no noise here
            pred = self.model(x).argmax(-1)
            self.log("val_quality", p.gather(1, pred[:, None]).mean(), batch_size=len(x))
            self.log("val_acc", (pred == o).float().mean(), batch_size=len(x))

        def configure_optimizers(self):
            return torch.optim.AdamW(self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)

    return RouterLit()


def _keep_best(L, monitor: str):
    """A callback that remembers the best validation epoch's weights (early stopping alone
    keeps the last ones) and the validation curve."""

    class KeepBest(L.Callback):
        def __init__(self):
            self.best, self.best_epoch, self.state, self.curve = -1.0, -1, None, []

        def on_validation_epoch_end(self, trainer, module):
            m = trainer.callback_metrics
            q, a = float(m["val_quality"]), float(m["val_acc"])
            loss = float(m["train_loss"]) if "train_loss" in m else None
            self.curve.append(
                {
                    "epoch": trainer.current_epoch,
                    "val_quality": round(q, 4),
                    "val_acc": round(a, 4),
                    "train_loss": None if loss is None else round(loss, 4),
                    "tau": round(module.tau, 4),
                }
            )
            score = q if monitor == "val_quality" else a
            if score > self.best + 1e-6:
                self.best, self.best_epoch = score, trainer.current_epoch
                self.state = copy.deepcopy(module.model.state_dict())

    return KeepBest()


def _score_initial(torch, model, x_val, t_val, o_val, keep, monitor: str) -> None:
    """Let the starting weights compete as epoch -1 (fine-tuning keeps them unless it improves)."""
    with torch.no_grad():
        model.eval()
        pred = model(torch.from_numpy(x_val)).argmax(-1).numpy()
    q0 = float(t_val[np.arange(len(pred)), pred].mean())
    a0 = float((pred == o_val).mean())
    keep.best, keep.best_epoch = (q0 if monitor == "val_quality" else a0), -1
    keep.state = copy.deepcopy(model.state_dict())
    keep.curve.append(
        {"epoch": -1, "val_quality": round(q0, 4), "val_acc": round(a0, 4), "train_loss": None, "tau": None}
    )


def gumbel_routing_loss(
    logits: torch.Tensor, pref: torch.Tensor, tau: float, *, loss: str = "reward", ce_weight: float = 0.1
) -> torch.Tensor:
    """Training loss against preference vectors `pref` (rows sum to 1).

    A hard route y is drawn with straight-through Gumbel-Softmax: y is the one-hot route the
    router would actually take, and its gradient is the soft sample's. Losses:
    - "reward": -(y · pref), the negative preference mass of the route taken: it optimizes
      exactly what routing is judged on (the chosen route's share of the preference), and
      the Gumbel noise explores routes the current argmax would never try. Its gradient is
      noisy, so a small cross-entropy term (ce_weight · CE(softmax(logits), pref)) is added
      to anchor the probabilities that the budget policy thresholds on.
    - "ce": CE(log y_soft, pref) on the soft Gumbel sample: a smoother surrogate that learns
      the preference distribution rather than its argmax.
    """
    import torch
    from torch.nn import functional as F

    y = F.gumbel_softmax(logits, tau=tau, hard=True, dim=-1)
    if loss == "reward":
        main = -(y * pref).sum(-1).mean()
        if ce_weight:
            main = main + ce_weight * -(pref * F.log_softmax(logits, -1)).sum(-1).mean()
        return main
    if loss == "ce":
        y_soft = F.gumbel_softmax(logits, tau=tau, hard=False, dim=-1)
        return -(pref * torch.log(y_soft.clamp_min(1e-8))).sum(-1).mean()
    raise ValueError(f"unknown loss {loss!r}: choose reward or ce")


def anneal_tau(epoch: int, epochs: int, tau_start: float, tau_end: float) -> float:
    """Exponential annealing from tau_start (soft, exploratory) to tau_end (near one-hot)."""
    if epochs <= 1:
        return tau_end
    frac = min(max(epoch / (epochs - 1), 0.0), 1.0)
    return float(tau_start * (tau_end / tau_start) ** frac)
