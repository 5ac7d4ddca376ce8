"""Every prompt, one module per job. Written for, and tested against, the small local model
(Qwen2.5-Coder-1.5B): few-shot, answer-only, yes/no only for yes/no questions.

    answer      the answer-only prompt (chunk, summary and logic routes) and the passage format
    logic       the logic route: decomposition, rewrite, rank step, reflection, with their schemas
    summary     the summary layers' cluster summary
    self_check  the pipeline's escalation self-check
    router      the LLM as router (a baseline)

The names are re-exported here, so `from engine.prompts import answer_messages` works."""

from engine.prompts.answer import ANSWER_FEWSHOT, ANSWER_SYSTEM, answer_messages, format_passages
from engine.prompts.logic import (
    DECOMPOSE_MAX_ITEMS,
    DECOMPOSE_SYSTEM,
    REFLECT_FEWSHOT,
    REFLECT_SYSTEM,
    REWRITE_FEWSHOT,
    REWRITE_SYSTEM,
    decompose_messages,
    decompose_retry_messages,
    decompose_schema,
    reflect_messages,
    reflect_schema,
    rewrite_messages,
    step_messages,
    step_schema,
    step_system,
)
from engine.prompts.router import ROUTE_HELP, llm_router_messages, llm_router_schema
from engine.prompts.self_check import SELF_CHECK_SCHEMA, SELF_CHECK_SYSTEM, self_check_messages
from engine.prompts.summary import SUMMARY_FEWSHOT, SUMMARY_SYSTEM, summary_messages

__all__ = [
    "ANSWER_FEWSHOT",
    "ANSWER_SYSTEM",
    "DECOMPOSE_MAX_ITEMS",
    "DECOMPOSE_SYSTEM",
    "REFLECT_FEWSHOT",
    "REFLECT_SYSTEM",
    "REWRITE_FEWSHOT",
    "REWRITE_SYSTEM",
    "ROUTE_HELP",
    "SELF_CHECK_SCHEMA",
    "SELF_CHECK_SYSTEM",
    "SUMMARY_FEWSHOT",
    "SUMMARY_SYSTEM",
    "answer_messages",
    "decompose_messages",
    "decompose_retry_messages",
    "decompose_schema",
    "format_passages",
    "llm_router_messages",
    "llm_router_schema",
    "reflect_messages",
    "reflect_schema",
    "rewrite_messages",
    "self_check_messages",
    "step_messages",
    "step_schema",
    "step_system",
    "summary_messages",
]
