"""The logic route: LogicRAG query-time DAG reasoning (AAAI 2026), every mechanism of the paper.

1. decompose the question into sub-questions with dependencies (few-shot, JSON schema);
2. check the DAG (unique ids, existing references, acyclic); regenerate once with the error
   stated; then repair (drop dangling refs / back edges), flagged;
3. solve rank by rank (rank = longest path from a source). *Graph pruning*: the sub-questions of
   one rank share ONE retrieval (their rewritten questions joined, k * len(rank) chunks, i.e. the
   same evidence budget as one retrieval per node) and ONE structured LLM call;
4. *context-aware retrieval*: a node with parents is rewritten with their answers first
   (`#qN` placeholders filled directly at zero tokens; otherwise a small LLM rewrite call);
5. *context pruning*: that same per-rank call also writes the rolling memory
   (`{"memory": ..., "answers": {...}}`): a query-oriented summary of old memory + new chunks,
   capped at `memory_words`. One call instead of two: the answers need the same reading of the
   same passages, and every call re-reads the prompt;
6. *sampling without replacement*: chunk ids already retrieved for this question are excluded;
7. *self-reflection*: a structured sufficiency check may add sub-questions (with dependencies on
   existing ids), which are then solved; bounded by `max_rounds` and the budget. Every node is
   retrieved for before any reflection, so "sufficient" never means "answered from nothing";
8. final answer with the shared answer-only prompt over memory (context) + sub-answers (notes).
Every fallback is visible in trace["flags"].

Modules (import from the exact one; this package imports nothing):
    config        LogicConfig, its fingerprint, the budget-stop exception
    plan          sub-questions, decomposition, validation, repair, topological ranks   (1-2)
    state         one question's solving state, the budgeted LLM call, retrieval without replacement
    solve         the rank-by-rank loop, memory, reflection; `answer_logic`          (3-7)
    final_answer  the answer over memory + sub-answers + computed comparisons   (8)
    compare       the computed "A or B?" date and "same X?" conclusions given to the final answer
    render        a Mermaid flowchart of a trace
"""
