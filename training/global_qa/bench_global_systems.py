"""The systems `logicroute bench global` compares: each a route, the summary layers it reads
(extractive or LLM-written, or none), and its route settings. The summary-route variants of
engine.core.routes.summary_config are systems of their own, so each becomes an ablation row.

All non-logic systems see the same word budget: the chunk route shows k chunks (~150 words each
on a GraphRAG-Bench corpus, so ~450 words at k=3) and every summary system fills
SummaryConfig.context_words = 450.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from engine.core.routes.summary_config import SummaryConfig

if TYPE_CHECKING:  # pragma: no cover
    from engine.floor.base.types import Answer

WIDE_CHUNKS = 9  # the "more chunks" variants: 3x the chunk route's k=3, in the same budget
# Each layer kind is its own KB over the same chunks: (summarizer, build_layers keywords).
# "extractive" is the default build; "extractive-embedded" the old extractive layer
# (every candidate sentence embedded, summaries' text embedded), kept to compare the two.
LAYER_BUILDS: dict[str, tuple[str, dict]] = {
    "extractive": ("extractive", {}),
    "extractive-embedded": ("extractive", {"scoring": "embedded", "node_vectors": "summary"}),
    "extractive-text": ("extractive", {"node_vectors": "summary"}),
    "llm": ("llm", {}),
}
LAYERS = tuple(LAYER_BUILDS)
# The suffix of a variant's name on each layer kind but the default one.
_SUFFIX = {"extractive-embedded": "-embedded", "extractive-text": "-text", "llm": "-llm"}
_ABOUT = {
    "extractive": "extractive layers",
    "extractive-embedded": "the old extractive layers: every sentence embedded, node vectors the summaries'",
    "extractive-text": "extractive layers, node vectors the summaries' embeddings (an ablation)",
    "llm": "LLM-written layers",
}


@dataclass(frozen=True)
class System:
    name: str
    route: str  # chunk | summary | logic
    layers: str  # which KB answers it: a LAYERS kind (the chunk and logic routes read its chunks only)
    summary: SummaryConfig | None = None
    about: str = ""


# The summary-route variants, each on every layer kind: extractive (name), name-llm, name-embedded...
_VARIANTS: dict[str, tuple[SummaryConfig, str]] = {
    "summary": (
        SummaryConfig(mode="descend"),
        "descend from the top: the best summaries, then the k chunks under them",
    ),
    "summary-l1": (
        SummaryConfig(mode="descend", start_level=1),
        "the best level-1 summaries over all of them (no descent from the top), then the k chunks under them",
    ),
    "summary-only": (
        SummaryConfig(mode="descend", answer_from="summaries"),
        "the summaries the descent chose, alone (no chunk)",
    ),
    "summary-wide": (
        SummaryConfig(mode="descend", wide_chunks=WIDE_CHUNKS),
        f"the descent, then {WIDE_CHUNKS} chunks under the summaries, cut to their best sentences",
    ),
    "collapsed": (
        SummaryConfig(mode="descend", collapsed=True),
        "RAPTOR's collapsed tree: summaries of every level and chunks ranked together",
    ),
}


def _systems() -> dict[str, System]:
    out = {
        "chunk": System("chunk", "chunk", "extractive", about="the top k chunks (the baseline)"),
        # Start level 0 is the chunks: the same widening without any summary, to tell what the
        # summaries add from what more (shorter) chunks add.
        "chunk-wide": System(
            "chunk-wide",
            "summary",
            "extractive",
            SummaryConfig(mode="descend", start_level=0, wide_chunks=WIDE_CHUNKS),
            f"the top {WIDE_CHUNKS} chunks cut to their best sentences, no summary (a control)",
        ),
    }
    for name, (cfg, about) in _VARIANTS.items():
        out[name] = System(name, "summary", "extractive", cfg, f"{about}; {_ABOUT['extractive']}")
        for kind, suffix in _SUFFIX.items():
            out[f"{name}{suffix}"] = System(f"{name}{suffix}", "summary", kind, cfg, f"{about}; {_ABOUT[kind]}")
    out["logic"] = System("logic", "logic", "extractive", about="LogicRAG DAG (bench logic's 'logic' settings)")
    out["logic-lean"] = System("logic-lean", "logic", "extractive", about="the lean logic route (bench logic's)")
    out["logic-lean-forms-compressed"] = System(
        "logic-lean-forms-compressed", "logic", "extractive", about="the lean logic preset (bench logic's row)"
    )
    return out


SYSTEMS: dict[str, System] = _systems()
# The issue's five systems and the variants' ablation rows; summary-wide-llm and logic-lean on request.
DEFAULT_SYSTEMS: tuple[str, ...] = (
    "chunk",
    "chunk-wide",
    "summary",
    "summary-only",
    "summary-wide",
    "collapsed",
    "summary-llm",
    "summary-only-llm",
    "collapsed-llm",
    "logic",
)


def check_systems(names) -> tuple[str, ...]:
    """Known system names, deduplicated, in the given order; a ValueError names the known ones."""
    names = tuple(dict.fromkeys(names))
    bad = [n for n in names if n not in SYSTEMS]
    if bad or not names:
        raise ValueError(f"unknown system(s) {bad}: choose from {', '.join(SYSTEMS)}")
    return names


def system_settings(system: System, k: int, wide_chunks: int, logic_max_seconds: float):
    """(route settings object, fingerprint): a result is reused only under the same settings."""
    if system.route == "chunk":
        return None, f"chunk-k{k}"
    if system.route == "summary":
        cfg = system.summary or SummaryConfig(mode="descend")
        if cfg.wide_chunks:
            cfg = replace(cfg, wide_chunks=wide_chunks)
        return cfg, f"summary-{system.layers}-k{k}-{cfg.fingerprint()}"
    from training.bench.bench_logic import system_config
    from training.common.logic_experiment import logic_fingerprint

    cfg = system_config(system.name, k, max_seconds=logic_max_seconds)
    return cfg, f"logic-k{k}-{logic_fingerprint(cfg)}"


def answer_with(system: System, settings, question: str, kb, llm, k: int, style: str) -> "Answer":
    """One answer of `system` (settings from system_settings) in `style`."""
    from engine.core.routes import RouteContext, SummaryRoute, answer_on, make_route
    from engine.core.routes.common import check_question

    if system.route == SummaryRoute.name:  # as measured: a reader answer's citations are kept as written
        from engine.core.routes.summary import answer_summary

        return answer_summary(check_question(question), kb, llm, k=k, style=style, config=settings)
    return answer_on(make_route(system.route, settings), question, RouteContext(kb, llm, k, style))
