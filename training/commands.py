"""Training's commands on the `logicroute` group: label, train, calibrate, eval-router,
benchmark, bench-logic, bench-summary, bench-index, bench-reader, bench-global, bench-serve,
bench-scale, bench-llm-server. Reached through the `logicroute.commands` entry point (pyproject.toml), so engine's
CLI never imports training."""

from __future__ import annotations

import click


def register(group: click.Group) -> None:
    from training.bench_llm_server import bench_llm_server
    from training.bench_serve import bench_serve
    from training.cmd_bench_global import bench_global
    from training.cmd_bench_scale import bench_scale
    from training.cmd_benchmark import COMMANDS as benchmark_commands
    from training.cmd_eval import COMMANDS as eval_commands
    from training.cmd_label import COMMANDS as label_commands
    from training.cmd_train import COMMANDS as train_commands

    for cmd in (
        *label_commands,
        *train_commands,
        *eval_commands,
        *benchmark_commands,
        bench_global,
        bench_serve,
        bench_scale,
        bench_llm_server,
    ):
        group.add_command(cmd)
