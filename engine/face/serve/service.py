"""AnswerService: what the server does, without the HTTP. One RoutedRAG kept warm, answers
with per-request options, route decisions, and document writes while queries go on.

Knowledge base snapshots: a write opens its own KnowledgeBase object, changes it under the
KB's writer lock (hierarchy.indexing, the lock `logicroute index` takes, so a CLI writer and
the server take turns), and then the readers' reference is swapped to it in one assignment.
A query that started before keeps the snapshot it started with: it never sees chunks and a
faiss index from two different commits. The written object is never changed again (the next
write opens a new one).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from engine.core.budget import Budget
from engine.core.config import thresholds_budget
from engine.core.routes import ROUTES
from engine.core.routes.common import check_question
from engine.face.serve.admission import Admission
from engine.face.serve.config import ServeConfig
from engine.face.serve.metrics import ServerMetrics
from engine.face.serve.progress import CLIENT_GONE_STATUS, ClientGone, ObservedLLM, Sink, check_cancelled, with_sink
from engine.floor.base.errors import DocumentNotFoundError, LogicRouteError
from engine.floor.llm.urls import redact

if TYPE_CHECKING:
    from engine.core.pipeline import RoutedRAG
    from engine.floor.base.types import Answer
    from hierarchy.documents import Document

LIMIT_FIELDS = ("max_llm_calls", "max_prompt_tokens", "max_seconds")


@dataclass(frozen=True)
class QueryOptions:
    """The options of RoutedRAG.answer a request may set; None keeps the server's default."""

    route: str = "auto"
    style: str | None = None
    escalate: bool | None = None
    limits: dict | None = None  # {max_llm_calls, max_prompt_tokens, max_seconds, threshold}


