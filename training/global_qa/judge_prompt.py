"""The judge prompt of the sentence-answer benchmark (training/global_qa/bench_global_judge.py): does an
answer state what the reference answer states? A JSON verdict, {"correct": true|false}."""

from __future__ import annotations

JUDGE_SCHEMA = {
    "type": "object",
    "properties": {"correct": {"type": "boolean"}},
    "required": ["correct"],
    "additionalProperties": False,
}

JUDGE_SYSTEM = (
    "You grade an answer against a reference answer to the same question. Reply "
    '{"correct": true} when the answer states the main facts of the reference and does not '
    "contradict it; other wording, more detail and citations such as [1] are fine. Reply "
    '{"correct": false} when it misses or contradicts the main facts, or says that the documents '
    "do not hold the answer."
)

_JUDGE_FEWSHOT = [
    {
        "role": "user",
        "content": "Question: What causes scurvy?\nReference answer: Scurvy is caused by a lack of vitamin C.\n"
        "Answer: A diet without enough vitamin C leads to scurvy [2].",
    },
    {"role": "assistant", "content": '{"correct": true}'},
    {
        "role": "user",
        "content": "Question: What causes scurvy?\nReference answer: Scurvy is caused by a lack of vitamin C.\n"
        "Answer: Scurvy is caused by a bacterial infection of the gums [1].",
    },
    {"role": "assistant", "content": '{"correct": false}'},
]


def judge_messages(question: str, reference: str, answer: str) -> list[dict]:
    body = f"Question: {question}\nReference answer: {reference}\nAnswer: {answer}"
    return [{"role": "system", "content": JUDGE_SYSTEM}, *_JUDGE_FEWSHOT, {"role": "user", "content": body}]
