"""The summary route's settings (SummaryConfig): how its context is chosen from the summary
layers. The defaults descend from the top level and show the summaries and the k chunks under
them (450 words); the other values are variants `logicroute bench global` compares."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING

from engine.floor.base.errors import LogicRouteError
from engine.floor.base.settings import Settings

if TYPE_CHECKING:
    from engine.floor.question.parse import Question

# What the context is made of: "descend" shows the best summaries and the chunks under them;
# "summaries" shows the summaries alone, the way a global question might want an overview.
ANSWER_FROM = ("descend", "summaries")
# How the route answers: "descend" picks one context and makes one answer call (as measured on
# GraphRAG-Bench); "global" maps short passages from many documents and lists the items found
# (engine.core.routes.summary_global), for questions whose answer is a set spread over the corpus;
# "auto" takes global for a question asking for a list (engine.floor.question.structure.answer_shape)
# and the descent for any other.
MODES = ("auto", "descend", "global")
GLOBAL_MODE = "global"
MAX_MAP_CALLS = 6  # the bound on a global answer's calls with the local model
BREADTH_STOPS = ("no-new-item", "bound")  # engine.core.routes.summary_breadth
GLOBAL_ONLY = ("breadth_calls", "breadth_stop")  # added after the descent's answers were stored


@dataclass(frozen=True)
class SummaryConfig(Settings):
    """Knobs of the summary route's retrieval (k, the answer style and the LLM are passed apart,
    as every route takes them)."""

    start_level: int | None = field(
        default=None,
        metadata={"help": "level the descent starts at (default: the top; 0 searches the chunks directly)"},
    )
    collapsed: bool = field(
        default=False,
        metadata={"help": "RAPTOR's collapsed tree: every level and the chunks ranked together, not descended"},
    )
    answer_from: str = field(
        default="descend",
        metadata={"help": "descend: the best summaries and the chunks under them; summaries: the summaries alone"},
    )
    context_words: int = field(
        default=450,
        metadata={"help": "word budget of the passages shown (what the chunk route shows at k=3 of ~150 words)"},
    )
    wide_chunks: int = field(
        default=0,
        metadata={"help": "0: the k best chunks; N > k: N chunks cut to their sentences closest to the question"},
    )

    mode: str = field(
        default="auto",
        metadata={
            "help": "descend: one context from the layers, one answer call; global: map calls over short "
            "passages from many documents, the items found listed with their sources; auto: global for a "
            "question asking for a list, descend for any other",
            "neutral": "descend",
        },
    )
    map_calls: int = field(
        default=2,
        metadata={"help": f"global mode: at most this many map calls (1..{MAX_MAP_CALLS})", "neutral": 2},
    )
    map_tokens: int = field(
        default=700,
        metadata={"help": "global mode: estimated passage tokens shown to one map call", "neutral": 700},
    )
    passage_words: int = field(
        default=30,
        metadata={"help": "global mode: each chunk cut to this many words of its best lines", "neutral": 30},
    )
    # Breadth that follows the evidence (engine.core.routes.summary_breadth): 0 is the mode as it was,
    # map_calls batches whatever the corpus.
    breadth_calls: int = field(
        default=5,
        metadata={
            "help": "global mode: when pages holding the question's evidence words were not shown, read "
            f"more batches, one passage a page, up to this many map calls in all (0: never; ..{MAX_MAP_CALLS})",
            "neutral": 0,
        },
    )
    breadth_stop: str = field(
        default="no-new-item",
        metadata={
            "help": "global mode: no-new-item stops reading more batches at the first that names no new "
            "item; bound reads until breadth_calls or the evidence runs out",
            "neutral": "no-new-item",
        },
    )

    def fingerprint_values(self) -> dict:
        """Every field, less the global mode's breadth for the descent, which it never reads: the
        descent's stored answers stay valid whatever the global mode's default."""
        values = super().fingerprint_values()
        if self.mode == "descend":
            for name in GLOBAL_ONLY:
                values.pop(name)
        return values

    def __post_init__(self) -> None:
        problems = []
        if self.mode not in MODES:
            problems.append(f"mode must be one of {', '.join(MODES)} (got {self.mode!r})")
        if not 1 <= self.map_calls <= MAX_MAP_CALLS or self.map_tokens < 50 or self.passage_words < 5:
            problems.append(f"map_calls in 1..{MAX_MAP_CALLS}, map_tokens >= 50 and passage_words >= 5 are required")
        if self.breadth_calls and not self.map_calls <= self.breadth_calls <= MAX_MAP_CALLS:
            problems.append(f"breadth_calls is 0 or in map_calls..{MAX_MAP_CALLS} (got {self.breadth_calls})")
        if self.breadth_stop not in BREADTH_STOPS:
            problems.append(f"breadth_stop must be one of {', '.join(BREADTH_STOPS)} (got {self.breadth_stop!r})")
        if self.mode == GLOBAL_MODE and (self.collapsed or self.wide_chunks or self.answer_from != "descend"):
            problems.append(
                "mode='global' gathers its own passages: collapsed, wide_chunks and answer_from do not apply"
            )
        if self.answer_from not in ANSWER_FROM:
            problems.append(f"answer_from must be one of {', '.join(ANSWER_FROM)} (got {self.answer_from!r})")
        if self.context_words < 1 or self.wide_chunks < 0:
            problems.append("context_words >= 1 and wide_chunks >= 0 are required")
        # Combinations that would silently mean something else are refused, not reinterpreted.
        if self.wide_chunks and self.answer_from == "summaries":
            problems.append("wide_chunks needs chunks: answer_from='summaries' shows none")
        if self.wide_chunks and self.collapsed:
            problems.append("wide_chunks applies to the descent: the collapsed tree fills its budget already")
        if self.answer_from == "summaries" and self.start_level == 0:
            problems.append("answer_from='summaries' needs a summary level: start_level 0 is the chunks")
        if problems:
            raise LogicRouteError("bad SummaryConfig: " + "; ".join(problems))


def summary_config(config: SummaryConfig | None, options: dict) -> SummaryConfig:
    """`config` (default: SummaryConfig()) with `options` (field name -> value) put over it; an
    unknown option name is a LogicRouteError naming the known ones."""
    unknown = set(options) - {f.name for f in fields(SummaryConfig)}
    if unknown:
        known = ", ".join(f.name for f in fields(SummaryConfig))
        raise LogicRouteError(f"unknown summary route option(s) {sorted(unknown)}: known are {known}")
    return replace(config or SummaryConfig(), **options)


def mode_for(cfg: SummaryConfig, question: "str | Question", kb=None) -> tuple[str, str]:
    """(the mode that answers `question` on `kb`, why): cfg.mode, or for "auto" the global mode
    for a question asking for a list over a KB of multi-passage documents, else the descent."""
    if cfg.mode != "auto":
        return cfg.mode, f"mode={cfg.mode} was set"
    from engine.floor.question.parse import as_question
    from hierarchy.kb_manifest import single_passage_ratio

    if as_question(question).shape != "list":
        return "descend", "the question asks for no list"
    if cfg.collapsed or cfg.wide_chunks or cfg.answer_from != "descend":
        return "descend", "a variant of the descent was set (collapsed, wide_chunks or answer_from)"
    per_document = single_passage_ratio(getattr(kb, "manifest", None))
    if per_document is not None:
        return "descend", (
            f"the question asks for a list, but the KB's documents are single passages "
            f"({per_document:.1f} chunks a document): no documents to gather it across"
        )
    return GLOBAL_MODE, "the question asks for a list"
