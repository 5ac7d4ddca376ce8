"""Questions written from a knowledge base's own chunks, each with its answer and supporting
chunk ids known by construction: what `logicroute adapt` labels and fine-tunes a specialist on
(issue 43). Kinds: single (one chunk), bridge (two hops: chunk A names the subject of chunk B),
comparison (two entities on one attribute) and overview (one summary node)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

KINDS = ("single", "bridge", "comparison", "overview")


@dataclass(frozen=True)
class WrittenQuestion:
    id: str  # stable across reruns: kind + a hash of the chunk ids it was written from
    kind: str  # one of KINDS
    question: str
    answer: str  # the constructed short answer
    chunk_ids: tuple[str, ...]  # the KB chunks it was written from
    titles: tuple[str, ...]  # their document titles


@dataclass
class WritingReport:
    written: Counter[str] = field(default_factory=Counter)  # by kind: questions the LLM wrote
    kept: Counter[str] = field(default_factory=Counter)  # by kind
    rejected: Counter[str] = field(default_factory=Counter)  # by reason
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # kinds skipped and why, limits reached


def write_questions(
    kb,
    llm,
    *,
    n: int,
    out: Path,
    kinds: Mapping[str, float] | None = None,
    seed: int = 0,
    minutes: float | None = None,
    progress: bool = True,
) -> tuple[list[WrittenQuestion], WritingReport]:
    """Write up to n kept questions from the KB's chunks into `out` (JSONL, one row per attempt:
    kept or rejected with its reason); a rerun reads `out` and continues."""
    raise NotImplementedError("being written (issue 43)")
