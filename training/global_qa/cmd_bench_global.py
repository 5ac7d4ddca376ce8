"""`logicroute bench global`: the global-questions benchmark (training/global_qa/bench_global.py) as a
command. Registered on the group by training/commands.py; nothing heavy at module level."""

from __future__ import annotations

import json
from pathlib import Path

import click

from engine.face.cli_options import llm_option
from engine.floor.base.errors import LogicRouteError
from training.global_qa.bench_global import TYPES, GlobalConfig
from training.global_qa.bench_global_systems import DEFAULT_SYSTEMS, SYSTEMS, WIDE_CHUNKS

_HELP = GlobalConfig.__dataclass_fields__


def _help(name: str) -> str:
    return _HELP[name].metadata["help"]


def _split(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


@click.command("global")
@click.argument("data", default="medical")
@click.option("--corpus", type=click.Path(exists=True, dir_okay=False), default=None, help=_help("corpus"))
@click.option("--types", default=",".join(TYPES), show_default=True, help="comma list of question types")
@click.option("--n", type=int, default=40, show_default=True, help=_help("n"))
@click.option("--offset", type=int, default=0, show_default=True, help=_help("offset"))
@click.option(
    "--systems",
    default=",".join(DEFAULT_SYSTEMS),
    show_default=True,
    help="comma list of: " + ", ".join(f"{s} ({SYSTEMS[s].about})" for s in SYSTEMS),
)
@click.option("--k", default=3, show_default=True, help=_help("k"))
@click.option("--wide-chunks", default=WIDE_CHUNKS, show_default=True, help=_help("wide_chunks"))
@click.option("--out", "out_dir", default="runs/bench_global", show_default=True, type=click.Path(file_okay=False))
@click.option("--retry-errors", is_flag=True, help=_help("retry_errors"))
@click.option("--judge", type=int, default=0, show_default=True, help=_help("judge"))
@click.option("--checkpoint", default=None, type=click.Path(dir_okay=False), help=_help("checkpoint"))
@click.option("--no-cache", is_flag=True, help="do not use the on-disk LLM call cache")
@click.option("--dry-run", is_flag=True, help="print the LLM calls and hours still to make, and stop")
@click.option(
    "--context-only",
    is_flag=True,
    help="no answer: how much of each gold answer the context of every system (but logic) holds, "
    "in seconds and without an LLM (context_report.md)",
)
@llm_option
@click.pass_context
def bench_global(
    ctx,
    data,
    corpus,
    types,
    n,
    offset,
    systems,
    k,
    wide_chunks,
    out_dir,
    retry_errors,
    judge,
    checkpoint,
    no_cache,
    dry_run,
    context_only,
    llm_spec,
):
    """Global questions: on a GraphRAG-Bench set (DATA: a questions file or 'medical'),
    per question type, every system answers the same questions in the reader style (chunk,
    summary over extractive and over LLM-written layers, the collapsed tree, the summary-route
    variants, logic); ROUGE-L, coverage, tokens, seconds; each against chunk with a paired
    bootstrap. Resumable per (system, question); LLM calls through the cache."""
    from engine.face.cli_options import injected, injected_embedder
    from training.global_qa.bench_global import main, plan

    try:
        cfg = GlobalConfig(
            data=data,
            out=out_dir,
            corpus=corpus,
            types=_split(types),
            n=n,
            offset=offset,
            systems=_split(systems),
            k=k,
            wide_chunks=wide_chunks,
            llm_spec=llm_spec,
            cache=not no_cache,
            retry_errors=retry_errors,
            judge=judge,
            checkpoint=checkpoint,
        )
    except ValueError as e:
        raise LogicRouteError(str(e)) from None
    if context_only:
        from training.global_qa.bench_global_context import context_main

        report = context_main(cfg, embedder=injected_embedder(ctx))
        for t, per in report["per_type"].items():
            best = max(per, key=lambda s: per[s]["coverage"])
            click.echo(f"{t}: the context of {best} holds the most of the answer ({per[best]['coverage']}%)")
        click.echo(f"report: {Path(out_dir) / 'context_report.md'}")
        return
    todo = plan(cfg)
    click.echo(
        f"to do: {todo['answer_llm_calls']:g} answer calls + {todo['layer_llm_calls']} LLM-layer calls "
        f"(~{todo['hours_local_model']} h on the local model) for {todo['questions']} questions",
        err=True,
    )
    if dry_run:
        click.echo(json.dumps(todo, indent=2))
        return
    llm = injected(ctx, "llm")  # tests inject a scripted LLM through ctx.obj
    if llm is None:
        from engine.face.cli_options import check_llm_spec

        check_llm_spec(llm_spec)
    report = main(cfg, llm=llm, embedder=injected_embedder(ctx))
    click.echo(report.get("verdict", "no chunk baseline: no verdict"))
    click.echo(f"report: {Path(out_dir) / 'report.md'}")
