"""The router network: a 3-layer MLP over [query embedding ‖ cheap features], one logit
per route, trained with a straight-through Gumbel-Softmax head (QA-GraphRAG; the loss is
training.fitting.fit.gumbel_routing_loss).

At inference `predict_proba` puts the module in eval mode (dropout off), adds NO noise, and
returns the plain softmax; engine.core.decide.Decider turns it into a route.

This module imports torch at top level: only import it lazily (inside functions) from
anything the CLI loads at start.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch import nn

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "silu": nn.SiLU}


@dataclass
class RouterConfig:
    """Architecture of a router; stored in every checkpoint card."""

    routes: tuple[str, ...] = field(
        metadata={"help": "route names, one logit each, in this order (data, not code: stored in the checkpoint)"}
    )
    embed_dim: int = field(default=384, metadata={"help": "query embedding width (MiniLM-L6: 384)"})
    features: tuple[str, ...] = field(
        default=("specificity", "length", "qword", "entities", "comparison"),
        metadata={"help": "cheap features appended to the embedding (router.features)"},
    )
    hidden: tuple[int, int] = field(
        default=(64, 16), metadata={"help": "widths of the two hidden layers (3 linear layers in all)"}
    )
    text_form: str = field(
        default="question",
        metadata={"help": "text embedded: question (as asked) | masked (form, not topic) | plain (no closing mark)"},
    )
    activation: str = field(default="gelu", metadata={"help": "relu | gelu | tanh | silu"})
    dropout: float = field(default=0.3, metadata={"help": "dropout after each hidden layer (training only)"})

    @property
    def input_dim(self) -> int:
        from router.features import feature_dim

        return self.embed_dim + feature_dim(self.features)

    def to_dict(self) -> dict:
        """The card's "config": every field, and the version of each feature (router.features) so
        that a checkpoint is refused by code that computes its features differently."""
        from router.features import feature_versions

        d = asdict(self)
        d["routes"], d["features"], d["hidden"] = list(self.routes), list(self.features), list(self.hidden)
        d["feature_versions"] = feature_versions(self.features)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "RouterConfig":
        return cls(
            routes=tuple(d["routes"]),
            embed_dim=int(d["embed_dim"]),
            features=tuple(d["features"]),
            hidden=tuple(int(h) for h in d["hidden"]),
            activation=d["activation"],
            dropout=float(d["dropout"]),
            text_form=d.get("text_form", "question"),  # a card without text_form embeds the question
        )  # feature_versions: checked by router.checkpoint.check_inputs before a model is built


class RouterMLP(nn.Module):
    """Linear -> act -> dropout -> Linear -> act -> dropout -> Linear (one logit per route).

    Inputs are standardized with per-column mean/std buffers fitted on the training set
    (`set_normalization`), saved with the weights: the embedding's ±0.05 values and the
    0/1 features then reach the first layer on the same scale."""

    def __init__(self, config: RouterConfig):
        super().__init__()
        if config.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {config.activation!r}; choose {', '.join(ACTIVATIONS)}")
        if len(config.routes) < 2 or len(set(config.routes)) != len(config.routes):
            raise ValueError(f"a router needs at least two distinct routes, got {config.routes}")
        self.config = config
        h1, h2 = config.hidden
        act = ACTIVATIONS[config.activation]
        self.net = nn.Sequential(
            nn.Linear(config.input_dim, h1),
            act(),
            nn.Dropout(config.dropout),
            nn.Linear(h1, h2),
            act(),
            nn.Dropout(config.dropout),
            nn.Linear(h2, len(config.routes)),
        )
        self.register_buffer("input_mean", torch.zeros(config.input_dim))
        self.register_buffer("input_std", torch.ones(config.input_dim))

    def set_normalization(self, x: np.ndarray | torch.Tensor) -> None:
        x = torch.as_tensor(np.asarray(x, dtype=np.float32))
        self.input_mean.copy_(x.mean(0))
        # A floor keeps constant columns (a feature never seen set) from blowing up.
        self.input_std.copy_(x.std(0, unbiased=False).clamp_min(1e-3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net((x - self.input_mean) / self.input_std)

    @torch.no_grad()
    def predict_proba(self, x: np.ndarray | torch.Tensor) -> np.ndarray:
        """Deterministic route probabilities: eval mode (no dropout), no Gumbel noise."""
        self.eval()
        logits = self(torch.as_tensor(np.asarray(x, dtype=np.float32)))
        return torch.softmax(logits, dim=-1).numpy()
