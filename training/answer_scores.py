"""The answer metrics that benchmarks and labels report, each under one name: em, f1,
string_acc (LogicRAG's string accuracy), and for sentence answers rouge_l (ROUGE-L F-measure)
and coverage (answer-token recall); engine.base.metrics defines them all."""

from __future__ import annotations

from collections.abc import Callable

from engine.base.errors import LogicRouteError
from engine.base.metrics import coverage, exact_match, f1, rouge_l, string_acc

METRICS: tuple[str, ...] = ("em", "f1", "string_acc", "rouge_l", "coverage")
# Other spellings accepted as input: label files and `--metric` arguments may say "acc".
ALIASES: dict[str, str] = {"acc": "string_acc"}
_FUNCTIONS: dict[str, Callable[[str, list[str]], float]] = {
    "em": exact_match,
    "f1": f1,
    "string_acc": string_acc,
    "rouge_l": rouge_l,
    "coverage": coverage,
}


def metric_name(name: str) -> str:
    """The metric's one name (an alias resolved), or a LogicRouteError naming the choices."""
    name = ALIASES.get(name, name)
    if name not in METRICS:
        raise LogicRouteError(f"unknown metric {name!r}: choose {', '.join(METRICS)}")
    return name


def metric_fn(name: str) -> Callable[[str, list[str]], float]:
    """The scoring function of a metric name (or alias): fn(prediction, gold answers)."""
    return _FUNCTIONS[metric_name(name)]


def answer_scores(pred: str, golds: list[str]) -> dict[str, float]:
    """Every metric of one prediction against its gold answers, in METRICS order."""
    return {m: _FUNCTIONS[m](pred, golds) for m in METRICS}
