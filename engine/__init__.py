"""Answering: the public API, LLM clients, embeddings, the routes, the routed pipeline.

    from engine import RoutedRAG, Budget, Answer

The names load on first access, so `import engine` is instant."""

from __future__ import annotations

import importlib

_LAZY = {"RoutedRAG": "engine.core.pipeline", "Budget": "engine.core.pipeline", "Answer": "engine.floor.base.types"}

__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
