"""The records that cross module boundaries: completions, usage, retrieved chunks, the sources
an answer was built on, answers."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from engine.floor.base.trace import Trace

HEADING_SEP = " > "  # between the headings of a heading path ("Title > Section > Subsection")


@dataclass
class Completion:
    """One LLM call's result. `data` is the validated JSON object when a schema was given."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    data: Any = None
    cached: bool = False
    model: str = ""
    original_seconds: float | None = None  # a cache hit: what the call took when it was made
    attempts: int = 1  # requests sent: a structured reply that was retried once took 2
    # prompt tokens the backend computed: a KV-cache prefix hit skips the rest; None = not known
    # (a remote API), counted as every token sent
    prompt_tokens_evaluated: int | None = None
    # natural-log probability of each generated token as the model drew it (the local backend);
    # None = not known. The answer's confidence (engine.floor.llm.base.answer_confidence) reads it.
    token_logprobs: list[float] | None = None
    # why generation stopped: "stop" (the model ended it), "length" (cut off at max_tokens);
    # None = not known (a cache entry made before it was kept, or a backend that does not say)
    finish_reason: str | None = None
    # how a structured reply was asked for when the endpoint refused its schema as a response
    # format: "json_object" (JSON mode, the schema in the system message) or "prompt" (the schema
    # in the system message only); None = the backend's own constraint (llama.cpp grammar,
    # json_schema). call_llm flags it (engine.floor.llm.openai_api).
    structured_via: str | None = None


@dataclass
class Usage:
    """Cost of one answer. Judge/label-scoring calls are never added here."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_calls: int = 0
    llm_seconds: float = 0.0
    llm_seconds_uncached: float = 0.0  # LLM seconds without the cache: a hit counts its original call
    seconds: float = 0.0  # wall seconds of the whole answer, set by the route
    # of prompt_tokens, those the backend computed (the local model reuses a cached prompt
    # prefix); a cache hit counts its original call, as llm_seconds_uncached does
    prompt_tokens_evaluated: int = 0

    def add(self, c: Completion) -> None:
        self.llm_calls += c.attempts
        self.prompt_tokens += c.prompt_tokens
        self.completion_tokens += c.completion_tokens
        self.cached_calls += c.attempts if c.cached else 0  # a kept retried reply replays both requests
        self.llm_seconds += c.seconds
        self.llm_seconds_uncached += (c.original_seconds or 0.0) if c.cached else c.seconds
        self.prompt_tokens_evaluated += (
            c.prompt_tokens if c.prompt_tokens_evaluated is None else c.prompt_tokens_evaluated
        )

    def merge(self, other: "Usage") -> None:
        self.llm_calls += other.llm_calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_calls += other.cached_calls
        self.llm_seconds += other.llm_seconds
        self.llm_seconds_uncached += other.llm_seconds_uncached
        self.prompt_tokens_evaluated += other.prompt_tokens_evaluated
        self.seconds += other.seconds

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict:
        d = asdict(self)
        d["total_tokens"] = self.total_tokens
        return d


@dataclass
class RetrievedChunk:
    """A passage a retrieval returned, with its score: a chunk of a document, or a node of the
    summary layers (kind "summary": chunk_id is the node id, doc_id is empty)."""

    chunk_id: str
    doc_id: str
    title: str
    text: str
    score: float
    kind: str = "chunk"
    heading_path: str = ""  # "Title > Section > Subsection" of a chunk cut along headings
    source: str = ""  # the document's file path or URL, when known
    pages: str = ""  # the PDF pages the chunk's text comes from: "14", "14-15"

    @classmethod
    def of(cls, chunk, score: float) -> "RetrievedChunk":
        """A stored chunk (hierarchy.documents.Chunk) as retrieved with `score`."""
        return cls(
            chunk.id,
            chunk.doc_id,
            chunk.title,
            chunk.text,
            float(score),
            heading_path=getattr(chunk, "heading_path", ""),
            source=getattr(chunk, "source", ""),
            pages=getattr(chunk, "pages", ""),
        )

    @property
    def is_summary(self) -> bool:
        return self.kind == "summary"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Source:
    """One passage an answer was built on, for people to check the answer against.

    n: the number the answer prompt showed it under, so a reader answer's [n] cites it; None
    for a logic-route chunk that only its sub-answers saw (through the rolling memory).
    used_by: the logic route's sub-question ids whose retrieval brought it (empty elsewhere)."""

    n: int | None
    chunk_id: str
    doc_id: str
    title: str
    text: str
    score: float
    kind: str = "chunk"  # chunk | summary
    heading_path: str = ""
    path: str = ""  # the document's file path or URL, when known
    used_by: list[str] = field(default_factory=list)
    pages: str = ""  # the PDF pages of the passage: "14", "14-15"

    @classmethod
    def of(cls, n: int | None, hit: RetrievedChunk, used_by: list[str] | None = None) -> "Source":
        return cls(
            n=n,
            chunk_id=hit.chunk_id,
            doc_id=hit.doc_id,
            title=hit.title,
            text=hit.text,
            score=round(float(hit.score), 4),
            kind=hit.kind,
            heading_path=hit.heading_path,
            path=hit.source,
            used_by=list(used_by or []),
            pages=hit.pages,
        )

    def to_dict(self) -> dict:
        return asdict(self)


def numbered_sources(shown: list[RetrievedChunk]) -> list[Source]:
    """The passages of one prompt as sources, numbered as engine.floor.prompts.passages shows them."""
    return [Source.of(i, hit) for i, hit in enumerate(shown, 1)]


@dataclass
class Answer:
    """What every route returns.

    trace: how the answer was made (engine.floor.base.trace.Trace): its llm_calls [{purpose,
    prompt_tokens, completion_tokens, seconds, cached}], its flags [str] (fallbacks taken,
    visibly), the route's own record in details; a dict given here becomes a Trace."""

    text: str
    route: str
    usage: Usage
    trace: Trace = field(default_factory=Trace)
    route_probs: dict[str, float] | None = None
    sources: list[Source] = field(default_factory=list)  # what the answer was built on

    def __post_init__(self) -> None:
        self.trace = Trace.of(self.trace)

    @property
    def flags(self) -> list[str]:
        return self.trace.flags

    def to_dict(self) -> dict:
        return {
            "text": self.text,
            "route": self.route,
            "route_probs": self.route_probs,
            "usage": self.usage.to_dict(),
            "trace": self.trace.to_dict(),
            "sources": [s.to_dict() for s in self.sources],
        }
