"""The guard every CLI-driving test runs under (tests.cli_usage): a command stopped by a usage
error fails its test, unless the test expects one, and then a command that runs fails it."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from engine.face.cli import main


def test_a_removed_option_fails_the_test_that_still_uses_it(tmp_path):
    # `ask` lost --max-seconds and --no-retry (now --set budget.max_seconds=, --set retry_unanswered=)
    for removed in (["--max-seconds", "5"], ["--no-retry"]):
        with pytest.raises(pytest.fail.Exception, match=f"^usage error from `ask .*`: No such option:? '?{removed[0]}"):
            CliRunner().invoke(main, ["ask", "Who?", "--kb", str(tmp_path), *removed])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["asks", "Who?"], "No such command 'asks'"),
        (["ask", "Who?", "--route", "fastest"], "Invalid value for '--route'"),
        (["ask", "Who?", "--questions", "/nowhere/qs.txt"], "Invalid value for '--questions'"),
    ],
)
def test_every_kind_of_usage_error_fails_the_test(args, message):
    with pytest.raises(pytest.fail.Exception, match=message):
        CliRunner().invoke(main, args)


def test_a_test_that_expects_a_usage_error_says_so_and_fails_when_the_command_runs_instead(tmp_path):
    res = CliRunner().invoke(main, ["ask", "--kb", str(tmp_path)], usage_error_expected=True)
    assert res.exit_code == 2 and "give a QUESTION or --questions FILE" in res.output
    with pytest.raises(pytest.fail.Exception, match=r"^`--version` ran \(exit 0\) where a usage error was expected"):
        CliRunner().invoke(main, ["--version"], usage_error_expected=True)


def test_an_error_of_ours_is_no_usage_error(tmp_path):
    res = CliRunner().invoke(main, ["check", "--kb", str(tmp_path / "nowhere")])
    assert res.exit_code == 2 and res.output.startswith("error: no knowledge base")
