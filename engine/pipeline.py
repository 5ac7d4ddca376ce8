"""RoutedRAG: the one public entry point. It wires a knowledge base, an LLM and the router,
and sends each question to the route the router picks (or the one the caller forces)."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from engine.errors import LogicRouteError
from engine.llm import DEFAULT_LLM, LLM
from engine.routes.common import check_question
from engine.types import Answer

if TYPE_CHECKING:
    from hierarchy.kb import KnowledgeBase

ROUTES = ("chunk", "summary", "logic")


@dataclass
class RoutedRAG:
    """A knowledge base + an LLM + a router. Everything heavy loads on first use."""

    kb: "KnowledgeBase"
    llm_spec: str = field(default=DEFAULT_LLM, metadata={"help": "LLM spec: local:MODEL, openai:MODEL[@BASE_URL]"})
    checkpoint: str | None = field(default=None, metadata={"help": "router checkpoint; None = shipped generalist"})
    k: int = field(default=3, metadata={"help": "chunks per retrieval (LogicRAG uses 3)"})
    cache: bool = field(default=True, metadata={"help": "on-disk LLM call cache"})
    llm: LLM | None = field(default=None, metadata={"help": "an LLM object; overrides llm_spec"})

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._router = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def open(cls, kb: str | Path, **options) -> "RoutedRAG":
        from hierarchy.kb import KnowledgeBase

        return cls(kb=KnowledgeBase.open(kb), **options)

    @classmethod
    def build(cls, sources: Iterable[str | Path], kb: str | Path, *, summaries: str = "extractive",
              show_progress: bool = True, **options) -> "RoutedRAG":
        """Index the sources into `kb` (created, or extended when it exists)."""
        from hierarchy.kb import KnowledgeBase
        from hierarchy.sources import load_documents

        path = Path(kb)
        base = KnowledgeBase.open(path) if (path / "manifest.json").exists() else KnowledgeBase.create(path)
        docs = [d for s in sources for d in load_documents(s)]
        base.add(docs, show_progress=show_progress)
        if summaries != "none" and not (path / "layers").exists():
            from hierarchy.layers import build_layers

            rag = cls(kb=base, **options)
            build_layers(base, summarizer=summaries, llm=rag.get_llm() if summaries == "llm" else None,
                         show_progress=show_progress)
            return rag
        return cls(kb=base, **options)

    # ------------------------------------------------------------------ parts, lazily
    def get_llm(self) -> LLM:
        with self._lock:
            if self.llm is None:
                from engine.llm import make_llm

                self.llm = make_llm(self.llm_spec, cache=self.cache)
            return self.llm

    def get_router(self):
        with self._lock:
            if self._router is None:
                from router.checkpoint import load_router

                self._router = load_router(self.checkpoint, embedder=self.kb.embedder)
            return self._router

    # ------------------------------------------------------------------ answering
    def route_probs(self, question: str) -> dict[str, float]:
        return self.get_router().probs([question])[0]

    def answer(self, question: str, *, route: str = "auto") -> Answer:
        q = check_question(question)
        probs = None
        if route == "auto":
            probs = self.route_probs(q)
            route = max(probs, key=probs.get)
        ans = self._run_route(q, route)
        ans.route_probs = probs
        return ans

    def _run_route(self, q: str, route: str) -> Answer:
        llm = self.get_llm()
        if route == "chunk":
            from engine.routes.chunk import answer_chunk

            return answer_chunk(q, self.kb, llm, k=self.k)
        if route == "summary":
            from engine.routes.summary import answer_summary

            return answer_summary(q, self.kb, llm, k=self.k)
        if route == "logic":
            from engine.routes.logic import LogicConfig, answer_logic

            return answer_logic(q, self.kb, llm, LogicConfig(k=self.k))
        raise LogicRouteError(f"unknown route {route!r}: choose one of auto, {', '.join(ROUTES)}")
