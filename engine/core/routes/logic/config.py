"""The logic route's settings (LogicConfig) and the exception its budget raises."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from engine.core.budget import LIMITS, Budget
from engine.floor.base.settings import Settings

if TYPE_CHECKING:
    from engine.floor.base.types import RetrievedChunk
    from engine.floor.prompts.logic import PlanPrompt

# What one logic answer may spend where its budget (engine.core.budget.Budget, the one home of limits:
# RagConfig.budget, a request's limits) sets no limit: the final answer has a call in reserve.
LOGIC_CAPS = Budget(max_llm_calls=12, max_prompt_tokens=12000, max_seconds=300)


@dataclass(frozen=True)
class Mechanisms:
    """How the route works, the same in every preset: the paper's four (graph pruning by merging a
    rank's sub-questions, context pruning by the rolling memory, sampling without replacement,
    self-reflection) on, the rest as measured best, and what an answer may spend where its budget
    sets no limit. Not settings: a user picks a preset (LogicConfig); experiments vary these
    (training/common/logic_experiment.py, whose LogicExperiment answers LogicConfig.mechanisms()).
    The hooks are for what only experiments try: the route has none of its own."""

    merge_same_rank: bool = True
    rolling_memory: bool = True
    without_replacement: bool = True
    reflection: bool = True
    direct_single_hop: bool = True  # a one-lookup plan is answered as the chunk route does
    evidence_tokens: int = 0  # a step call's passages compressed to this many tokens (0: whole)
    reflect_notes: bool = True  # the reflection call sees the rolling memory
    caps: Budget = LOGIC_CAPS
    # Each hook is given the route's SolveState (Any: the state module imports this one).
    # the decomposition's prompt for a question (None: PlanPrompt(short_prompts))
    plan_prompt: Callable[[Any], PlanPrompt] | None = None
    # raw chunks shown to the final answer beside the rolling memory (None: the memory alone)
    final_chunks: Callable[[Any], list[RetrievedChunk]] | None = None


FIXED = Mechanisms()


def caps(cfg: "LogicConfig", budget: Budget | None) -> Budget:
    """The limits of one logic answer: each of the budget's, else the mechanisms' caps (LOGIC_CAPS,
    or an experiment's own: bench logic relaxes the time)."""
    own = cfg.mechanisms().caps

    def pick(name: str):
        given = (getattr(budget, name, None), getattr(own, name, None), getattr(LOGIC_CAPS, name))
        return next(v for v in given if v is not None)

    return Budget(**{name: pick(name) for name in LIMITS})


@dataclass(frozen=True)
class LogicConfig(Settings):
    """What a user chooses for the logic route: a preset (PRESETS) with k on top. The presets are
    named values of it; the mechanisms they share are Mechanisms (FIXED); what an answer may spend
    is its Budget (caps)."""

    k: int = field(default=3, metadata={"help": "chunks retrieved per sub-question (a merged rank gets k x its size)"})
    max_rounds: int = field(default=3, metadata={"help": "self-reflection rounds at most (each may add sub-questions)"})
    memory_words: int = field(default=150, metadata={"help": "cap of the rolling memory in words (~ tokens * 0.75)"})
    form_evidence_tokens: int = field(
        default=0,
        metadata={
            "help": "context compression for a form plan's sub-questions only (0 = whole passages)",
        },
    )
    short_prompts: bool = field(
        default=False,
        metadata={"help": "the shorter decomposition and step prompts (fewer few-shot examples, shorter rules)"},
    )
    plan_forms: bool = field(
        default=False,
        metadata={
            "help": "questions of a few fixed forms get their plan from the form (engine/floor/question/forms.py)",
        },
    )
    reflect_when_unsure: bool = field(
        default=False,
        metadata={"help": "skip reflection while every sub-answer is stated by a retrieved passage"},
    )
    reflect_unknown_only: bool = field(
        default=False,
        metadata={
            "help": "with reflect_when_unsure: reflect only while a sub-question has no answer",
        },
    )
    fold_final: bool = field(
        default=False,
        metadata={"help": "short answers: no final answer call when the answer is already known"},
    )
    reshow_best: bool = field(
        default=False,
        metadata={
            "help": "sampling without replacement spares each sub-question's best match (off: as the paper)",
        },
    )
    keep_facts: int = field(
        default=0,
        metadata={
            "help": "tokens of read sentences naming a sub-answer kept beside the memory (0: as the paper)",
        },
    )
    ground_retry: bool = field(
        default=False,
        metadata={
            "help": "a sub-answer no passage states is asked once more over the whole DAG's passages",
        },
    )
    cite_passages: bool = field(
        default=False,
        metadata={
            "help": "reader style: the final answer is shown the numbered passage stating each sub-answer",
        },
    )

    def __post_init__(self) -> None:
        if (
            self.k < 1
            or self.max_rounds < 0
            or self.memory_words < 10
            or self.form_evidence_tokens < 0
            or self.keep_facts < 0
        ):
            raise ValueError(
                f"bad LogicConfig: k >= 1, max_rounds >= 0, memory_words >= 10 and form_evidence_tokens, "
                f"keep_facts >= 0 are required (got {self})"
            )

    def mechanisms(self) -> Mechanisms:
        """How the route works under this config: the fixed mechanisms (an experiment's own in training/)."""
        return FIXED


# Named settings: "paper" is every mechanism of the paper as LogicConfig's defaults have it; "lean"
# cuts the cost (docs/results/logic/bench_logic_forms.md).
PAPER = LogicConfig()
LEAN = LogicConfig(
    form_evidence_tokens=100,
    short_prompts=True,
    reflect_when_unsure=True,
    reflect_unknown_only=True,
    fold_final=True,
    memory_words=150,
    plan_forms=True,
)
# "grounded": the paper's route with its answers tied to the passages read: a later hop may see
# again the passage an earlier hop read, facts of the passages read survive the memory, a sub-answer
# no passage states is asked again, and a reader answer is shown the passages it cites.
GROUNDING = {"reshow_best": True, "keep_facts": 120, "ground_retry": True, "cite_passages": True}
PRESETS: dict[str, LogicConfig] = {
    "paper": PAPER,
    "lean": LEAN,
    "grounded": replace(PAPER, **GROUNDING),
    "lean-grounded": replace(LEAN, **GROUNDING),
}


# "auto": lean-grounded in both styles. In the reader style it held a gold answer more often than
# grounded on 2Wiki and MuSiQue questions 0-29 at 70% of its tokens (docs/results/reader/logic_grounded.md).
PRESET_FOR_STYLE = {"short": "lean-grounded", "reader": "lean-grounded"}
PRESET_CHOICES = ("auto", *PRESETS)


def resolve_preset(name: str, style: str) -> str:
    """The preset `name` means for answers in `style`: "auto" by PRESET_FOR_STYLE, else itself."""
    if name == "auto":
        return PRESET_FOR_STYLE[style]
    if name not in PRESETS:
        raise ValueError(f"unknown logic preset {name!r}: one of {', '.join(PRESET_CHOICES)}")
    return name


def preset_config(name: str, **settings) -> LogicConfig:
    """The LogicConfig of preset `name`, with `settings` (k, budgets, ...) on top."""
    if name not in PRESETS:
        raise ValueError(f"unknown logic preset {name!r}: one of {', '.join(PRESETS)}")
    return replace(PRESETS[name], **settings)


class BudgetExhausted(Exception):
    """A budgeted LLM call would pass the LogicConfig's limits: stop solving and answer from
    what was found (the final answer has a call in reserve)."""


class TimeExhausted(BudgetExhausted):
    """BudgetExhausted by the time limit. A final answer it stops before any sub-answer was found
    is no answer at all: the route then ends as a call the limit cut would (DeadlineError), never
    with a blank answer."""


class TokensExhausted(BudgetExhausted):
    """BudgetExhausted by the prompt-token limit: the prompt it refused was never read, so what it
    was to show (a step's passages) is no evidence either."""
