"""The out-of-distribution guard: how far a question is from the questions a router was trained on.

The measure lives in the router's own input space: the embedding of the text the router embeds
(router.features.embedded_text, per RouterConfig.text_form). A question's similarity is its
maximum cosine similarity to a reference set of training-question embeddings stored in the
checkpoint; it is "far" below a threshold set on the training questions themselves:

- each distinct reference row's leave-one-out nearest-neighbour similarity (its nearest other
  row) stands in for a new question drawn from the training distribution;
- the threshold is the THRESHOLD_QUANTILE of those similarities, so about that share of
  in-distribution questions is flagged (the fallback for a flagged question is cheap).

The reference set is capped at MAX_REFERENCE_ROWS rows (a seeded sample), stored as float16.
The threshold is computed on the stored rows after the float16 round trip, so training and
serving measure the same thing.

numpy only: no torch here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.floor.base.errors import CheckpointError

REFERENCE_TENSOR = "ood_reference"
MAX_REFERENCE_ROWS = 2000
THRESHOLD_QUANTILE = 0.02
MEASURE = "max cosine similarity of the embedded text to the training questions' embeddings"


def _unit_rows(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-9)


@dataclass
class OodGuard:
    """A reference set (unit rows, float16 as stored) and the similarity below which a question is far."""

    reference: np.ndarray
    threshold: float
    info: dict  # the card's "ood" entry: measure, quantile, rows, leave-one-out statistics

    def __post_init__(self) -> None:
        self.reference = np.asarray(self.reference, dtype=np.float16)
        self._unit = _unit_rows(self.reference)

    @property
    def dim(self) -> int:
        return int(self.reference.shape[1])

    def similarity(self, embeddings: np.ndarray) -> np.ndarray:
        """(n,) max cosine similarity of each embedding to the reference set."""
        e = _unit_rows(np.asarray(embeddings, dtype=np.float32).reshape(-1, self.dim))
        if len(e) == 0:
            return np.zeros(0, dtype=np.float32)
        return (e @ self._unit.T).max(axis=1)

    def measure(self, embeddings: np.ndarray) -> list[dict]:
        """[{similarity, threshold, far}] per embedding."""
        t = round(float(self.threshold), 4)
        return [
            {"similarity": round(float(s), 4), "threshold": t, "far": bool(s < self.threshold)}
            for s in self.similarity(embeddings)
        ]

    def extended(self, embeddings: np.ndarray, source: str) -> "OodGuard":
        """This guard with more reference rows (questions known to be in scope, `source` names
        them), at the same threshold: a question near them is no longer far."""
        rows = np.asarray(embeddings, dtype=np.float32).reshape(-1, self.dim)
        if not len(rows):
            return self
        reference = np.concatenate([self.reference, _unit_rows(rows).astype(np.float16)])
        added = {**self.info.get("added", {}), source: int(len(rows))}
        return OodGuard(reference, self.threshold, {**self.info, "added": added})

    def card_entry(self) -> dict:
        return {**self.info, "threshold": float(self.threshold), "reference_rows": int(len(self.reference))}

    @classmethod
    def from_checkpoint(cls, reference: np.ndarray | None, card: dict, path: object = "") -> "OodGuard | None":
        """The guard a checkpoint stores, or None when it stores none (older checkpoints)."""
        entry = card.get("ood")
        if reference is None and entry is None:
            return None
        if reference is None or entry is None or "threshold" not in entry:
            raise CheckpointError(
                f"{path}: the out-of-distribution reference set and its card entry do not match "
                f"(tensor {'present' if reference is not None else 'missing'}, card entry "
                f"{'present' if entry is not None else 'missing'})"
            )
        want = card.get("config", {}).get("embed_dim")
        if reference.ndim != 2 or (want is not None and reference.shape[1] != want):
            raise CheckpointError(
                f"{path}: out-of-distribution reference set of shape {tuple(reference.shape)}, expected (rows, {want})"
            )
        return cls(reference, float(entry["threshold"]), entry)


def leave_one_out_similarity(unit: np.ndarray) -> np.ndarray:
    """Each row's cosine similarity to its nearest other row (rows already unit length)."""
    sims = unit @ unit.T
    np.fill_diagonal(sims, -np.inf)
    return sims.max(axis=1)


def build_guard(
    embeddings: np.ndarray,
    *,
    sources: list[str] | None = None,
    max_rows: int = MAX_REFERENCE_ROWS,
    quantile: float = THRESHOLD_QUANTILE,
    seed: int = 0,
) -> OodGuard | None:
    """A guard from training-question embeddings (any order, duplicates allowed). None when
    fewer than two distinct questions remain: no nearest neighbour, no threshold."""
    x = np.asarray(embeddings, dtype=np.float32)
    if x.ndim != 2 or len(x) == 0:
        return None
    # Repeated questions would be each other's nearest neighbour at similarity 1 and lift the threshold.
    distinct = np.unique(_unit_rows(x).astype(np.float16), axis=0)
    n_distinct = len(distinct)
    if n_distinct > max_rows:
        keep = np.sort(np.random.default_rng(seed).choice(len(distinct), size=max_rows, replace=False))
        distinct = distinct[keep]
    if len(distinct) < 2:
        return None
    loo = leave_one_out_similarity(_unit_rows(distinct))
    threshold = float(np.quantile(loo, quantile))
    info = {
        "measure": MEASURE,
        "quantile": quantile,
        "distinct_questions": int(n_distinct),
        "sources": list(sources or []),
        "leave_one_out": {f"p{round(100 * q)}": round(float(np.quantile(loo, q)), 4) for q in (0.01, 0.02, 0.05, 0.5)},
    }
    return OodGuard(distinct, threshold, info)