class AnswerService:
    def __init__(self, rag: "RoutedRAG", config: ServeConfig | None = None, *, llm_spec: str | None = None):
        self.config = config or ServeConfig()
        self.llm_spec = llm_spec or rag.llm_spec
        self.metrics = ServerMetrics()
        self.admission = Admission(self.config.workers, self.config.queue_size, self.metrics.mean_answer_seconds)
        rag.llm = ObservedLLM(rag.get_llm())  # streaming requests see each LLM call
        self.base = rag
        self._variants: dict[str, RoutedRAG] = {rag.style: rag}
        self._variants_lock = threading.Lock()
        self._write_lock = threading.Lock()  # writers of this process; the KB's own lock covers other processes
        self._warm_lock = threading.Lock()
        self._warm = False

    # ------------------------------------------------------------------ construction
    @classmethod
    def open(
        cls,
        kb_dir: str | Path,
        config: ServeConfig | None = None,
        *,
        thresholds: str | None = None,
        embedder=None,
        **rag_options,
    ) -> "AnswerService":
        """The service over the KB at `kb_dir`; rag_options are RoutedRAG's (llm_spec, llm,
        checkpoint, router, k, style, ...). `thresholds`: the calibrated policy file that
        becomes every request's default budget."""
        from engine.core.pipeline import RoutedRAG
        from hierarchy.kb import KnowledgeBase

        kb = KnowledgeBase.open(kb_dir, embedder)
        budget = thresholds_budget(thresholds) if thresholds else rag_options.pop("budget", None)
        return cls(RoutedRAG(kb=kb, budget=budget, **rag_options), config)

    def warm_up(self) -> None:
        """Load the embedder, the router and the local model now, so that the first questions wait
        for their answers, not for loading; the server listens only after this (engine.face.serve.run).
        A remote endpoint gets no call: it has nothing to load, and a call would cost. Once per
        service: a later call returns at once."""
        with self._warm_lock:
            if self._warm:
                return
            warm_embedder = getattr(self.base.kb.embedder, "warm_up", None)
            if warm_embedder is not None:  # the model itself, not a cached vector
                warm_embedder()
            self.base.get_router().probs_and_ood(["warm-up"])  # embedder and MLP: what every decision runs
            self.base.kb.search("warm-up", k=1)
            if self.llm_spec.partition(":")[0] == "local":
                load_model(self.base.get_llm())
            else:
                connect_client(self.base.get_llm())
            self._warm = True

    # ------------------------------------------------------------------ answering
    def answer(
        self,
        question: str,
        options: QueryOptions,
        deadline: float,
        sink: Sink | None = None,
        cancel: threading.Event | None = None,
    ) -> "Answer":
        """One answer (runs on an answering thread). `deadline` (time.monotonic) becomes the
        answer's Budget(max_seconds) unless the request asked for less, so the logic route stops
        solving and answers from what it found instead of running past it. `cancel`: set when
        the client goes away; no LLM call starts after it (ClientGone). The question and the route
        are checked by RoutedRAG.answer (and by the HTTP app before the request takes a queue place)."""
        budget = self.budget_for(options.limits, deadline - time.monotonic())
        rag = self.rag_for(options.style)

        def run():
            check_cancelled(cancel)  # its client left while it waited in the queue
            ans = rag.answer(question, route=options.route, budget=budget, escalate=options.escalate)
            check_cancelled(cancel)  # an answer cut short for a client that left is nobody's answer
            return ans

        try:
            ans = with_sink(sink, run, cancel)
        except ClientGone:
            self.metrics.failed(CLIENT_GONE_STATUS)  # booked here: no response is left to book it
            raise
        self.metrics.answered(ans.route, ans.usage.seconds, ans.usage)
        return ans

    def budget_for(self, limits: dict | None, seconds_left: float) -> Budget:
        """The server's default budget (its thresholds) with the request's limits, max_seconds
        no later than the deadline, and the deadline a hard end: the 504 has gone out by then, so
        no LLM call (not even the logic route's reserved final one) may hold a worker past it."""
        default = self.base.budget or Budget()
        wanted = {k: v for k, v in (limits or {}).items() if v is not None}
        unknown = set(wanted) - {*LIMIT_FIELDS, "threshold"}
        if unknown:
            raise LogicRouteError(
                f"unknown budget option(s) {', '.join(sorted(unknown))}: use {', '.join(LIMIT_FIELDS)}"
            )
        left = max(seconds_left, 0.001)
        wanted["max_seconds"] = min(wanted.get("max_seconds") or default.max_seconds or left, left)
        wanted["hard_seconds"] = left
        return dataclasses.replace(default, **wanted)

    def rag_for(self, style: str | None) -> "RoutedRAG":
        """The RoutedRAG for an answer style: the same KB, LLM and router, another prompt style."""
        if style is None:
            return self.base
        with self._variants_lock:
            if style not in self._variants:
                self._variants[style] = dataclasses.replace(self.base, style=style)  # checks the style
            return self._variants[style]

    def decide(self, question: str, limits: dict | None = None) -> dict:
        """The route decision only (engine.core.decide, as an answer decides): probabilities, the route
        the policy picks, and what the out-of-distribution guard does with it. No LLM call."""
        t0 = time.perf_counter()
        q = check_question(question)
        (decision,) = self.base.decide_many([q], self.budget_for(limits, 1.0))
        self.metrics.decided()
        return {"question": q, **decision.to_dict(), "seconds": round(time.perf_counter() - t0, 5)}

    # ------------------------------------------------------------------ documents
    def add_documents(self, docs: list["Document"]) -> dict:
        """Index `docs` (a document id already present is replaced) and bring the summary layers
        up to date, under the KB's writer lock; then readers see the new snapshot."""
        from hierarchy.indexing import add_documents

        with self._write_lock:
            kb = self._writable_kb()
            report = add_documents(kb, docs, show_progress=False)
            self._swap_kb(kb)
        self.metrics.documents(added=len(docs))
        return {
            "documents": len(docs),
            "added_chunks": report.get("added_chunks", 0),
            "unchanged_chunks": report.get("unchanged_chunks", 0),  # the document's own, indexed already
            "duplicate_chunks": report.get("duplicate_chunks", 0),  # another document's
            "kb": self.kb_summary(),
        }

    def delete_document(self, doc_id: str) -> dict:
        from hierarchy.indexing import delete_documents

        with self._write_lock:
            kb = self._writable_kb()
            removed = delete_documents(kb, [doc_id])
            if removed == 0:  # checked inside the write: another writer may have deleted it meanwhile
                raise DocumentNotFoundError(f"no document {doc_id!r} in the knowledge base")
            self._swap_kb(kb)
        self.metrics.documents(deleted=1)
        return {"deleted": doc_id, "deleted_chunks": removed, "kb": self.kb_summary()}

    def _writable_kb(self):
        from hierarchy.kb import KnowledgeBase

        current = self.base.kb
        return KnowledgeBase.open(current.path, current.embedder)

    def _swap_kb(self, kb) -> None:
        with self._variants_lock:
            for rag in self._variants.values():
                rag.kb = kb

    # ------------------------------------------------------------------ state
    def kb_summary(self) -> dict:
        kb = self.base.kb
        return {"path": str(kb.path), "chunks": len(kb), "documents": len(kb.doc_ids)}

    def health(self) -> dict:
        return {
            "status": "ok",
            "kb": self.kb_summary(),
            "llm": redact(self.llm_spec),  # never an endpoint's password
            "routes": list(ROUTES),
            "style": self.base.style,
            "thresholds": self.base.budget.threshold if self.base.budget else None,
            "queue": self.admission.state(),
        }

    def metrics_dict(self) -> dict:
        return self.metrics.to_dict(queue=self.admission.state())

    def close(self) -> None:
        self.admission.shutdown()


def connect_client(llm) -> None:
    """Build a remote endpoint's client with no call (importing the OpenAI SDK takes a second or
    two on a small machine: the first question must not pay it)."""
    connect = getattr(backend(llm), "connect", None)
    if connect is not None:
        with contextlib.suppress(LogicRouteError):  # no key: the first question says so in one line
            connect()


def load_model(llm) -> None:
    """Load an in-process model by one 1-token call to the backend itself, under every wrapper
    (ObservedLLM, CachedLLM: `inner`): the local model loads on its first call, and a call through
    the cache could be a hit that loads nothing."""
    backend(llm).chat([{"role": "user", "content": "Say OK."}], max_tokens=1)


def backend(llm):
    """The backend under every wrapper (ObservedLLM, CachedLLM: `inner`)."""
    while getattr(llm, "inner", None) is not None:
        llm = llm.inner
    return llm
