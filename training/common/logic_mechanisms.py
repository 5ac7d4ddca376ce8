"""The logic route's mechanisms that only experiments turn on, as the hooks a LogicExperiment hands
the route (engine.core.routes.logic.config.Mechanisms): the decomposition's other prompt forms (its
example plans as text lines, the plan as a list of question strings, only the example plans
nearest in form to the question) and the last hop's raw chunks beside the rolling memory. Each was
measured no better than the route's own (the help of LogicExperiment's fields says by how much),
so no preset sends them and the product holds none of them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.core.routes.logic.final_answer import sinks
from engine.core.routes.logic.plan import placeholders
from engine.floor.prompts.logic import (
    DECOMPOSE_EXAMPLES,
    DECOMPOSE_MAX_ITEMS,
    DECOMPOSE_SYSTEM,
    DECOMPOSE_SYSTEM_SHORT,
    SHORT_EXAMPLES,
    PlanPrompt,
    decompose_schema,
    plan_json,
    retry_turn,
)
from engine.floor.question.structure import mask_entities

if TYPE_CHECKING:
    from engine.core.routes.logic.state import SolveState
    from engine.floor.base.types import RetrievedChunk

# The question-list plan (plan_questions): the reply is a JSON list of sub-question strings; ids
# follow their position and dependencies are the #qN placeholders, so the ids and depends_on lists
# (a third of the examples' tokens, and of the reply's) are never written.
DECOMPOSE_SYSTEM_QUESTIONS = (
    "Split the question into sub-questions, each asking one fact about one named thing. A thing "
    "described through another (the director of film X) gets its own sub-question first; a later "
    "sub-question writes #q1 for the answer of the first sub-question, #q2 for the second. A question "
    "about one named thing stays whole. Never add a sub-question that only compares answers."
)

# Every example plan's question, in the prompt's order: the pool plan_examples picks from.
DECOMPOSE_EXAMPLE_QUESTIONS = tuple(q for q, _ in DECOMPOSE_EXAMPLES)


def _plan_questions_json(nodes: list[tuple[str, str, list[str]]]) -> str:
    return json.dumps({"subquestions": [q for _, q, _ in nodes]}, separators=(",", ":"))


def _plan_lines(nodes: list[tuple[str, str, list[str]]]) -> str:
    """A plan as text lines, "q2 (after q1): What is the date of birth of #q1?": the compact
    examples' form, a third of the tokens of the JSON the reply must use."""
    lines = []
    for i, q, d in nodes:
        after = f" (after {', '.join(d)})" if d else ""
        lines.append(f"{i}{after}: {q}")
    return "\n".join(lines)


def decompose_messages(
    question: str,
    short: bool = False,
    compact: bool = False,
    questions: bool = False,
    examples: Sequence[str] | None = None,
) -> list[dict]:
    """The plan prompt in any form an experiment tries: the examples as chat turns in JSON, or
    (compact) as text lines inside the system message; the reply's form is the schema's either way.
    `questions`: the short prompt's examples as lists of sub-question strings
    (decompose_schema(questions=True)); compact does not apply to them. `examples`: show only the
    example plans of these questions (of DECOMPOSE_EXAMPLE_QUESTIONS, kept in the prompt's order)
    instead of the prompt's own set. With none of them, the route's own prompt."""
    if questions:
        system, render = DECOMPOSE_SYSTEM_QUESTIONS, _plan_questions_json
    else:
        system, render = (DECOMPOSE_SYSTEM_SHORT if short else DECOMPOSE_SYSTEM), plan_json
    short = short or questions
    wanted = set(examples) if examples is not None else set(SHORT_EXAMPLES if short else DECOMPOSE_EXAMPLE_QUESTIONS)
    chosen = [(q, nodes) for q, nodes in DECOMPOSE_EXAMPLES if q in wanted]
    if compact and not questions:
        shown = "\n\n".join(f"Question: {q}\n{_plan_lines(nodes)}" for q, nodes in chosen)
        system += f" In these examples, (after q1) means q1 is in depends_on:\n\n{shown}"
        return [{"role": "system", "content": system}, {"role": "user", "content": f"Question: {question}"}]
    msgs: list[dict] = [{"role": "system", "content": system}]
    for q, nodes in chosen:
        msgs += [{"role": "user", "content": f"Question: {q}"}, {"role": "assistant", "content": render(nodes)}]
    msgs.append({"role": "user", "content": f"Question: {question}"})
    return msgs


