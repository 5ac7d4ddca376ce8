"""List priors (training.fitting.set_priors.list_rows): the tune half of each list-question file,
labelled summary, and the same corpus's one-value questions, labelled chunk, as silver rows of the
set of its corpus; the judge halves and answer-labelled questions never train."""

from __future__ import annotations

import json

import pytest

from engine.floor.base.errors import LogicRouteError
from training.fitting.set_priors import Priors, list_files, list_rows

ROUTES = ("chunk", "summary", "logic")


def write(tmp_path, corpus: str, n: int):
    path = tmp_path / f"{corpus}.jsonl"
    rows = [
        {"question": f"Which {corpus} pages name item {i}?", "half": "tune" if i % 2 else "judge"} for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_tune_questions_of_each_corpus_prefer_summary_and_the_judge_half_never_trains(tmp_path):
    files = [write(tmp_path, "alpha", 6), write(tmp_path, "beta", 4)]
    rows = list_rows(ROUTES, 10, 0.8, files=files, exclude={"Which alpha pages name item 1?"})
    assert [r["question"] for r in rows] == [
        "Which alpha pages name item 3?",
        "Which alpha pages name item 5?",
        "Which beta pages name item 1?",
        "Which beta pages name item 3?",
    ]
    assert {r["dataset"] for r in rows} == {"lists_alpha", "lists_beta"}
    assert all(r["oracle"] == "summary" and r["pref"]["summary"] == 0.8 and r["prior"] for r in rows)
    assert len(list_rows(ROUTES, 1, files=files)) == 2  # at most per_corpus a corpus


def test_the_corpus_own_one_value_questions_prefer_chunk_beside_its_lists(tmp_path):
    lists = tmp_path / "global_lists"
    docs = tmp_path / "docs_questions"
    lists.mkdir()
    docs.mkdir()
    path = write(lists, "alpha", 4)
    asked = [
        {"question": "What is the default port of alpha?", "half": "tune"},
        {"question": "Which alpha commands take --force?", "half": "tune"},  # a list: not a lookup prior
        {"question": "How many retries does alpha make?", "half": "judge"},
    ]
    (docs / "alpha.jsonl").write_text("".join(json.dumps(r) + "\n" for r in asked))
    rows = list_rows(ROUTES, 10, files=[path])
    assert [(r["question"], r["oracle"]) for r in rows] == [
        ("Which alpha pages name item 1?", "summary"),
        ("Which alpha pages name item 3?", "summary"),
        ("What is the default port of alpha?", "chunk"),
    ]


def test_a_fold_leaving_a_corpus_out_trains_on_none_of_its_list_priors(tmp_path):
    import numpy as np

    rows = list_rows(ROUTES, 10, files=[write(tmp_path, "alpha", 4), write(tmp_path, "beta", 4)])
    kept = Priors(rows, np.zeros((len(rows), 2))).without("lists_alpha")
    assert {r["dataset"] for r in kept.rows} == {"lists_beta"}


def test_list_priors_need_the_summary_route_and_the_shipped_files_are_found(tmp_path):
    with pytest.raises(LogicRouteError, match="summary"):
        list_rows(("chunk", "logic"), 5, files=[write(tmp_path, "alpha", 4)])
    assert {p.stem for p in list_files()} >= {"node", "npm", "valgrind"}
