"""The commands of the `logicroute` CLI that judge a trained router: calibrate (a threshold
on your own questions) and eval-router (held-out labels). Registered on the `logicroute`
group by training/commands.py.

Only click, the standard library and engine.face.cli's shared options at module level:
`logicroute --help` stays instant.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from engine.face.cli_options import injected_embedder
from engine.floor.base.errors import LogicRouteError
from training.fitting.cmd_train import (
    cost_weight_option,
    hop_pairs_option,
    hop_priors_option,
    set_priors_option,
    text_form_option,
)
from training.labels.cmd_label import expand_files

MIN_CALIBRATION_QUESTIONS = 20


@click.command()
@click.argument("questions_file", type=click.Path(exists=True, dir_okay=False))
@click.option("--checkpoint", default=None, help="router checkpoint [default: shipped]")
@click.option("--logic-share", type=float, default=None, help="target share of questions sent to --route (0..1)")
@click.option(
    "--token-budget",
    type=float,
    default=None,
    help="average tokens per question instead of a share (costs from --costs or nominal)",
)
@click.option(
    "--costs",
    "costs_file",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="label file whose measured per-route tokens set the budget's costs",
)
@click.option("--route", "gated", default="logic", show_default=True, help="the expensive route to gate")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="thresholds.json to write")
@click.option(
    "--min-questions",
    type=click.IntRange(min=1),
    default=MIN_CALIBRATION_QUESTIONS,
    show_default=True,
    help="refuse a smaller sample (its threshold would move by a whole question's share)",
)
@click.pass_context
def calibrate(ctx, questions_file, checkpoint, logic_share, token_budget, costs_file, gated, out, min_questions):
    """Calibrate a threshold on P(logic) on your own questions (RouteLLM-style quantile), for a
    target share of logic calls or a token budget."""
    from engine.core.decide import ThresholdStage
    from router.checkpoint import load_router
    from router.policy import NOMINAL_TOKENS, Policy

    if (logic_share is None) == (token_budget is None):
        raise click.UsageError("give exactly one of --logic-share or --token-budget")
    from hierarchy.question_files import read_questions

    qs = read_questions(questions_file)
    if not qs:
        raise LogicRouteError(f"{questions_file}: no questions")
    if len(qs) < min_questions:
        # refused, not warned: the file written would steer every later `ask --thresholds` silently
        raise LogicRouteError(
            f"{questions_file}: {len(qs)} questions are too few to calibrate on (at least {min_questions}: "
            f"a quantile of n questions moves in steps of 1/n); add questions, or pass --min-questions {len(qs)}"
        )
    router = load_router(checkpoint, embedder=injected_embedder(ctx))
    if gated not in router.routes:
        raise LogicRouteError(f"the router has no route {gated!r} (routes: {', '.join(router.routes)})")
    costs = {r: NOMINAL_TOKENS.get(r, NOMINAL_TOKENS["logic"]) for r in router.routes}
    cost_source = "nominal (router.policy.NOMINAL_TOKENS)"
    if costs_file:
        from training.labels.labels import read_labels, route_cost

        rows = read_labels(costs_file)
        measured = {r: [route_cost(x["costs"][r]) for x in rows if r in x.get("costs", {})] for r in router.routes}
        if all(measured.values()):
            costs = {r: sum(v) / len(v) for r, v in measured.items()}
            cost_source = str(costs_file)
    share = logic_share if token_budget is None else share_for_budget(token_budget, costs, gated)
    p = router.probs_array(qs)[:, list(router.routes).index(gated)]
    t = ThresholdStage(logic_share=share, route=gated).calibrated(p).threshold
    got = achieved_share(p, t)
    policy = Policy(
        kind="threshold",
        route=gated,
        threshold=t,
        target_share=share,
        token_budget=token_budget,
        meta={
            "n_questions": len(qs),
            "achieved_share": got,
            "checkpoint": str(router.path),
            "questions_file": str(questions_file),
            "costs": costs,
            "cost_source": cost_source,
            "expected_tokens_per_question": round(
                got * costs[gated] + (1 - got) * min(c for r, c in costs.items() if r != gated), 1
            ),
        },
    )
    policy.save(out)
    click.echo(
        f"threshold P({gated}) >= {t:.4f}: {got:.1%} of {len(qs)} questions go to {gated} (target {share:.1%}) -> {out}"
    )


@click.command("eval-router")
@click.option("--checkpoint", default=None, help="router checkpoint [default: shipped]")
@click.option("--labels", "labels", multiple=True, required=True, help="held-out label files")
@click.argument("more_labels", nargs=-1)
@click.option(
    "--train-labels",
    multiple=True,
    help="training label files for the majority / logistic-regression baselines [default: the card's]",
)
@click.option(
    "--llm-baseline",
    "llm_spec",
    default=None,
    help="also ask this LLM to pick routes (timed; with --lodo: judged as a router on every row, cached)",
)
@click.option("--latency-n", default=50, show_default=True, help="single decisions timed")
@click.option("--no-speed", is_flag=True, help="skip latency / throughput")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False), help="write the report as JSON")
@click.option(
    "--lodo",
    is_flag=True,
    help="leave-one-dataset-out: train a router (default settings) on every data set of the labels but one "
    "and judge it on the one left out, in turn, against logistic regression, majority, fixed routes and oracle",
)
@click.option("--features", default=None, help="with --lodo: cheap features all | none | comma list [default: all]")
@click.option(
    "--specialist-n",
    type=int,
    default=0,
    show_default=True,
    help="with --lodo: also fine-tune each fold's router on this many rows of the left-out set "
    "and judge it against the generalist on the rows after them",
)
@text_form_option("with --lodo: text embedded")
@set_priors_option("with --lodo: also train every fold's router (on its training sets' priors only)")
@hop_priors_option("with --lodo: also train every fold's router (on its training sets' hop priors only)")
@hop_pairs_option("with --lodo: also train every fold's router (on its training sets' pairs only)")
@cost_weight_option("with --lodo: train every fold's router")
@click.option(
    "--recipe",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="with --lodo: train every fold with the settings recorded in this checkpoint's card "
    "(e.g. the shipped generalist's) instead of the defaults and --features/--text-form/--set-priors",
)
@click.option(
    "--seeds",
    default=None,
    help="with --lodo: also retrain every fold's router with each of these seeds (comma list, e.g. 0,1,2) "
    "and report the spread of its score",
)
@click.option(
    "--kb-root",
    default=None,
    type=click.Path(exists=True, file_okay=False),
    help="with --lodo: the folder holding the KB each label set was answered from (DIR/<set>, e.g. "
    "runs/labels_kb); the ranking check then also scores the chunk route's retrieval signals "
    "(training/fitting/retrieval_signals.py)",
)
@click.pass_context
def eval_router(
    ctx,
    checkpoint,
    labels,
    more_labels,
    train_labels,
    llm_spec,
    latency_n,
    no_speed,
    json_out,
    lodo,
    features,
    specialist_n,
    text_form,
    set_priors,
    hop_priors,
    hop_pairs,
    cost_weight,
    recipe,
    seeds,
    kb_root,
):
    """Judge a router on held-out labels: accuracy vs oracle, macro-F1, confusion, per-dataset
    routes, baselines (majority, logistic regression, fixed routes, optional LLM), speed."""
    from training.fitting.eval_router import evaluate_checkpoint, format_report

    if lodo:
        from engine.floor.llm.factory import make_llm
        from training.fitting.cmd_train import train_config_from_options
        from training.fitting.fit import TrainConfig
        from training.fitting.lodo import lodo_report
        from training.fitting.lodo_format import format_lodo

        if recipe:
            from training.fitting.fit import config_from_card

            cfg = config_from_card(recipe)
        else:
            priors = dict(prior_per_set=set_priors, hop_priors=hop_priors, hop_pairs=hop_pairs)
            default = TrainConfig(text_form=text_form, cost_weight=cost_weight, **priors)
            cfg = train_config_from_options(default, features=features)
        rep = lodo_report(
            expand_files(labels + more_labels),
            cfg,
            embedder=injected_embedder(ctx),
            specialist_n=specialist_n,
            llm=make_llm(llm_spec) if llm_spec else None,  # cached: no latency is timed here
            seeds=parse_seeds(seeds),
            kb_root=kb_root,
            progress=True,
        )
        click.echo(format_lodo(rep))
        if json_out:
            from engine.floor.base.files import atomic_write_json

            atomic_write_json(Path(json_out), rep)
        return

    llm = None
    if llm_spec:
        from engine.floor.llm.factory import make_llm

        llm = make_llm(llm_spec, cache=False)  # a cached reply would fake the decision latency
    rep = evaluate_checkpoint(
        checkpoint,
        expand_files(labels + more_labels),
        train_files=expand_files(train_labels),
        embedder=injected_embedder(ctx),
        llm=llm,
        n_single=latency_n,
        speed=not no_speed,
    )
    click.echo(format_report(rep))
    if json_out:
        from engine.floor.base.files import atomic_write_json

        atomic_write_json(Path(json_out), rep)
        click.echo(f"report -> {json_out}", err=True)


def parse_seeds(text: str | None) -> list[int]:
    try:
        return [int(s) for s in (text or "").split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter(f"--seeds takes whole numbers separated by commas, got {text!r}") from None


COMMANDS = [calibrate, eval_router]


def share_for_budget(token_budget: float, costs: dict[str, float], route: str = "logic") -> float:
    """Share of questions the expensive route can take within an average token budget, if
    every other question goes to the cheapest other route."""
    if route not in costs:
        raise LogicRouteError(f"no cost known for route {route!r}")
    cheap = min(c for r, c in costs.items() if r != route)
    span = costs[route] - cheap
    if span <= 0:
        return 1.0
    return float(min(max((token_budget - cheap) / span, 0.0), 1.0))


def achieved_share(p_route: Sequence[float], threshold: float) -> float:
    """Share of the questions whose probability reaches the threshold."""
    import numpy as np

    p = np.asarray(p_route, dtype=np.float64)
    return float((p >= threshold).mean()) if p.size else 0.0
