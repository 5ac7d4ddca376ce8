"""Every prompt the product sends, one module per job. Written for, and tested against, the small local model
(Qwen2.5-Coder-1.5B): few-shot, answer-only, yes/no only for yes/no questions.

    answer      the answer-only prompt (chunk, summary and logic routes) and the passage format
    logic       the logic route: decomposition, rewrite, rank step, reflection, with their schemas
    summary     the summary layers' cluster summary
    self_check  the pipeline's escalation self-check
    passages    how passages appear inside every prompt that shows them
    structured  what every structured call adds: the schema stated in the prompt, the retry

Import from the module of the job: `from engine.floor.prompts.answer import answer_messages`. The lab's own
prompts (a benchmark's judge, adapt's question writing, the LLM-as-router baseline) live in training/
beside their one user."""
