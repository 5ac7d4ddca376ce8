"""Router commands of the `logicroute` CLI: label, train generalist|specialist,
calibrate, eval-router. Registered on the `logicroute` group by training/commands.py.

Only click, the standard library and engine.cli's shared options at module level:
`logicroute --help` stays instant.
Tests inject a tiny embedder with `CliRunner().invoke(cmd, args, obj={"embedder": fake})`.
"""

from __future__ import annotations

import glob
from pathlib import Path

import click

from engine.base.errors import LogicRouteError
from engine.cli import injected_embedder, llm_option


def _files(values) -> list[str]:
    """Expand repeated / comma-separated / glob file arguments, keeping order, no duplicates."""
    out: list[str] = []
    for v in values:
        for part in str(v).split(","):
            part = part.strip()
            if not part:
                continue
            hits = sorted(glob.glob(part)) if any(ch in part for ch in "*?[") else [part]
            if not hits:
                raise LogicRouteError(f"no file matches {part!r}")
            out.extend(hits)
    return list(dict.fromkeys(out))


def _routes(value: str) -> tuple[str, ...]:
    routes = tuple(r.strip() for r in value.split(",") if r.strip())
    if len(routes) < 2:
        raise click.BadParameter("give at least two routes, e.g. chunk,logic")
    return routes


# ---------------------------------------------------------------- label


@click.command()
@click.argument("data", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--kb",
    "kb_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="knowledge base built from DATA's passages (see --build-kb)",
)
@click.option(
    "--out", required=True, type=click.Path(dir_okay=False), help="label file (JSONL); resumed when it exists"
)
@click.option(
    "--scorer",
    type=click.Choice(["answer", "retrieval"]),
    default="answer",
    show_default=True,
    help="answer: run each route with the LLM and score its answer; retrieval: LLM-free, "
    "supporting-passage recall of each route's context",
)
@click.option("--n", type=int, default=None, help="number of questions (default: all)")
@click.option("--offset", type=int, default=0, show_default=True, help="first question index")
@click.option(
    "--stride",
    type=int,
    default=1,
    show_default=True,
    help="take every STRIDE-th question (spreads a sample over e.g. SQuAD's articles)",
)
@click.option(
    "--routes", "routes", default="chunk,summary,logic", show_default=True, help="routes to label, cheapest first"
)
@click.option(
    "--metric",
    type=click.Choice(["f1", "em", "string_acc", "acc"]),
    default="f1",
    show_default=True,
    help="answer scorer metric (string_acc = LogicRAG string accuracy; acc is the same)",
)
@click.option("--k", default=3, show_default=True, help="chunks per retrieval")
@click.option("--lam", default=0.1, show_default=True, help="cost weight in the preference vector")
@click.option("--tau", default=0.1, show_default=True, help="temperature of the preference softmax")
@llm_option(help="LLM of the answer scorer: local:MODEL, openai:MODEL or openai:MODEL@BASE_URL")
@click.option(
    "--build-kb",
    is_flag=True,
    help="when --kb holds no KB, build it from the passages of the questions read "
    "(with --stride: of every question in the span read), with extractive summary "
    "layers when 'summary' is a route",
)
@click.option("--no-cache", is_flag=True, help="do not use the on-disk LLM call cache")
@click.pass_context
def label(ctx, data, kb_dir, out, scorer, n, offset, stride, routes, metric, k, lam, tau, llm_spec, build_kb, no_cache):
    """Label questions of DATA with each route's score, cost and preference vector."""
    from hierarchy.kb import KnowledgeBase
    from training.label_scorers import LabelConfig
    from training.labels import label_questions, select_questions
    from training.passage_kb import passages_kb

    routes_t = _routes(routes)
    emb = injected_embedder(ctx)
    questions, ds = select_questions(data, n=n, offset=offset, stride=stride)
    kb_path = Path(kb_dir)
    if not KnowledgeBase.exists(kb_path):
        if not build_kb:
            raise LogicRouteError(
                f"no knowledge base at {kb_path}: pass --build-kb or run `logicroute index {data} --kb {kb_path}`"
            )
        click.echo(f"building the KB at {kb_path} from {len(ds.passages)} passages", err=True)
        kb = passages_kb(kb_path, ds.passages, emb, layers="summary" in routes_t)
    else:
        kb = KnowledgeBase.open(kb_path, emb)
    llm = None
    if scorer == "answer":
        from engine.llm.factory import make_llm

        llm = make_llm(llm_spec, cache=not no_cache)
    cfg = LabelConfig(
        scorer=scorer,
        routes=routes_t,
        metric=metric,
        k=k,
        lam=lam,
        tau=tau,
        llm=llm_spec if scorer == "answer" else None,
    )
    indices = [offset + i * stride for i in range(len(questions))]
    res = label_questions(questions, kb, out, cfg, llm=llm, indices=indices)
    click.echo(
        f"{res['written']} rows written, {res['skipped']} already there, {res['all_zero']} all-zero -> {res['out']}",
        err=True,
    )


