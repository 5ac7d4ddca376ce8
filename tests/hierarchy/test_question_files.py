"""One reader for every --questions file: tolerant for `route`, strict for `ask` and `calibrate`."""

import json

import pytest

from engine.floor.base.errors import LogicRouteError
from hierarchy.question_files import read_question_items, read_questions


def test_a_text_file_gives_one_question_per_non_blank_line(tmp_path):
    path = tmp_path / "q.txt"
    path.write_text("  Who wrote Dune?  \n\nWhere is Rome?\r\n", encoding="utf-8")
    assert read_questions(path) == ["Who wrote Dune?", "Where is Rome?"]


def test_a_bad_jsonl_line_is_an_item_with_its_reason_and_the_strict_reader_names_it(tmp_path):
    path = tmp_path / "q.jsonl"
    lines = [json.dumps({"question": "Who wrote Dune?"}), "{not json", json.dumps({"question": 3})]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    items = read_question_items(path)
    assert [i.question for i in items] == ["Who wrote Dune?", None, None]
    assert items[1].error.startswith("not JSON") and items[2].error == 'a non-string (int) "question" field'
    with pytest.raises(LogicRouteError, match=r"q.jsonl, line 2: not JSON"):
        read_questions(path)


def test_a_line_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "q.txt"
    path.write_bytes(b"Who wrote Dune?\n\xff\xfe broken\n")
    assert read_question_items(path)[1].error == "not UTF-8 text"
    with pytest.raises(LogicRouteError, match="line 2: not UTF-8 text"):
        read_questions(path)


def test_a_file_of_no_known_format_is_one_error(tmp_path):
    path = tmp_path / "q.csv"
    path.write_text("question\nWho wrote Dune?\n", encoding="utf-8")
    with pytest.raises(LogicRouteError):
        read_question_items(path)
