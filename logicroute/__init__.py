"""logicroute: query-adaptive RAG. The public API in one import, named after the distribution:

    from logicroute import RoutedRAG
    rag = RoutedRAG.open("kb/")                       # a KB made by `logicroute index`
    ans = rag.answer("Who founded the company that built the lighthouse?")
    print(ans.text)                                   # sentences citing passages [n]
    for s in ans.sources:                             # what [n] points at
        print(s.n, s.path or s.title, s.heading_path, s.score)

A facade only: the code lives in the design card's packages (engine, hierarchy, router,
training), and nothing loads until a name is first used."""

from __future__ import annotations

_LAZY = {
    "RoutedRAG": "engine.core.pipeline",
    "RagConfig": "engine.core.config",
    "Budget": "engine.core.budget",
    "Answer": "engine.floor.base.types",
    "Source": "engine.floor.base.types",
    "Usage": "engine.floor.base.types",
    "LogicRouteError": "engine.floor.base.errors",
    "KnowledgeBase": "hierarchy.kb",
    "Document": "hierarchy.documents",
    "LogicConfig": "engine.core.routes.logic.config",
    "make_llm": "engine.floor.llm.factory",
    "load_router": "router.checkpoint",
    "format_sources": "engine.floor.sources_text",
}

__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'logicroute' has no attribute {name!r}")
