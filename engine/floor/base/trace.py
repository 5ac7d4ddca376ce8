"""An answer's trace: how the answer was made. Trace types the fields the CLI, the page, the
server and the benchmarks read (the LLM calls, the flags, the passages shown, the model's
confidence, the logic route's DAG, the routing decision, the escalation); the route's own record
(the logic route's steps, memory and reflection, the summary route's descent) stays in `details`.

A route builds its Trace from the start (Trace(route=...)) and writes the typed fields as
attributes; engine.floor.llm.base.call_llm and flag append to `llm_calls` and `flags`; the route's own
record goes in `details`. Trace.of still turns a plain dict into a Trace (an Answer given one: the
stand-in routes of the tests and benchmarks). `to_dict()` is the one JSON form: the keys the
server's and `ask --trace`'s JSON and the benchmark stores have always had. A Trace also reads as
that JSON (trace["dag"], trace.get("steps")), so a route's own keys are read as before."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

# Keys written whenever they hold a value; "decision" and "ood" are written together (RoutedRAG
# sets both: ood is None for a question routed without the guard).
_OPTIONAL = (
    "retrieved",
    "confidence",
    "fallback_from",
    "citations_dropped",
    "self_check",
    "escalated_from",
    "absence",
)


@dataclass(eq=False)  # equal to any mapping of the same JSON (Mapping.__eq__)
class Trace(Mapping):
    """route: the route that answered; llm_calls: every call [{purpose, prompt_tokens,
    completion_tokens, seconds, cached, ...}] (an escalated answer's name their route); flags:
    fallbacks taken, visibly; retrieved: the passages a cheap route showed [{chunk_id, title,
    score}]; confidence: the model's certainty in a cheap answer (geometric mean token
    probability; where the backend reports it); question, dag: the logic route's question as
    solved and its DAG {nodes, edges, ranks}; fallback_from: the route that handed the question on
    (summary without layers); citations_dropped: a reader answer's [n] that named no source;
    self_check: {answered}; escalated_from: the attempt a costlier route replaced {route, text,
    reason, usage, trace}; absence: the evidence that kept an answer "not in the documents" final
    or sent it up the ladder (engine.core.absence.weigh_absence); decision: {route, policy, ...} and
    ood: the guard's measure, set by RoutedRAG; details: the route's own record."""

    route: str = ""
    question: str | None = None
    llm_calls: list[dict] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    dag: dict | None = None
    details: dict = field(default_factory=dict)
    retrieved: list[dict] | None = None
    confidence: float | None = None
    fallback_from: str | None = None
    citations_dropped: list[int] | None = None
    self_check: dict | None = None
    escalated_from: dict | None = None
    absence: dict | None = None
    decision: dict | None = None
    ood: dict | None = None

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
            out["dag"] = self.dag
        out |= self.details
        out |= {k: getattr(self, k) for k in _OPTIONAL if getattr(self, k) is not None}
        if self.decision is not None:
            out |= {"decision": self.decision, "ood": self.ood}
        return out

    # read as its JSON: trace["dag"], trace.get("steps", []), "confidence" in trace
    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())
