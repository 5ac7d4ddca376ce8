"""`logicroute bench adapt` (training.adapt.bench_adapt): `adapt` judged leave-one-dataset-out on the
shared sets. Only click and engine.face.cli_options at module level: `logicroute --help` stays instant."""

from __future__ import annotations

import click

from engine.face.cli_options import injected_embedder, llm_option
from training.adapt.cmd_adapt import escalation_budget_option


@click.command("adapt")
@click.option(
    "--sets",
    default="musique,medical,2wiki",
    show_default=True,
    help="comma list of shared sets to leave out in turn (each needs an answer-label file)",
)
@click.option(
    "--labels",
    "label_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="answer-label files, one per set (repeatable) [default: those the shipped generalist's card lists]",
)
@click.option("--n", type=click.IntRange(min=5), default=200, show_default=True, help="questions adapt writes per set")
@click.option("--seeds", default="0,1,2", show_default=True, help="fine-tuning seeds, comma list")
@llm_option(help="the LLM adapt writes and labels with (the label files' LLM, for a fair judgement)")
@click.option(
    "--work",
    type=click.Path(file_okay=False),
    default="runs/bench_adapt",
    show_default=True,
    help="per set: the LODO generalist, the KB, adapt's questions and labels (a rerun resumes from them)",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default="docs/results/router/adapt_lodo",
    show_default=True,
    help="folder of report.md + report.json",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="questions adapt labels at once (an OpenAI-compatible endpoint serving requests in parallel)",
)
@escalation_budget_option
@click.option(
    "--own-folds",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="also give adapt the set's real questions as the user's own (--questions), K-fold over 3 split seeds: "
    "each judged by the router adapted on the other folds; the routes' answers replayed from the label rows, "
    "no LLM call for them (0: off; else at least 2)",
)
@click.option("--no-cache", is_flag=True, help="do not use the on-disk LLM call cache")
@click.pass_context
def bench_adapt(
    ctx, sets, label_files, n, seeds, llm_spec, work, out, concurrency, escalation_budget, own_folds, no_cache
):
    """For each set: train the generalist without it (the shipped recipe), adapt it on a KB of the set's
    passages with no question given, judge both on the set's real questions through its answer-label rows,
    beside each fixed route and the oracle; the specialist as the mean over fine-tuning seeds. Long: adapt
    labels n questions on every route with the LLM (resumable, cached)."""
    import sys

    from engine.face.cli_options import check_llm_spec
    from engine.floor.embedder import get_embedder
    from engine.floor.llm.factory import make_llm
    from router.checkpoint import DEFAULT_CHECKPOINT
    from training.adapt.bench_adapt import BenchAdaptSettings, shipped_label_files
    from training.adapt.bench_adapt import bench_adapt as run
    from training.fitting.fit import config_from_card

    check_llm_spec(llm_spec)
    if own_folds == 1:
        raise click.BadParameter(
            "0 (off) or at least 2 folds: a fold's router is adapted on the others", param_hint="--own-folds"
        )
    try:
        seed_list = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter(f"{seeds!r}: a comma list of integers", param_hint="--seeds") from None
    names = [s.strip() for s in sets.split(",") if s.strip()]
    files = list(label_files) or shipped_label_files()
    settings = BenchAdaptSettings(
        llm=make_llm(llm_spec, cache=not no_cache),
        n=n,
        seeds=seed_list,
        embedder=injected_embedder(ctx) or get_embedder(),
        cfg=config_from_card(DEFAULT_CHECKPOINT),
        llm_spec=llm_spec,
        concurrency=concurrency,
        adapt_options=escalation_budget,
        echo=lambda s: click.echo(s, err=True),
        command="logicroute " + " ".join(sys.argv[1:]),
        own_folds=own_folds,
    )
    report = run(names, files, work, out, settings)
    for name, part in report["sets"].items():
        if "error" in part:
            click.echo(f"{name}: failed: {part['error']}")
            continue
        s, logic = part["systems"], part["systems"].get("always logic", {}).get("tokens")
        cells = []
        for key in ("verdict", "verdict_escalating"):
            v = part[key]
            share = f" at {s[v['system']]['tokens'] / logic:.0%} of always-logic's tokens" if logic else ""
            cells.append(f"{v['system']} {s[v['system']]['score']}{share} ({'passes' if v['passes'] else 'fails'})")
        best = part["verdict"]["best_fixed_route"]
        click.echo(
            f"{name}: LODO generalist {s['LODO generalist']['score']}; {'; '.join(cells)}; best fixed {best} "
            f"{s['always ' + best]['score']}, oracle {s['oracle']['score']}"
        )
        for v in (part["own_folds"]["verdict"], part["own_folds"]["verdict_escalating"]) if own_folds else ():
            m = part["own_folds"]["systems"][v["system"]]
            share = f" at {m['tokens'] / logic:.0%} of always-logic's tokens" if logic else ""
            click.echo(f"{name}: {v['system']} {m['score']}{share} ({'passes' if v['passes'] else 'fails'})")
    click.echo(f"report: {out}/report.md")
