"""How a knowledge base retrieves: dense (the embedder's cosine), lexical (BM25 over the chunks'
titles, heading paths and text: hierarchy.lexical) or hybrid, the two fused; and the seam for a
reranker.

Fusion takes the top `depth` of each retriever. "convex" (the default) sums each one's scores,
min-max normalized over its own top list, with the config's weights (Bruch et al., 2023). "rrf"
(Cormack et al., 2009) scores sum_r w_r / (c + rank_r) instead: ranks only, no scores. The
method, weights and constant are the KB's config (manifest "retrieval").

`Reranker` is the seam for a cross-encoder that rescores the fused top-N (KnowledgeBase.reranker),
off by default: none ships with the package.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from engine.floor.base.errors import KBError, LogicRouteError

if TYPE_CHECKING:  # pragma: no cover
    from engine.floor.base.types import RetrievedChunk

DENSE, HYBRID, LEXICAL = "dense", "hybrid", "lexical"
MODES = (DENSE, HYBRID, LEXICAL)
CONVEX, RRF = "convex", "rrf"
FUSIONS = (CONVEX, RRF)


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
    fusion: str = CONVEX
    dense_weight: float = 0.5
    lexical_weight: float = 0.5
    rrf_k: float = 60.0
    depth: int = 50

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def of_manifest(cls, manifest: Mapping) -> RetrievalConfig:
        """The config a manifest records; the defaults where it records none (a KB written before
        lexical retrieval: hybrid once its next write has added the index). An entry that does
        not read is an error, not a silent default: it would change every answer."""
        entry = manifest.get("retrieval")
        if entry is None:
            return cls()
        try:
            d = cls()
            cfg = cls(
                mode=check_mode(str(entry.get("mode", d.mode))),
                fusion=str(entry.get("fusion", d.fusion)),
                dense_weight=float(entry.get("dense_weight", d.dense_weight)),
                lexical_weight=float(entry.get("lexical_weight", d.lexical_weight)),
                rrf_k=float(entry.get("rrf_k", d.rrf_k)),
                depth=int(entry.get("depth", d.depth)),
            )
        except (AttributeError, TypeError, ValueError, LogicRouteError) as e:
            raise KBError(f"the manifest's retrieval entry does not read ({e}): {entry!r}") from e
        bad = cfg.fusion not in FUSIONS or cfg.rrf_k < 0 or cfg.depth < 1
        if bad or min(cfg.dense_weight, cfg.lexical_weight) < 0:
            raise KBError(f"the manifest's retrieval entry is out of range: {entry!r}")
        return cfg


def convex(candidates: Sequence[tuple[np.ndarray, np.ndarray, float]]) -> np.ndarray:
    """Scores of the candidates by a weighted sum of each retriever's scores, min-max normalized
    to [0, 1] over that retriever's own top list. Each (scores of the candidates, scores of the
    retriever's top list, weight); a candidate outside a top list scores what that retriever
    gives it, clipped at its list's worst (0)."""
    total = np.zeros(len(candidates[0][0]))
    for scores, listed, weight in candidates:
        if len(listed):
            lo, hi = float(listed.min()), float(listed.max())
            total += weight * np.clip((scores - lo) / max(hi - lo, 1e-9), 0.0, 1.0)
    return total


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
