"""What searching the summary layers starts from: the KB's shared, loaded tree (the descent
itself is the summary route's, engine.core.routes.summary)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.floor.base.errors import KBError
from hierarchy.layers.persist import load_layers
from hierarchy.layers.tree import Layers

if TYPE_CHECKING:  # pragma: no cover
    from hierarchy.kb import KnowledgeBase

BUILD_HINT = "build them with: logicroute index SOURCE --kb KB --summaries extractive"


def require_layers(kb: "KnowledgeBase") -> Layers:
    """load_layers, or a KBError that says how to build them."""
    layers = load_layers(kb)
    if layers is None:
        raise KBError(f"the knowledge base at {kb.path} has no summary layers; {BUILD_HINT}")
    return layers
