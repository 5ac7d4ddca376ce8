"""The tiny setup the router spec files share: two routes, a small hashed embedder in place
of MiniLM, and a list gate set by hand."""

from __future__ import annotations

import numpy as np

from router.features import feature_dim
from router.list_gate import ListGate
from tests.fakes import HashedBowEmbedder


def tiny_embedder(id: str = "tiny-bow", dim: int = 16) -> HashedBowEmbedder:
    return HashedBowEmbedder(id, dim)


ROUTES = ("chunk", "logic")


def shape_gate(threshold: float = 0.7, dim: int = 64) -> ListGate:
    """A gate that reads the shape feature alone: it fires on a question asking for a list."""
    weight = np.zeros(dim + feature_dim(("shape",)), np.float32)
    weight[dim] = 8.0  # the "asks for a list" column
    return ListGate(weight, -4.0, ("shape",), threshold, {"model": "by hand"})
