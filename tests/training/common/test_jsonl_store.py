"""The one resumable JSONL file of benchmarks and labels: torn last lines, bad lines, keys, appends."""

from __future__ import annotations

import json

import pytest

from engine.floor.base.errors import DataFormatError
from training.common.jsonl_store import JsonlStore, read_jsonl


def test_a_torn_last_line_is_skipped_on_read_and_cut_off_before_appending(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text('{"id": 1}\n{"id": 2}\n{"id": 3, "te')
    assert [r["id"] for r in read_jsonl(p)] == [1, 2]
    assert p.read_text().endswith('"te')  # reading never writes
    store = JsonlStore(p, key=lambda r: r["id"])
    assert store.bad_lines == 1 and 2 in store and 3 not in store
    store.append({"id": 3})
    assert p.read_text() == '{"id": 1}\n{"id": 2}\n{"id": 3}\n'


def test_a_missing_final_newline_is_added_before_appending(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text('{"id": 1}')
    JsonlStore(p).append({"id": 2})
    assert [json.loads(x) for x in p.read_text().splitlines()] == [{"id": 1}, {"id": 2}]


def test_a_bad_middle_line_is_skipped_or_with_strict_an_error_naming_it(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text('{"id": 1}\nnot json\n{"id": 2}\n')
    store = JsonlStore(p)
    assert [r["id"] for r in store.rows] == [1, 2] and store.bad_lines == 1
    with pytest.raises(DataFormatError, match=":2:"):
        read_jsonl(p, strict=True)


def test_keys_find_the_last_row_and_appends_are_kept_in_order(tmp_path):
    p = tmp_path / "sub" / "r.jsonl"  # the folder is made on the first append
    store = JsonlStore(p, key=lambda r: (r["system"], r["q"]))
    assert store.rows == [] and store.get(("a", 1)) is None
    store.append({"system": "a", "q": 1, "v": 1})
    store.append({"system": "a", "q": 1, "v": 2})
    again = JsonlStore(p, key=lambda r: (r["system"], r["q"]))
    assert again.get(("a", 1))["v"] == 2 and [r["v"] for r in again.rows] == [1, 2]
    assert json.loads(p.read_text().splitlines()[0]) == {"system": "a", "q": 1, "v": 1}


def test_replace_rewrites_one_row_in_place_and_keeps_rows_another_writer_added(tmp_path):
    path = tmp_path / "labels.jsonl"
    mine = JsonlStore(path, key=lambda r: r["id"])
    for i in range(3):
        mine.append({"id": i, "v": "old"})
    theirs = JsonlStore(path, key=lambda r: r["id"])  # another process with the same file
    theirs.append({"id": 3, "v": "theirs"})
    theirs.replace({"id": 0, "v": "theirs"})
    mine.replace({"id": 1, "v": "new"})  # read again first: their row 3 and their new row 0 stay
    assert read_jsonl(path) == [
        {"id": 0, "v": "theirs"},
        {"id": 1, "v": "new"},
        {"id": 2, "v": "old"},
        {"id": 3, "v": "theirs"},
    ]
    assert mine.get(3) == {"id": 3, "v": "theirs"} and len(mine.rows) == 4
    assert not list(tmp_path.glob(".*"))  # no temp file left behind
    with pytest.raises(KeyError):
        mine.replace({"id": 9, "v": "never written"})
