"""An answer's trace: how the answer was made. Trace types the fields the CLI, the page, the
server and the benchmarks read (the LLM calls, the flags, the passages shown, the model's
confidence, the logic route's DAG, the routing decision, the escalation, the absence verdict,
the self-check); the route's own record (the logic route's steps, memory and reflection, the
summary route's descent) stays in `details`.

A route builds its Trace from the start (Trace(route=...)) and writes the typed fields as
attributes; engine.floor.llm.base.call_llm and flag append to `llm_calls` and `flags`; the route's own
record goes in `details`. The parts made above this layer are dataclasses defined where they are
made (the DAG, the decision and its OOD check, the absence verdict, the self-check, the
escalation); the Trace holds them as they are and readers use their attributes. Trace.of still
turns a plain dict into a Trace (an Answer given one: the stand-in routes of the tests and
benchmarks). `to_dict()` is the one JSON form, where each part becomes its own JSON: the keys the
server's and `ask --trace`'s JSON and the benchmark stores have always had. A Trace also reads as
that JSON (trace["dag"], trace.get("steps")), so a route's own keys are read as before."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

# Parts written whenever they hold a value; the decision (with its OOD check, "ood") last.
_OPTIONAL = (
    "retrieved",
    "confidence",
    "fallback_from",
    "citations_dropped",
    "self_check",
    "escalated_from",
    "absence",
)


class Part(Protocol):
    """A typed part of a trace, made above this layer; its JSON is to_dict(). A protocol, not the
    classes: the base layer imports none of the modules above it (pyproject's layer contract)."""

    def to_dict(self) -> dict: ...


class Decided(Protocol):
    """The routing decision (engine.core.decide.Decision): trace() is its JSON in a trace, ood the
    out-of-distribution check (engine.core.ood_policy.OodCheck) or None."""

    route: str
    ood: Part | None

    def trace(self) -> dict: ...


def _json(part: Any) -> Any:
    """A part's JSON; a record's plain value (a stand-in route's dict) as it is."""
    return part.to_dict() if hasattr(part, "to_dict") else part


@dataclass(eq=False)  # equal to any mapping of the same JSON (Mapping.__eq__)
class Trace(Mapping):
    """route: the route that answered; llm_calls: every call [{purpose, prompt_tokens,
    completion_tokens, seconds, cached, ...}] (an escalated answer's name their route); flags:
    fallbacks taken, visibly; retrieved: the passages a cheap route showed [{chunk_id, title,
    score}]; confidence: the model's certainty in a cheap answer (geometric mean token
    probability; where the backend reports it); question, dag: the logic route's question as
    solved and its DAG (engine.core.routes.logic.plan.Dag); fallback_from: the route that handed the
    question on (summary without layers); citations_dropped: a reader answer's [n] that named no
    source; self_check: the self-check's verdict (engine.core.escalation.SelfCheck); escalated_from:
    the attempt a costlier route replaced (engine.core.escalation.Escalated); absence: the evidence
    that kept an answer "not in the documents" final or sent it up the ladder
    (engine.core.absence.AbsenceVerdict); decision: the routing decision (engine.core.decide.Decision), set
    by RoutedRAG, its OOD check the trace's `ood`; details: the route's own record."""

    route: str = ""
    question: str | None = None
    llm_calls: list[dict] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    dag: Part | None = None
    details: dict = field(default_factory=dict)
    retrieved: list[dict] | None = None
    confidence: float | None = None
    fallback_from: str | None = None
    citations_dropped: list[int] | None = None
    self_check: Part | None = None
    escalated_from: Part | None = None
    absence: Part | None = None
    decision: Decided | None = None

    @property
    def ood(self) -> Part | None:
        """The out-of-distribution guard's check of an auto-routed question (the decision's)."""
        return None if self.decision is None else self.decision.ood

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> Trace:
        """A route's record (a dict) as a Trace: its typed keys to fields, the rest to details."""
        if isinstance(record, Trace):
            return record
        typed = {f.name for f in fields(cls)} - {"details"}
        return cls(
            **{k: v for k, v in record.items() if k in typed},
            details={k: v for k, v in record.items() if k not in typed},
        )

    def retrieved_ids(self) -> list[str]:
        """The chunk ids of the passages a cheap route showed (`retrieved`)."""
        return [r["chunk_id"] for r in self.retrieved or [] if isinstance(r, dict) and r.get("chunk_id")]

    def flag(self, message: str) -> None:
        """Record a visible fallback."""
        self.flags.append(message)

    def to_dict(self) -> dict:
        """The trace's JSON: every key that holds a value, the route's own between its calls and
        what the answer was made from."""
        out: dict = {"route": self.route} if self.route else {}
        if self.question is not None:
            out["question"] = self.question
        out |= {"llm_calls": self.llm_calls, "flags": self.flags}
        if self.dag is not None:
            out["dag"] = _json(self.dag)
        out |= self.details
        out |= {k: _json(getattr(self, k)) for k in _OPTIONAL if getattr(self, k) is not None}
        if self.decision is not None:
            out |= {"decision": self.decision.trace(), "ood": _json(self.decision.ood)}
        return out

    # read as its JSON: trace["dag"], trace.get("steps", []), "confidence" in trace
    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())