def questions_schema(max_items: int = DECOMPOSE_MAX_ITEMS) -> dict:
    """The question-list plan's reply: a list of sub-question strings."""
    item = {"type": "string", "minLength": 3, "maxLength": 300}
    plan = {"type": "array", "minItems": 1, "maxItems": max_items, "items": item}
    return {
        "type": "object",
        "properties": {"subquestions": plan},
        "required": ["subquestions"],
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class ExperimentPlanPrompt(PlanPrompt):
    """The decomposition's prompt as an experiment sets it (decompose_messages' forms)."""

    compact: bool = False
    questions: bool = False
    examples: Sequence[str] | None = None

    def messages(self, question: str) -> list[dict]:
        return decompose_messages(question, self.short, self.compact, self.questions, self.examples)

    def retry_messages(self, question: str, bad_reply: str, problems: list[str]) -> list[dict]:
        msgs = self.messages(question)
        rule = "may only use the answers of earlier ones" if self.questions else "may only depend on earlier ids"
        msgs[-1] = retry_turn(question, bad_reply, problems, rule)
        return msgs

    def schema(self) -> dict:
        return questions_schema() if self.questions else decompose_schema()

    def items(self, data: dict) -> list[dict]:
        """A question string's id is q1, q2, ... by position; its dependencies are its placeholders."""
        return [
            {"id": f"q{i}", "question": s, "depends_on": placeholders(s)} if isinstance(s, str) else s
            for i, s in enumerate(data["subquestions"], 1)
        ]


def nearest_examples(question: str, embedder, n: int) -> list[str]:
    """The n example plans' questions closest in form to `question`: cosine of their MiniLM
    vectors with names, titles and numbers masked (engine.floor.question.structure.mask_entities), so that
    "When was the director of film X born?" meets the examples that chain through a director,
    whatever the film. The small model copies the content of the few plans it is shown, hence
    experiments only."""
    pool = list(DECOMPOSE_EXAMPLE_QUESTIONS)
    vecs = embedder.encode([mask_entities(t) for t in [question, *pool]])
    sims = vecs[1:] @ vecs[0]  # the Embedder contract: L2-normalized rows
    best = sorted(range(len(pool)), key=lambda i: (-float(sims[i]), i))[: max(0, n)]
    return [pool[i] for i in sorted(best)]


def plan_prompt(st: SolveState) -> PlanPrompt:
    """Mechanisms.plan_prompt of an experiment (st.cfg a LogicExperiment): its prompt form, and
    with plan_examples the nearest example plans, named in trace.details["plan_examples"]."""
    cfg = st.cfg
    examples = None
    if cfg.plan_examples:
        examples = st.trace.details["plan_examples"] = nearest_examples(st.question, st.kb.embedder, cfg.plan_examples)
    return ExperimentPlanPrompt(cfg.short_prompts, cfg.compact_examples, cfg.plan_questions, examples)


def last_hop_chunks(st: SolveState) -> list[RetrievedChunk]:
    """Mechanisms.final_chunks of an experiment with final_chunks > 0: at most that many raw
    chunks retrieved for the DAG's single sink, the hop that answers the question (the memory can
    drop the exact phrase the answer needs). Comparisons (several sinks) keep memory + computed
    notes only."""
    last = [n for n in sinks(st) if n.chunk_ids]
    if len(last) != 1:
        return []
    by_id = {c.chunk_id: c for c in st.raw}
    return [by_id[i] for i in last[0].chunk_ids if i in by_id][: st.cfg.final_chunks]
