"""The `adapt` command of the `logicroute` CLI (training.adapt.adapt). Registered on the `logicroute`
group by training/commands.py.

Only click, the standard library and engine.face.cli's shared options at module level:
`logicroute --help` stays instant.
"""

from __future__ import annotations

import click

from engine.face.cli_options import info, injected_embedder, llm_option

AGREEMENT_HELP = (
    'your own questions, without answers (a .txt line each, JSONL with "question", or a QA data file): each is '
    "labelled by agreement: where a cheap route's answer has token F1 >= 0.5 with the logic route's answer the "
    "cheap route is preferred, else logic"
)
BUDGET_HELP = (
    "the most the escalation threshold may spend on adapt's training questions, as a share of always-logic's "
    "tokens there (the router's cheap answer is paid, then logic for each escalated one), or 'none' for no cap "
    "[default: 0.5, half of always-logic's tokens: a threshold fitted on a few written questions can otherwise "
    "escalate more than a cheap router can afford on real ones]"
)


def parse_budget(ctx, param, value: str | None) -> dict:
    """--escalation-budget as adapt's keyword: {} when not given (adapt's default,
    training.adapt.adapt.ESCALATION_BUDGET), None for 'none', else a share in (0, 1]."""
    if value is None:
        return {}
    if value.strip().lower() == "none":
        return {"escalation_budget": None}
    from training.adapt.adapt import AdaptError, check_budget

    try:
        share = float(value)
        check_budget(share)
    except (ValueError, AdaptError):
        raise click.BadParameter(f"{value!r}: a share of always-logic's tokens in (0, 1], or none") from None
    return {"escalation_budget": share}


def escalation_budget_option(f):
    return click.option(
        "--escalation-budget",
        "escalation_budget",
        default=None,
        metavar="SHARE|none",
        callback=parse_budget,
        help=BUDGET_HELP,
    )(f)


@click.command()
@click.option("--kb", "kb_dir", required=True, type=click.Path(file_okay=False), help="the knowledge base to adapt to")
@click.option("--n", type=click.IntRange(min=1), default=200, show_default=True, help="questions to write and label")
@click.option("--questions", "questions_file", type=click.Path(exists=True, dir_okay=False), help=AGREEMENT_HELP)
@click.option(
    "--minutes",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="time budget for writing and labelling; the specialist is trained on what is labelled by then and a "
    "rerun continues [default: none]",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="questions labelled at once: for an OpenAI-compatible endpoint (vLLM, llama.cpp's server) that serves "
    "requests in parallel; the local model answers one call at a time",
)
@llm_option(help="the LLM that writes the questions and answers them on every route (your LLM: the labels are its)")
@click.option(
    "--from",
    "from_ckpt",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="the router to fine-tune [default: the shipped generalist]",
)
@click.option(
    "--routes",
    default=None,
    help="routes to run, e.g. chunk,logic (logic among them) [default: every route of the router the KB can run; "
    "summary needs the KB's summary layers]",
)
@click.option(
    "--kinds",
    default=None,
    metavar="KIND=WEIGHT,...",
    help="how the questions written are shared among the kinds single, bridge, comparison and overview, e.g. "
    "single=1,bridge=2 (a kind left out is not written) [default: the writer's shares]",
)
@click.option("--seed", type=int, default=0, show_default=True, help="which questions are written, the split, training")
@click.option(
    "--train-seed",
    type=int,
    default=None,
    help="seed of the fine-tuning alone [default: --seed]: seeds of training over one set of labels (no LLM call "
    "is repeated; copy KB/router/adapted.ckpt and the report between runs, the next run replaces them)",
)
@click.option(
    "--judge",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="label file of real questions (`logicroute label` rows, answers already scored): the generalist, the "
    "specialist, each route and the oracle are also judged on it in the report, without an LLM call (repeatable)",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default=None,
    help="folder of the adaptation's files: questions.jsonl, labels.jsonl, report.md, report.json [default: KB/adapt]",
)
@click.option(
    "--style",
    type=click.Choice(("short", "reader")),
    default="short",
    show_default=True,
    help="the answer style the routes answer in, the one you ask with (ask's default is reader): the escalation "
    "threshold adapt calibrates applies to answers of this style only",
)
@escalation_budget_option
@click.option("--no-cache", is_flag=True, help="do not use the on-disk LLM call cache (a rerun then pays every call)")
@click.pass_context
def adapt(
    ctx,
    kb_dir,
    n,
    questions_file,
    minutes,
    concurrency,
    llm_spec,
    from_ckpt,
    routes,
    kinds,
    seed,
    train_seed,
    judge,
    out,
    style,
    escalation_budget,
    no_cache,
):
    """Adapt the router to the knowledge base --kb and your LLM, with no labelled question: questions are written
    from the KB's own chunks (single-hop, bridge, comparison, overview), with their answers known; every route
    answers them with your LLM; the shipped generalist is fine-tuned on those labels (a 20% held-out part is
    reported) and saved in the KB, which `ask` and `serve` then route with. Resumable: rerun the same command after
    an interruption. Report: KB/adapt/report.md."""
    from engine.face.cli_options import check_llm_spec
    from engine.floor.llm.factory import make_llm
    from training.adapt.adapt import adapt as run_adapt

    check_llm_spec(llm_spec)
    wanted = tuple(r.strip() for r in routes.split(",") if r.strip()) if routes else None
    result = run_adapt(
        kb_dir,
        make_llm(llm_spec, cache=not no_cache),
        generalist=from_ckpt,
        n=n,
        questions_file=questions_file,
        minutes=minutes,
        concurrency=concurrency,
        seed=seed,
        train_seed=train_seed,
        judge=judge,
        out=out,
        routes=wanted,
        kinds=_kinds(kinds),
        style=style,
        llm_spec=llm_spec,
        embedder=injected_embedder(ctx),
        **escalation_budget,
    )
    rep = result.report
    q = rep["questions"]
    info(f"{q['written_kept']} questions written and kept, {q['own']} of yours; {q['labelled']} labelled")
    if q["left"]:
        info(f"{q['left']} questions not labelled in the time budget: rerun the same command to label them")
    parts = [(f"held-out {ds}", part) for ds, part in rep["heldout"].items()]
    parts += [(f"judged on {f}", part) for f, part in rep["judged"].items()]
    for title, part in parts:
        cells = "  ".join(f"{name} {m['score']} ({m['tokens']:.0f} tok)" for name, m in part["systems"].items())
        click.echo(f"{title} (n={next(iter(part['systems'].values()))['n']}): {cells}")
    click.echo(f"router saved in the KB: {result.checkpoint} (ask and serve use it); report: {result.report_path}")


def _kinds(value: str | None) -> dict[str, float] | None:
    """--kinds single=1,bridge=2 as {kind: weight}; the writer checks the names."""
    if not value:
        return None
    out = {}
    for part in (p.strip() for p in value.split(",") if p.strip()):
        kind, _, weight = part.partition("=")
        try:
            out[kind.strip()] = float(weight) if weight else 1.0
        except ValueError:
            raise click.BadParameter(f"{part!r}: give KIND=WEIGHT, e.g. bridge=2", param_hint="--kinds") from None
    return out


COMMANDS = [adapt]