# ---------------------------------------------------------------- train


@click.group()
def train() -> None:
    """Train a router: a generalist on a mix of label files, a specialist from it."""


def _common_train_options(f):
    opts = [
        click.option("--eval-labels", multiple=True, help="held-out label files (repeat, commas or globs)"),
        click.option("--hidden", default=None, help="hidden widths, e.g. 128,32"),
        click.option("--epochs", type=int, default=None, help="max epochs"),
        click.option("--lr", type=float, default=None, help="learning rate"),
        click.option("--dropout", type=float, default=None),
        click.option("--patience", type=int, default=None, help="early-stopping patience (epochs)"),
        click.option(
            "--loss",
            type=click.Choice(["reward", "ce"]),
            default=None,
            help="reward: -(y_hard . pref) + small CE anchor; ce: cross-entropy to pref",
        ),
        click.option(
            "--all-zero",
            type=click.Choice(["cheapest", "pref", "drop"]),
            default=None,
            help="target for rows where no route scored",
        ),
        click.option("--seed", type=int, default=None),
        click.option("--notes", default="", help="free text stored in the card"),
        click.option("--progress/--no-progress", default=False, help="Lightning progress bar"),
    ]
    for o in reversed(opts):  # decorators apply bottom-up: keep --help in this order
        f = o(f)
    return f


def _apply(cfg, hidden, epochs, lr, dropout, patience, loss, all_zero, seed, features=None):
    from dataclasses import replace

    from router.features import ALL_FEATURES

    ch = {}
    if hidden:
        parts = [int(h) for h in hidden.split(",")]
        if len(parts) != 2:
            raise click.BadParameter("--hidden takes two widths, e.g. 128,32")
        ch["hidden"] = tuple(parts)
    for k, v in (
        ("max_epochs", epochs),
        ("lr", lr),
        ("dropout", dropout),
        ("patience", patience),
        ("loss", loss),
        ("all_zero", all_zero),
        ("seed", seed),
    ):
        if v is not None:
            ch[k] = v
    if features is not None:
        ch["features"] = (
            ()
            if features in ("", "none")
            else (ALL_FEATURES if features == "all" else tuple(x.strip() for x in features.split(",")))
        )
    return replace(cfg, **ch)


def _print_card(card: dict, out: str) -> None:
    click.echo(f"saved {out} (+ {Path(out).name.removesuffix('.ckpt')}.card.json)", err=True)
    v = card.get("validation") or {}
    if v:
        click.echo(f"validation: acc {v.get('accuracy')}  macro-F1 {v.get('macro_f1')}  quality {v.get('quality')}")
    h = card.get("heldout") or {}
    if "router" in h:
        m = h["router"]
        click.echo(
            f"held-out: acc {m['accuracy']}  macro-F1 {m['macro_f1']}  quality {m['quality']}  share {m['route_share']}"
        )
        for b, bm in h.get("baselines", {}).items():
            click.echo(f"  {b:<22} acc {bm['accuracy']}  macro-F1 {bm['macro_f1']}  quality {bm['quality']}")
    if "target" in h:
        t = h["target"]
        for who in ("generalist", "specialist"):
            m = t[who]
            click.echo(
                f"target held-out (n={t['n']}) {who}: acc {m['accuracy']}  macro-F1 {m['macro_f1']}  "
                f"quality {m['quality']}"
            )


@train.command()
@click.option(
    "--labels", "labels", multiple=True, required=True, help="label files: --labels A B C, repeated, commas or globs"
)
@click.argument("more_labels", nargs=-1)
@click.option(
    "--out", required=True, type=click.Path(dir_okay=False), help="checkpoint path, e.g. checkpoints/mine.ckpt"
)
@click.option("--features", default=None, help="cheap features: all | none | comma list [default: all]")
@_common_train_options
@click.pass_context
def generalist(
    ctx,
    labels,
    more_labels,
    out,
    features,
    hidden,
    epochs,
    lr,
    dropout,
    patience,
    loss,
    all_zero,
    seed,
    eval_labels,
    notes,
    progress,
):
    """Train a generalist router on a mix of label files."""
    from training.train import TrainConfig, train_generalist

    cfg = _apply(TrainConfig(), hidden, epochs, lr, dropout, patience, loss, all_zero, seed, features)
    card = train_generalist(
        _files(labels + more_labels),
        out,
        cfg,
        eval_files=_files(eval_labels),
        embedder=injected_embedder(ctx),
        progress=progress,
        notes=notes,
    )
    _print_card(card, out)


