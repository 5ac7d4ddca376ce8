"""The query router: a 3-layer MLP over the query embedding (+ cheap features) that gives
each route a probability; engine.core.decide's Decider turns them into a route (argmax or a
calibrated threshold on P(logic), then its rule stages).

    from router import load_router
    r = load_router()                       # shipped checkpoints/generalist.ckpt
    r.probs(["Who directed Inception?"])    # [{"chunk": .., "logic": ..}]

Nothing heavy is imported here (torch loads when a checkpoint does)."""

from __future__ import annotations

_LAZY = {
    "load_router": "router.checkpoint",
    "Router": "router.checkpoint",
    "save_checkpoint": "router.checkpoint",
    "load_checkpoint": "router.checkpoint",
    "DEFAULT_CHECKPOINT": "router.checkpoint",
    "Policy": "router.policy",
    "calibrate_share": "router.policy",
    "RouterConfig": "router.model",
    "RouterMLP": "router.model",
}

__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'router' has no attribute {name!r}")
