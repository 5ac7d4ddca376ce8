import click

from training.commands import register


def test_register_adds_every_training_command_in_order():
    group = click.Group()
    register(group)
    assert list(group.commands) == [
        "label",
        "train",
        "calibrate",
        "eval-router",
        "benchmark",
        "bench-logic",
        "bench-summary",
        "bench-index",
        "bench-reader",
        "bench-global",
        "bench-serve",
        "bench-scale",
        "bench-llm-server",
    ]
