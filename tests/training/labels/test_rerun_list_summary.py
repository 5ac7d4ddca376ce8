"""The summary column of label rows asking for a list, answered again as the summary route answers
them now (training.labels.rerun_list_summary): only list questions are answered, the row's
metric scores the new answer, the preference and oracle follow, and the descent's answer is kept
beside it."""

from __future__ import annotations

from engine.base.types import Answer, Usage
from training.labels.rerun_list_summary import needs_rerun, rerun_row


def row(question: str) -> dict:
    return {
        "id": "m1",
        "question": question,
        "answers": ["Lenvatinib and sorafenib are kinase inhibitors used for advanced thyroid cancer."],
        "metric": "rouge_l",
        "style": "reader",
        "k": 3,
        "lam": 0.1,
        "tau": 0.1,
        "scores": {"chunk": 0.2, "summary": 0.1, "logic": 0.3},
        "costs": {r: {"llm_calls": 1, "tokens": 1000} for r in ("chunk", "summary", "logic")},
        "answers_pred": {"summary": "Surgery."},
        "pref": {},
        "oracle": "logic",
    }


def test_only_a_question_asking_for_a_list_is_answered_again_and_only_once():
    listed = row("Which kinase inhibitors are used for advanced thyroid cancer?")
    assert needs_rerun(listed) and not needs_rerun(row("What is the purpose of supportive care?"))
    asked = []

    def answer(question, style, k):
        asked.append((question, style, k))
        text = "Lenvatinib and sorafenib are kinase inhibitors used for advanced thyroid cancer [1]."
        return Answer(text=text, route="summary", usage=Usage(llm_calls=2, prompt_tokens=1500, completion_tokens=80))

    out = rerun_row(listed, answer)
    assert asked == [(listed["question"], "reader", 3)]
    assert out["scores"]["summary"] > 0.9 and out["oracle"] == "summary"
    assert out["costs"]["summary"]["llm_calls"] == 2 and out["costs"]["summary"]["tokens"] == 1580
    assert out["summary_descend"] == {"score": 0.1, "cost": {"llm_calls": 1, "tokens": 1000}, "text": "Surgery."}
    assert out["scores"]["chunk"] == 0.2 and not needs_rerun(out)
