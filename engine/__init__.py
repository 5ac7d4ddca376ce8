"""Answering, in three floors with the other packages between them, every import pointing down:
the face (engine.face: commands, HTTP, MCP) over the core (engine.core: the pipeline, the Decider,
the routes) over router/ (the model) over hierarchy/ (the KB) over the floor (engine.floor: types,
the question, LLM clients, prompts, the embedder).

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
