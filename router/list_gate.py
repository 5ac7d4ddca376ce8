"""The list gate: does a question ask for a list gathered across a corpus ("Which commands can change
the lockfile?", "Which modules document a 'close' event?")? When it does, the summary route answers
it (its global mode: engine.core.routes.summary_config.mode_for).

A logistic regression over the router's embedding of the question and the `shape` feature (the
answer the question asks for: engine.floor.question.structure.answer_shape), stored in the router's
checkpoint next to the MLP. Why a gate apart from the MLP: trained into the shared three-way
network, the list questions' rows move its chunk-or-logic decisions on other questions (five
seeds with and without them: docs/results/router/list_gate/README.md); the gate leaves the MLP as
it was and decides one thing, from one feature and the embedding.

numpy only, imported on first use: no torch, no scikit-learn here (the fit is
training.fitting.list_gate_fit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.floor.base.errors import CheckpointError

if TYPE_CHECKING:
    import numpy as np

    from engine.floor.question.parse import Question

GATE_TENSOR = "list_gate"  # weights of [embedding ‖ features], then the bias
LIST_ROUTE = "summary"  # the route a list across the corpus goes to (its global mode answers)
LIST_FORM = "list"  # how a decision names what the gate did (engine.core.decide.ListGateStage)


@dataclass
class ListGate:
    """P(a list across the corpus) = sigmoid(w · [embedding ‖ features] + b); fires at `threshold`."""

    weight: np.ndarray  # (embed_dim + feature_dim,)
    bias: float
    features: tuple[str, ...]
    threshold: float
    info: dict  # the card's "list_gate" entry besides features and threshold: how it was trained

    def probs(self, embeddings: np.ndarray, questions: Sequence[str]) -> np.ndarray:
        """(n,) the gate's probability for each question, given the router's embedding of it."""
        import numpy as np

        from router.features import cheap_features

        if not len(questions):
            return np.zeros(0, dtype=np.float32)
        x = np.concatenate([np.asarray(embeddings, dtype=np.float32), cheap_features(questions, self.features)], axis=1)
        if x.shape[1] != self.weight.shape[0]:
            raise CheckpointError(f"list gate expects {self.weight.shape[0]} inputs, got {x.shape[1]}")
        return 1.0 / (1.0 + np.exp(-(x @ self.weight + self.bias)))

    def fires(self, embeddings: np.ndarray, questions: Sequence[str | Question]) -> list[float | None]:
        """Per question its probability when the gate fires, else None. It fires only on a
        question that asks for a list (answer_shape): the global mode answers no other, so a
        question the summary route would answer by the descent stays with the MLP."""
        from engine.floor.question.parse import as_question

        return [
            float(p) if p >= self.threshold and as_question(q).shape == "list" else None
            for p, q in zip(self.probs(embeddings, questions), questions)
        ]

    def tensor(self) -> np.ndarray:
        import numpy as np

        return np.append(self.weight, self.bias).astype(np.float32)

    def card_entry(self) -> dict:
        from router.features import feature_versions

        entry = {"features": list(self.features), "threshold": self.threshold, "route": LIST_ROUTE}
        return entry | {"feature_versions": feature_versions(self.features)} | self.info

    @classmethod
    def from_checkpoint(cls, tensor: np.ndarray | None, card: dict, path) -> "ListGate | None":
        """The gate a checkpoint stores, None when it stores none; CheckpointError when its
        tensor and card entry disagree or its features are computed differently now."""
        import numpy as np

        from router.features import feature_dim, feature_set_problem

        entry = card.get("list_gate")
        if tensor is None and entry is None:
            return None
        if tensor is None or not isinstance(entry, dict) or "threshold" not in entry:
            raise CheckpointError(f"router checkpoint {path}: its list gate has weights or a card entry, not both")
        features = tuple(entry.get("features") or ())
        problem = feature_set_problem(list(features), entry.get("feature_versions"))
        if problem:
            raise CheckpointError(f"router checkpoint {path}: its list gate cannot be served here: {problem}")
        w = np.asarray(tensor, dtype=np.float32).reshape(-1)
        want = int((card.get("config") or {}).get("embed_dim", 0)) + feature_dim(features) + 1
        if w.shape[0] != want:
            raise CheckpointError(f"router checkpoint {path}: its list gate has {w.shape[0]} weights for {want} inputs")
        info = {k: v for k, v in entry.items() if k not in ("features", "threshold", "route", "feature_versions")}
        return cls(w[:-1], float(w[-1]), features, float(entry["threshold"]), info)
