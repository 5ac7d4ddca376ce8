import click
from click.testing import CliRunner

from training.commands import register

BENCHMARKS = [
    "logic", "summary", "index", "reader", "global", "global-lists", "global-lists-answer", "serve", "scale",
    "llm-server", "retrieval", "peers", "adapt", "docs",
]  # fmt: skip


def test_register_adds_the_router_commands_at_the_top_and_the_benchmarks_under_bench():
    group = click.Group()
    register(group)
    listed = [name for name, cmd in group.commands.items() if not cmd.hidden]
    assert listed == ["label", "train", "adapt", "calibrate", "eval-router", "benchmark", "bench"]
    assert list(group.commands["bench"].commands) == BENCHMARKS


def test_a_benchmark_by_its_name_before_the_group_still_runs_with_a_note():
    from engine.face.cli import main

    assert main.get_command(None, "bench-summary").hidden
    res = CliRunner().invoke(main, ["bench-summary", "--parts", "nope"])
    assert res.stderr.splitlines() == [
        "note: `logicroute bench-summary` is now `logicroute bench summary`",
        "error: unknown parts ['nope']: choose from build, qa",  # the same options, checked the same way
    ]
    assert res.exit_code == 2
