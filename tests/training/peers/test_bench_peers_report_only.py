"""`bench peers --report-only`: the report of the rows there are, with no index built and no
question asked, so a report made after long builds can never start one."""

from __future__ import annotations

import pytest

from tests.training.peers.test_bench_peers import FakePeer, Stop, run


@pytest.fixture
def fake():
    FakePeer.log, FakePeer.stop_after = {}, {}
    return FakePeer


def test_a_report_only_run_indexes_and_asks_nothing_and_reports_the_rows_of_the_full_run(tmp_path, fake):
    full = run(tmp_path)
    fake.log.clear()
    again = run(tmp_path, report_only=True)
    assert fake.log == {}  # no passage indexed, no question asked
    assert again["systems"][0] | {"error": None} == full["systems"][0] | {"error": None}
    assert again["systems"][0]["error"] is None


def test_a_system_with_missing_rows_says_how_many_and_nothing_is_done_for_them(tmp_path, fake):
    fake.stop_after["answer"] = 2  # the run is cut after 2 answers
    with pytest.raises(Stop):
        run(tmp_path)
    fake.stop_after.clear()
    fake.log.clear()
    report = run(tmp_path, report_only=True)
    row = report["systems"][0]
    assert fake.log == {} and row["questions"] == 2 and row["index_passages"] == 8
    assert row["error"] == "report only: 0 passages not indexed and 2 questions not answered in its rows"


def test_rows_of_other_settings_are_not_this_systems_rows(tmp_path, fake, monkeypatch):
    run(tmp_path)
    monkeypatch.setattr(FakePeer, "settings", lambda self: {"mode": "another"})
    fake.log.clear()
    row = run(tmp_path, report_only=True)["systems"][0]
    assert fake.log == {} and row["questions"] == 0 and row["index_passages"] == 0
    assert "8 passages not indexed and 4 questions not answered" in row["error"]
