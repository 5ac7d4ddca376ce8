"""A calibrated threshold on P(logic): the thresholds file `logicroute calibrate` writes (Policy)
and the calibration (calibrate_share). The decision itself is engine.core.decide's Decider.

RouteLLM-style calibration: the user's own questions are run through the router once, and
the threshold is the (1 - share) quantile of their P(logic), so about `share` of such
questions go to the expensive route. A token budget is turned into a share first:
share = (budget - cost_cheap) / (cost_logic - cost_cheap), clipped to [0, 1].

Pure Python + numpy: no torch here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from engine.floor.base.errors import LogicRouteError

# Tokens per question of each route, used when no measured costs are given (vanilla top-3 RAG and
# the LogicRAG paper's figure); "summary" is one call over a slightly longer context.
NOMINAL_TOKENS: dict[str, float] = {"chunk": 540.0, "summary": 640.0, "logic": 1780.0}


@dataclass
class Policy:
    """A thresholds file: the threshold on P(route), the share it was calibrated for and how
    (engine.core.budget.Budget.from_policy makes it a budget; engine.core.decide.ThresholdStage applies it)."""

    kind: str = field(default="argmax", metadata={"help": "argmax | threshold"})
    route: str = field(default="logic", metadata={"help": "the expensive route the threshold gates"})
    threshold: float = field(
        default=0.5,
        metadata={"help": "P(route) >= threshold sends the question there; otherwise argmax over the other routes"},
    )
    target_share: float | None = field(default=None, metadata={"help": "share the threshold was calibrated for"})
    token_budget: float | None = field(default=None, metadata={"help": "tokens/question the share was derived from"})
    meta: dict = field(default_factory=dict, metadata={"help": "calibration details (n questions, checkpoint, costs)"})

    def to_dict(self) -> dict:
        return asdict(self)

    def save(self, path: str | Path) -> None:
        from engine.floor.base.files import atomic_write_json

        atomic_write_json(Path(path), self.to_dict())

    @classmethod
    def load(cls, path: str | Path) -> "Policy":
        try:
            d = json.loads(Path(path).read_text())
            return cls(
                **{k: d[k] for k in ("kind", "route", "threshold", "target_share", "token_budget", "meta") if k in d}
            )
        except (OSError, ValueError, TypeError) as e:
            raise LogicRouteError(f"{path}: not a thresholds file ({type(e).__name__}: {e})") from None


def calibrate_share(p_route: Sequence[float], share: float) -> float:
    """Threshold t such that about `share` of the values are >= t (the (1-share) quantile).

    share 0 -> a threshold above every value (never); share 1 -> the minimum (always)."""
    if not 0.0 <= share <= 1.0:
        raise LogicRouteError(f"share must be in [0, 1], got {share}")
    p = np.sort(np.asarray(p_route, dtype=np.float64))[::-1]
    if p.size == 0:
        raise LogicRouteError("calibration needs at least one question")
    k = int(round(share * p.size))
    if k == 0:
        return float(np.nextafter(p[0], np.inf))
    return float(p[k - 1])
