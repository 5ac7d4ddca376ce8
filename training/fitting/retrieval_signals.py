"""What the chunk route's own top-k search knows before any LLM call, per label row: the signals
the router could read after retrieval and before answering (issue: a router that generalizes).

`eval-router --lodo --kb-root DIR` adds them to its ranking check: does any of them rank, within a
left-out set, the questions where logic beats chunk above the others? Each label row is searched
again in the KB it was answered from (DIR/<set>, the folders training/data/make_answer_labels.sh
builds), the question as asked, k as the row's own.

| signal | what |
|---|---|
| top_score | cosine of the best chunk |
| score_gap | best minus k-th cosine (a flat top-k: no passage stands out) |
| word_coverage | share of the question's content words found in the top-k text |
| entity_coverage | share of the question's names (engine.floor.question.structure.entity_spans) in the top-k (1 if none) |
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from engine.floor.base.errors import LogicRouteError
from engine.floor.question.structure import entity_spans

SIGNALS = ("top_score", "score_gap", "word_coverage", "entity_coverage")
# Function words of 3+ letters (shorter words are dropped anyway): what remains names the topic.
_STOP = frozenset(
    ("the", "and", "for", "was", "were", "are", "with", "from", "that", "this", "which", "who", "whom", "whose")
    + ("what", "when", "where", "why", "how", "did", "does", "its", "his", "her", "their", "has", "have", "had", "than")
)


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2 and w not in _STOP}


def signals_of(question: str, hits: Sequence) -> dict[str, float]:
    """The signals of one search's hits (RetrievedChunk: .score, .title, .text), best first."""
    if not hits:
        return {"top_score": 0.0, "score_gap": 0.0, "word_coverage": 0.0, "entity_coverage": 0.0}
    text = " ".join(f"{h.title or ''} {h.text}" for h in hits).lower()
    found = content_words(text)
    words = content_words(question)
    spans = entity_spans(question)
    return {
        "top_score": float(hits[0].score),
        "score_gap": float(hits[0].score - hits[-1].score),
        "word_coverage": sum(w in found for w in words) / len(words) if words else 1.0,
        "entity_coverage": sum(s.lower() in text for s in spans) / len(spans) if spans else 1.0,
    }


def kb_folder(kb_root: str | Path, dataset: str) -> Path:
    """DIR/<set>: GraphRAG-Bench sets (dataset 'graphrag_medical') under their source name."""
    return Path(kb_root) / dataset.removeprefix("graphrag_")


def row_signals(rows: Sequence[dict], kb_root: str | Path, embedder) -> dict[str, np.ndarray]:
    """{signal: value per row} from one batched search per set; a missing KB is a one-line error."""
    from hierarchy.kb import KnowledgeBase

    out = {s: np.zeros(len(rows)) for s in SIGNALS}
    by_set: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_set.setdefault(row["dataset"], []).append(i)
    for dataset, ix in by_set.items():
        folder = kb_folder(kb_root, dataset)
        if not KnowledgeBase.exists(folder):
            raise LogicRouteError(
                f"no knowledge base for {dataset} at {folder}: --kb-root names the folder holding one KB per "
                "label set (training/data/make_answer_labels.sh builds them under runs/labels_kb)"
            )
        kb = KnowledgeBase.open(folder, embedder=embedder)
        k = int(rows[ix[0]].get("k") or 3)
        for i, hits in zip(ix, kb.search_batch([rows[i]["question"] for i in ix], k=k)):
            for name, value in signals_of(rows[i]["question"], hits).items():
                out[name][i] = value
    return out
