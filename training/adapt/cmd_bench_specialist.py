"""`logicroute bench specialist` (training.adapt.bench_specialist): the specialist judged on its
own set's held-out questions from stored label rows. Only click and engine.face.cli_options at module
level: `logicroute --help` stays instant."""

from __future__ import annotations

import click

from engine.face.cli_options import injected_embedder


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def _cost_weights(text: str) -> list[float | None]:
    return [None if x.strip() == "parent" else float(x) for x in text.split(",") if x.strip()]


@click.command("specialist")
@click.option(
    "--labels",
    "label_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="answer-scored label rows of the set (e.g. training/data/labels/specialist/hotpotqa.jsonl; "
    "copy a growing file first)",
)
@click.option("--set", "set_name", required=True, help="the set whose rows are judged, e.g. hotpotqa")
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default="docs/results/router/specialist",
    show_default=True,
    help="folder of report.md, results.json and selection.json",
)
@click.option(
    "--checkpoint",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="the generalist fine-tuned [default: the shipped one]",
)
@click.option(
    "--held-share",
    type=click.FloatRange(0.1, 0.9),
    default=0.5,
    show_default=True,
    help="share held out (by a hash of the question id) of the questions the generalist did not train on; "
    "the ones it trained on (its set priors') only train: with about half of them seen, 0.5 holds out about "
    "a quarter of all rows",
)
@click.option("--folds", type=click.IntRange(min=2), default=3, show_default=True, help="validation folds")
@click.option("--epochs", default="10,20,40", show_default=True, help="epoch counts tried, comma list")
@click.option("--lr", "lrs", default="1e-4,3e-4,1e-3", show_default=True, help="learning rates tried, comma list")
@click.option(
    "--all-zero",
    "all_zero",
    default="drop,cheapest,pref,uniform",
    show_default=True,
    help="treatments tried for rows where no route scored: drop | cheapest | pref (their computed vector) | uniform",
)
@click.option(
    "--cost-weights",
    default="parent",
    show_default=True,
    help="cost weights the targets are computed at, comma list; parent = the generalist's (0: F1 alone)",
)
@click.option("--loss", "losses", default="reward", show_default=True, help="losses tried: reward, ce (comma list)")
@click.option(
    "--other-labels",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="label files of the other sets checked [default: the generalist's card's]",
)
@click.option(
    "--lodo/--no-lodo",
    default=False,
    help="also the leave-one-dataset-out check: per other set, the fold's generalist (the generalist's recipe "
    "without that set) against it fine-tuned as the specialist was (one generalist training per set: minutes)",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--note", default="", help="a line put at the top of report.md (e.g. PRELIMINARY, why)")
@click.option("--progress/--no-progress", default=True, help="one line per variant judged")
@click.pass_context
def bench_specialist(
    ctx,
    label_file,
    set_name,
    out,
    checkpoint,
    held_share,
    folds,
    epochs,
    lrs,
    all_zero,
    cost_weights,
    losses,
    other_labels,
    lodo,
    seed,
    note,
    progress,
):
    """Fine-tune the generalist on a set's training rows with settings chosen on validation folds of
    them, then judge it against the generalist on the set's held-out questions (paired interval)."""
    from training.adapt.bench_specialist import bench_specialist as run
    from training.adapt.bench_specialist_report import verdict
    from training.adapt.specialist_fit import grid

    try:
        variants = grid(
            [int(e) for e in epochs.split(",")],
            _floats(lrs),
            [a.strip() for a in all_zero.split(",")],
            _cost_weights(cost_weights),
            [x.strip() for x in losses.split(",")],
        )
    except ValueError as e:
        raise click.BadParameter(str(e)) from None

    res = run(
        label_file,
        set_name,
        out,
        variants,
        held_share=held_share,
        folds=folds,
        checkpoint=checkpoint,
        other_labels=list(other_labels) or None,
        seed=seed,
        embedder=injected_embedder(ctx),
        note=note,
        lodo=lodo,
        progress=(lambda line: click.echo(line, err=True)) if progress else None,
    )
    p = res["paired"]["decider"]
    click.echo(
        f"chosen: {res['validation']['chosen_name']}; held out {p['n']}: specialist - generalist "
        f"{p['mean_diff']:+.1f} [{p['ci95'][0]:+.1f}, {p['ci95'][1]:+.1f}] ({res['seconds']} s)"
    )
    click.echo(verdict(res))
    click.echo(f"wrote {out}/report.md, results.json, selection.json", err=True)