@train.command()
@click.option(
    "--from",
    "from_ckpt",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="generalist checkpoint to start from",
)
@click.option("--labels", "labels", multiple=True, required=True, help="target-domain label file(s)")
@click.argument("more_labels", nargs=-1)
@click.option("--out", required=True, type=click.Path(dir_okay=False))
@click.option(
    "--holdout",
    default=0.2,
    show_default=True,
    help="target share held out for the report when no --eval-labels are given",
)
@_common_train_options
@click.pass_context
def specialist(
    ctx,
    from_ckpt,
    labels,
    more_labels,
    out,
    holdout,
    hidden,
    epochs,
    lr,
    dropout,
    patience,
    loss,
    all_zero,
    seed,
    eval_labels,
    notes,
    progress,
):
    """Fine-tune a generalist on target-domain labels (lower LR, few epochs); reports
    generalist vs specialist on the target held-out split."""
    from training.train import specialist_config, train_specialist

    if hidden or dropout is not None:
        raise click.BadParameter("a specialist keeps its generalist's architecture (no --hidden/--dropout)")
    cfg = _apply(specialist_config(), None, epochs, lr, None, patience, loss, all_zero, seed)
    card = train_specialist(
        from_ckpt,
        _files(labels + more_labels),
        out,
        cfg,
        eval_files=_files(eval_labels),
        holdout_frac=holdout,
        embedder=injected_embedder(ctx),
        progress=progress,
        notes=notes,
    )
    _print_card(card, out)


# ---------------------------------------------------------------- route / calibrate


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
@click.pass_context
def calibrate(ctx, questions_file, checkpoint, logic_share, token_budget, costs_file, gated, out):
    """Calibrate a threshold on P(logic) on your own questions (RouteLLM-style quantile), for a
    target share of logic calls or a token budget."""
    from router.checkpoint import load_router
    from router.policy import NOMINAL_TOKENS, Policy, achieved_share, calibrate_share, share_for_budget

    if (logic_share is None) == (token_budget is None):
        raise click.UsageError("give exactly one of --logic-share or --token-budget")
    from hierarchy.datasets import read_questions

    qs = read_questions(questions_file)
    if not qs:
        raise LogicRouteError(f"{questions_file}: no questions")
    router = load_router(checkpoint, embedder=injected_embedder(ctx))
    if gated not in router.routes:
        raise LogicRouteError(f"the router has no route {gated!r} (routes: {', '.join(router.routes)})")
    costs = {r: NOMINAL_TOKENS.get(r, NOMINAL_TOKENS["logic"]) for r in router.routes}
    cost_source = "nominal (ARCHITECTURE.md anchor)"
    if costs_file:
        from training.labels import read_labels, route_cost

        rows = read_labels(costs_file)
        measured = {r: [route_cost(x["costs"][r]) for x in rows if r in x.get("costs", {})] for r in router.routes}
        if all(measured.values()):
            costs = {r: sum(v) / len(v) for r, v in measured.items()}
            cost_source = str(costs_file)
    share = logic_share if token_budget is None else share_for_budget(token_budget, costs, gated)
    p = router.probs_array(qs)[:, list(router.routes).index(gated)]
    t = calibrate_share(p, share)
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


# ---------------------------------------------------------------- eval-router


@click.command("eval-router")
@click.option("--checkpoint", default=None, help="router checkpoint [default: shipped]")
@click.option("--labels", "labels", multiple=True, required=True, help="held-out label files")
@click.argument("more_labels", nargs=-1)
@click.option(
    "--train-labels",
    multiple=True,
    help="training label files for the majority / logistic-regression baselines [default: the card's]",
)
@click.option("--llm-baseline", "llm_spec", default=None, help="also ask this LLM to pick routes (timed)")
@click.option("--latency-n", default=50, show_default=True, help="single decisions timed")
@click.option("--no-speed", is_flag=True, help="skip latency / throughput")
@click.option("--json", "json_out", default=None, type=click.Path(dir_okay=False), help="write the report as JSON")
@click.pass_context
def eval_router(ctx, checkpoint, labels, more_labels, train_labels, llm_spec, latency_n, no_speed, json_out):
    """Judge a router on held-out labels: accuracy vs oracle, macro-F1, confusion, per-dataset
    routes, baselines (majority, logistic regression, fixed routes, optional LLM), speed."""
    from training.eval_router import evaluate_checkpoint, format_report

    llm = None
    if llm_spec:
        from engine.llm.factory import make_llm

        llm = make_llm(llm_spec, cache=False)  # a cached reply would fake the decision latency
    rep = evaluate_checkpoint(
        checkpoint,
        _files(labels + more_labels),
        train_files=_files(train_labels),
        embedder=injected_embedder(ctx),
        llm=llm,
        n_single=latency_n,
        speed=not no_speed,
    )
    click.echo(format_report(rep))
    if json_out:
        from engine.base.files import atomic_write_json

        atomic_write_json(Path(json_out), rep)
        click.echo(f"report -> {json_out}", err=True)


COMMANDS = [label, train, calibrate, eval_router]
