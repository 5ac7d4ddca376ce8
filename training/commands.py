"""Training's commands on the `logicroute` group: label, train, adapt, calibrate, eval-router and
benchmark (training the router, benchmarking routing decisions) at the top, and the research
benchmarks under one group, `logicroute bench logic|summary|index|reader|global|serve|scale|
llm-server|retrieval|peers|adapt|docs`. Reached through the `logicroute.commands` entry point
(pyproject.toml), so engine's CLI never imports training."""

from __future__ import annotations

import click

from engine.face.cli_options import renamed

BENCH_HELP = """Research benchmarks, each writing its report (see docs/results): the logic route against
chunk, summary layers, the chunk index, reader answers, global questions, the HTTP server under
load, how a KB scales, one LLM server process against the in-process model, dense, lexical and
hybrid retrieval, logicroute beside LightRAG, HippoRAG and nano-graphrag on the same ground, and
answers and abstentions on documentation folders."""


def register(group: click.Group) -> None:
    from training.adapt.cmd_adapt import COMMANDS as adapt_commands
    from training.bench.cmd_benchmark import COMMANDS as benchmark_commands
    from training.fitting.cmd_eval import COMMANDS as eval_commands
    from training.fitting.cmd_train import COMMANDS as train_commands
    from training.labels.cmd_label import COMMANDS as label_commands

    for cmd in (*label_commands, *train_commands, *adapt_commands, *eval_commands, *benchmark_commands):
        group.add_command(cmd)
    bench = bench_group()
    group.add_command(bench)
    for name, cmd in bench.commands.items():  # the names these had before the group: scripts still run
        group.add_command(renamed(f"bench-{name}", f"bench {name}", cmd))


def bench_group() -> click.Group:
    from training.adapt.cmd_bench_adapt import bench_adapt
    from training.bench.cmd_benchmark import BENCH_COMMANDS
    from training.docs_qa.cmd_bench_docs import bench_docs
    from training.global_qa.cmd_bench_global import bench_global
    from training.global_qa.cmd_bench_global_lists import bench_global_lists
    from training.global_qa.cmd_bench_global_lists_answer import bench_global_lists_answer
    from training.peers.cmd_bench_peers import bench_peers
    from training.retrieval.cmd_bench_retrieval import bench_retrieval
    from training.scale.bench_llm_server import bench_llm_server
    from training.scale.bench_serve import bench_serve
    from training.scale.cmd_bench_scale import bench_scale

    bench = click.Group("bench", help=BENCH_HELP, short_help="Research benchmarks: logic, global, reader, scale, ...")
    for cmd in (
        *BENCH_COMMANDS,
        bench_global,
        bench_global_lists,
        bench_global_lists_answer,
        bench_serve,
        bench_scale,
        bench_llm_server,
        bench_retrieval,
        bench_peers,
        bench_adapt,
        bench_docs,
    ):
        bench.add_command(cmd)
    return bench
