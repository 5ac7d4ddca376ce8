"""The logic route under experiment: LogicExperiment is a LogicConfig with a switch for each of
the route's fixed mechanisms (engine.core.routes.logic.config.Mechanisms): the paper's four, each
turned off in turn for its ablation, and the prompt forms and cost cuts measured against them; and
caps of its own where an answer's budget sets none (bench logic relaxes the time). The mechanisms
no preset uses live in training/common/logic_mechanisms.py and reach the route as its hooks.
The bench commands build it (bench logic's systems, bench reader's `preset+FIELD=VALUE` specs) and
pass it where a LogicConfig goes: the route reads its mechanisms from LogicConfig.mechanisms(), which
an experiment answers with its own, so the product's config holds only what a user chooses.

Its defaults are the product's fixed values, so LogicExperiment(**preset fields) answers as the
preset does, and its fingerprint (logic_fingerprint, the one home of logic fingerprints) is the
one the same settings had before the mechanisms were fixed or moved to the lab: stored benchmark
answers stay valid.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

import click

from engine.core.budget import Budget, limits_of
from engine.core.routes.logic.config import FIXED, LOGIC_CAPS, PRESET_CHOICES, PRESETS, LogicConfig, Mechanisms
from training.common.logic_mechanisms import last_hop_chunks, plan_prompt


@dataclass(frozen=True)
class LogicExperiment(LogicConfig):
    """A LogicConfig with the fixed mechanisms as switches (defaults: the product's values)."""

    merge_same_rank: bool = field(
        default=FIXED.merge_same_rank,
        metadata={"help": "graph pruning: one retrieval + one LLM call per topological rank (off: per sub-question)"},
    )
    rolling_memory: bool = field(
        default=FIXED.rolling_memory,
        metadata={
            "help": "context pruning: keep a query-oriented summary instead of raw chunks "
            "(off: raw chunks concatenated)"
        },
    )
    without_replacement: bool = field(
        default=FIXED.without_replacement,
        metadata={"help": "never retrieve a chunk twice for one question, so later retrievals bring new evidence"},
    )
    reflection: bool = field(
        default=FIXED.reflection,
        metadata={"help": "after the DAG is solved, check sufficiency and add sub-questions if evidence is missing"},
    )
    final_chunks: int = field(
        default=0,
        metadata={
            "help": "raw chunks of the last hop (the DAG's single sink) shown to the final answer beside the memory; "
            "0 = memory only, as the paper (more raised the prompt tokens, not F1:"
            " docs/results/design/design_measurements.md)"
        },
    )
    direct_single_hop: bool = field(
        default=FIXED.direct_single_hop,
        metadata={
            "help": "a plan of one node restating the question (one lookup) is answered as the chunk route does: "
            "one retrieval, one answer over the raw chunks; off: step call, memory and reflection as for any DAG"
        },
    )
    evidence_tokens: int = field(
        default=FIXED.evidence_tokens,
        metadata={
            "help": "context compression: a step call sees at most this many tokens of its retrieved chunks per "
            "sub-question, their sentences closest to it by embedding (0 = the whole chunks)"
        },
    )
    compact_examples: bool = field(
        default=False,
        metadata={
            "help": "the decomposition's example plans as text lines in its system message instead of JSON chat "
            "turns (with short_prompts 301 prompt tokens instead of 479; the reply is JSON either way). Measured "
            "on 2Wiki with the local 1.5B model: it copies the lines' content, F1 68.2 -> 54.0"
        },
    )
    plan_questions: bool = field(
        default=False,
        metadata={
            "help": "the plan as a JSON list of sub-question strings (ids by position, dependencies from their #qN "
            "placeholders) instead of objects with an id and depends_on: a shorter prompt and reply; "
            "the short prompt's rules and examples"
        },
    )
    plan_examples: int = field(
        default=0,
        metadata={
            "help": "the decomposition shows only this many example plans, those closest in form to the question "
            "(MiniLM cosine with names and numbers masked) out of all seven; 0 = the prompt's fixed set. Measured "
            "on 2Wiki with the local 1.5B model: it copies the plans shown, F1 -20 (2 shown) and -35 (1), and "
            "the question costs more tokens",
        },
    )
    reflect_notes: bool = field(
        default=FIXED.reflect_notes,
        metadata={
            "help": "show the rolling memory to the reflection call beside the sub-questions' answers "
            "(off: the answers alone, ~150 fewer prompt tokens a reflection at memory_words 150)"
        },
    )

    max_llm_calls: int = field(
        default=LOGIC_CAPS.max_llm_calls,
        metadata={"help": "the experiment's own cap of LLM calls a question (an answer's budget wins)"},
    )
    max_prompt_tokens: int = field(
        default=LOGIC_CAPS.max_prompt_tokens,
        metadata={"help": "the experiment's own cap of prompt tokens a question (an answer's budget wins)"},
    )
    max_seconds: float = field(
        default=LOGIC_CAPS.max_seconds,
        metadata={"help": "the experiment's own cap of seconds a question: bench logic relaxes it (BENCH_MAX_SECONDS)"},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.final_chunks < 0 or self.evidence_tokens < 0 or self.plan_examples < 0:
            raise ValueError(f"bad LogicExperiment: final_chunks, evidence_tokens, plan_examples >= 0 (got {self})")

    def mechanisms(self) -> Mechanisms:
        """The route's mechanisms as this experiment sets them, its caps included; the lab-only ones
        as the route's hooks (training/common/logic_mechanisms.py), none at the product's values."""
        values = {name: getattr(self, name) for name in _SWITCHES}
        caps = Budget(
            max_llm_calls=self.max_llm_calls, max_prompt_tokens=self.max_prompt_tokens, max_seconds=self.max_seconds
        )
        prompt_form = self.compact_examples or self.plan_questions or self.plan_examples
        return Mechanisms(
            **values,
            caps=caps,
            plan_prompt=plan_prompt if prompt_form else None,
            final_chunks=last_hop_chunks if self.final_chunks else None,
        )


# The route's switches (Mechanisms' fields that are values), and every mechanism an experiment sets:
# those and the lab-only ones the route gets as hooks.
_SWITCHES = tuple(f.name for f in fields(Mechanisms) if f.name not in ("caps", "plan_prompt", "final_chunks"))
_MECHANISMS = (*_SWITCHES, "final_chunks", "compact_examples", "plan_questions", "plan_examples")
# The product's mechanisms: an experiment's defaults.
_PRODUCT = {f.name: f.default for f in fields(LogicExperiment) if f.name in _MECHANISMS}


# Settings added after answers were stored, at the value that leaves the route as it was: left out
# of the fingerprint, so adding them kept every stored answer valid (benchmark stores, label runs).
_NEUTRAL = {
    "form_evidence_tokens": 0,
    "plan_forms": False,
    "reflect_unknown_only": False,
    "reshow_best": False,
    "keep_facts": 0,
    "ground_retry": False,
    "cite_passages": False,
    "plan_examples": 0,
}


def logic_fingerprint(cfg: LogicConfig) -> str:
    """Short hash of how a logic answer was made: a LogicConfig's settings with the route's fixed
    mechanisms and default caps (as an experiment holds them), so results stored under other
    settings are not reused and an experiment at a preset's values shares its answers."""
    import hashlib
    import json

    if isinstance(cfg, LogicExperiment):
        values = asdict(cfg)
    else:
        values = {**_PRODUCT, **limits_of(LOGIC_CAPS), **asdict(cfg)}
    kept = {k: v for k, v in values.items() if not (k in _NEUTRAL and v == _NEUTRAL[k])}
    return hashlib.sha1(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:10]


def experiment(base: LogicConfig | str = "paper", **settings) -> LogicExperiment:
    """A LogicExperiment: a preset's settings (its name or a LogicConfig), with `settings` (any
    LogicConfig field or mechanism) on top."""
    config = PRESETS[base] if isinstance(base, str) else base
    return LogicExperiment(**{**{f.name: getattr(config, f.name) for f in fields(config)}, **settings})


def logic_preset_option(f):
    """--logic-preset: the logic route's settings (engine.core.routes.logic.config.PRESETS, or auto)."""
    return click.option(
        "--logic-preset",
        type=click.Choice(PRESET_CHOICES),
        default="auto",
        show_default=True,
        help="the logic route's settings: paper (every mechanism of the paper), lean (the cost cuts), "
        "grounded and lean-grounded (answers tied to the passages read), auto (lean-grounded in both styles)",
    )(f)
