"""The logic route's settings (LogicConfig) and the exception its budget raises."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.base.settings import Settings


@dataclass
class LogicConfig(Settings):
    """Knobs of the logic route. The four switches exist for ablations; all on = the paper."""

    k: int = field(default=3, metadata={"help": "chunks retrieved per sub-question (a merged rank gets k x its size)"})
    max_rounds: int = field(default=3, metadata={"help": "self-reflection rounds at most (each may add sub-questions)"})
    merge_same_rank: bool = field(
        default=True,
        metadata={"help": "graph pruning: one retrieval + one LLM call per topological rank (off: per sub-question)"},
    )
    rolling_memory: bool = field(
        default=True,
        metadata={
            "help": "context pruning: keep a query-oriented summary instead of raw chunks "
            "(off: raw chunks concatenated)"
        },
    )
    without_replacement: bool = field(
        default=True,
        metadata={"help": "never retrieve a chunk twice for one question, so later retrievals bring new evidence"},
    )
    reflection: bool = field(
        default=True,
        metadata={"help": "after the DAG is solved, check sufficiency and add sub-questions if evidence is missing"},
    )
    memory_words: int = field(default=150, metadata={"help": "cap of the rolling memory in words (~ tokens * 0.75)"})
    final_chunks: int = field(
        default=0,
        metadata={
            "help": "raw chunks of the last hop (the DAG's single sink) shown to the final answer beside the memory; "
            "0 = memory only, as the paper (more raised the prompt tokens, not F1:"
            " docs/results/design/design_measurements.md)"
        },
    )
    direct_single_hop: bool = field(
        default=True,
        metadata={
            "help": "a plan of one node restating the question (one lookup) is answered as the chunk route does: "
            "one retrieval, one answer over the raw chunks; off: step call, memory and reflection as for any DAG"
        },
    )
    evidence_tokens: int = field(
        default=0,
        metadata={
            "help": "context compression: a step call sees at most this many tokens of its retrieved chunks per "
            "sub-question, their sentences closest to it by embedding (0 = the whole chunks)"
        },
    )
    form_evidence_tokens: int = field(
        default=0,
        metadata={
            "neutral": 0,
            "help": "context compression for the sub-questions of a form plan only (plan_forms: attribute lookups "
            "such as 'When was #q1 born?', answered by one sentence); 0 = evidence_tokens applies to them too. Why: "
            "compression lost MuSiQue's bridge facts, which sit in long paragraphs of LLM-planned sub-questions",
        },
    )
    short_prompts: bool = field(
        default=False,
        metadata={"help": "the shorter decomposition and step prompts (fewer few-shot examples, shorter rules)"},
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
            "neutral": 0,
            "help": "the decomposition shows only this many example plans, those closest in form to the question "
            "(MiniLM cosine with names and numbers masked) out of all seven; 0 = the prompt's fixed set. Measured "
            "on 2Wiki with the local 1.5B model: it copies the plans shown, F1 -20 (2 shown) and -35 (1), and "
            "the question costs more tokens",
        },
    )
    plan_forms: bool = field(
        default=False,
        metadata={
            "neutral": False,
            "help": "questions of a few fixed forms (two options compared by a date, a same-country or "
            "same-nationality check, a relation chain such as 'When was the director of film X born?') get "
            "their plan from the form, without the decomposition call (hierarchy/question_forms.py); any "
            "other question is decomposed by the LLM",
        },
    )
    reflect_when_unsure: bool = field(
        default=False,
        metadata={
            "help": "skip the reflection call while every sub-question has an answer that a retrieved passage "
            "states (off: reflect after every solved DAG)"
        },
    )
    reflect_unknown_only: bool = field(
        default=False,
        metadata={
            "neutral": False,
            "help": "with reflect_when_unsure: reflect only while a sub-question has no answer (unknown), not when "
            "an answer is merely not found word for word in its passages (2Wiki, 30 questions: 13 of 14 such "
            "reflections found the facts sufficient or proposed sub-questions already asked)",
        },
    )
    reflect_notes: bool = field(
        default=True,
        metadata={
            "help": "show the rolling memory to the reflection call beside the sub-questions' answers "
            "(off: the answers alone, ~150 fewer prompt tokens a reflection at memory_words 150)"
        },
    )
    fold_final: bool = field(
        default=False,
        metadata={
            "help": "short answers only: no final answer call when the answer is already known, i.e. the "
            "date comparison computed in code, or the answer of the DAG's single last sub-question"
        },
    )
    reshow_best: bool = field(
        default=False,
        metadata={
            "neutral": False,
            "help": "sampling without replacement spares each sub-question's best match: a chunk already "
            "retrieved for this question is shown again to a sub-question it matches best, the other k-1 are "
            "new (off: every retrieved chunk is excluded, as the paper; it hid the passage of the next hop)",
        },
    )
    keep_facts: int = field(
        default=0,
        metadata={
            "neutral": 0,
            "help": "memory that keeps what was read: sentences of the passages already read that name a "
            "sub-answer (or sit under its title) are kept beside the memory, at most this many tokens, those "
            "closest to the questions still open first (0 = the memory alone, as the paper)",
        },
    )
    ground_retry: bool = field(
        default=False,
        metadata={
            "neutral": False,
            "help": "a sub-answer that no passage shown for it states is flagged and its sub-question asked "
            "once more over the passages of the whole DAG",
        },
    )
    cite_passages: bool = field(
        default=False,
        metadata={
            "neutral": False,
            "help": "reader style: the final answer is shown, numbered, the passage that states each "
            "sub-answer, so its [n] citations point at listed sources (off: the memory alone)",
        },
    )
    max_llm_calls: int = field(default=12, metadata={"help": "budget: LLM calls per question (final answer included)"})
    max_prompt_tokens: int = field(default=12000, metadata={"help": "budget: prompt tokens per question"})
    max_seconds: float = field(default=300, metadata={"help": "budget: wall seconds per question"})

    def __post_init__(self) -> None:
        if (
            self.k < 1
            or self.max_rounds < 0
            or self.memory_words < 10
            or self.max_llm_calls < 1
            or self.final_chunks < 0
            or self.evidence_tokens < 0
            or self.form_evidence_tokens < 0
            or self.plan_examples < 0
            or self.keep_facts < 0
        ):
            raise ValueError(
                f"bad LogicConfig: k >= 1, max_rounds >= 0, memory_words >= 10, "
                f"max_llm_calls >= 1 and final_chunks, evidence_tokens, form_evidence_tokens, plan_examples, "
                f"keep_facts >= 0 "
                f"are required (got {self})"
            )


# Named settings: "paper" is every mechanism of the paper as LogicConfig's defaults have it (the
# router's answer labels were measured with it); "lean" is the cost-cut route of
# docs/results/logic/bench_logic_forms.md (2Wiki first 30, short answers: F1 71.6 at 1,251 prompt tokens
# a question against 69.2 at 3,228; MuSiQue 29.7 at 2,459 against 27.5 at 3,573).
PRESETS: dict[str, dict] = {
    "paper": {},
    "lean": {
        "evidence_tokens": 0,
        "form_evidence_tokens": 100,
        "short_prompts": True,
        "reflect_when_unsure": True,
        "reflect_unknown_only": True,
        "fold_final": True,
        "memory_words": 150,
        "plan_forms": True,
    },
}
# "grounded": the paper's route with its answers tied to the passages read: a later hop may see
# again the passage an earlier hop read, facts of the passages read survive the memory, a sub-answer
# no passage states is asked again, and a reader answer is shown the passages it cites. Measured in
# the reader style against paper and lean (docs/results/reader/logic_grounded.md).
GROUNDING = {"reshow_best": True, "keep_facts": 120, "ground_retry": True, "cite_passages": True}
PRESETS["grounded"] = {**PRESETS["paper"], **GROUNDING}
PRESETS["lean-grounded"] = {**PRESETS["lean"], **GROUNDING}


# "auto" picks a preset by answer style: lean-grounded for short answers, grounded for the reader
# style. Lean is the cheaper route for short answers: on the answer-label rows (questions 100-199 of
# each set, untuned) it wins the multi-hop sets (MuSiQue F1 24.1 against 19.4, 2Wiki 66.5 against
# 58.3) and loses one-hop NQ (56.2 against 66.0), a loss the router hides
# (docs/results/router/lean_logic_labels.md). The grounding rules fix what both presets got wrong: strict
# sampling without replacement hid a later hop's passage, the memory lost facts read, and a
# reader answer cited passages it never listed (docs/results/reader/logic_grounded.md).
PRESET_FOR_STYLE = {"short": "lean-grounded", "reader": "grounded"}
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
    return LogicConfig(**{**PRESETS[name], **settings})


class BudgetExhausted(Exception):
    """A budgeted LLM call would pass the LogicConfig's limits: stop solving and answer from
    what was found (the final answer has a call in reserve)."""
