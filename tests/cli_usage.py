"""Every test that runs a command through click's CliRunner fails on a usage error (an option or
a command that does not exist, an invalid value: click's exit 2), so an option renamed or removed
breaks the tests that use it instead of passing them with a command that never ran. A test that
expects the usage error says so: `CliRunner().invoke(..., usage_error_expected=True)`, and then
fails when the command runs instead. tests/conftest.py puts `guarded_invoke` in place for the
whole session."""

from __future__ import annotations

from unittest import mock

import click
import pytest
from click.testing import CliRunner, Result

UNGUARDED_INVOKE = CliRunner.invoke


def guarded_invoke(self: CliRunner, cli, args=None, *more, usage_error_expected: bool = False, **options) -> Result:
    """CliRunner.invoke, failing the test on a usage error it did not expect, or on the absence of
    one it did."""
    shown: list[click.UsageError] = []
    show = click.UsageError.show

    def recorded(error: click.UsageError, file=None) -> None:
        shown.append(error)
        show(error, file)

    with mock.patch.object(click.UsageError, "show", recorded):
        result = UNGUARDED_INVOKE(self, cli, args, *more, **options)
    if isinstance(result.exception, click.UsageError):  # standalone_mode=False raises instead of showing
        shown.append(result.exception)
    command = " ".join(map(str, args)) if isinstance(args, (list, tuple)) else str(args)
    if shown and not usage_error_expected:
        pytest.fail(f"usage error from `{command}`: {shown[0].format_message()}", pytrace=False)
    if usage_error_expected and not shown:
        pytest.fail(f"`{command}` ran (exit {result.exit_code}) where a usage error was expected", pytrace=False)
    return result
