"""Router labels from answered list questions (training.global_qa.list_labels): a question of the
chosen half whose every route is answered becomes a label row scored by the F1 of the set each
route lists, the summary route's score being its global mode's answer; a question some route
lacks (or failed) is left out and named."""

from __future__ import annotations

import json

from tests.training.global_qa.test_list_answer import write_set
from training.global_qa import list_labels


def stored(system: str, qid: str, text: str, tokens: int = 100, **extra) -> dict:
    return {"set": "t", "system": system, "id": qid, "text": text, "llm_calls": 1, "tokens": tokens, **extra}


def test_each_route_is_scored_by_the_f1_of_the_set_it_lists_and_summary_is_the_global_mode(tmp_path):
    results = tmp_path / "results.jsonl"
    rows = [
        stored("chunk", "q1", "tool build [1]."),  # 1 of 3, nothing wrong: F1 0.5
        stored("global", "q1", "build [1]\nclean [2]\npublish [3]", tokens=180),  # all 3: F1 1.0
        stored("summary", "q1", "nothing"),  # the descent is not the label's summary
        stored("logic", "q1", "build, clean and serve [1].", tokens=400),  # 2 of 3, 1 wrong: F1 0.667
        stored("chunk", "q2", "build"),
        stored("global", "q2", "x", error="LLMError: timed out"),
        stored("logic", "q2", "test"),
    ]
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    labels, skipped = list_labels.label_rows([write_set(tmp_path)], [results], half="tune")
    assert skipped == ["q2"] and [r["id"] for r in labels] == ["q1"]
    row = labels[0]
    assert row["scores"] == {"chunk": 0.5, "summary": 1.0, "logic": 0.6667}
    assert row["oracle"] == "summary" and row["dataset"] == "lists_docs"
    assert row["costs"]["summary"]["tokens"] == 180 and row["answers"] == ["build", "clean", "publish"]
    assert row["answers_pred"]["summary"].startswith("build [1]") and row["metric"] == "list_f1"


def test_the_judge_half_stays_out_of_the_labels_unless_asked_for(tmp_path):
    results = tmp_path / "results.jsonl"
    rows = [stored(s, "q3", "serve and fetch") for s in ("chunk", "global", "logic")]
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert list_labels.label_rows([write_set(tmp_path)], [results], half="tune")[0] == []
    assert [r["id"] for r in list_labels.label_rows([write_set(tmp_path)], [results], half="judge")[0]] == ["q3"]
