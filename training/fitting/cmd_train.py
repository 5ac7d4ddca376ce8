"""The `train generalist|specialist` commands of the `logicroute` CLI. Registered on the
`logicroute` group by training/commands.py.

Only click, the standard library and engine.face.cli's shared options at module level:
`logicroute --help` stays instant.
"""

from __future__ import annotations

from pathlib import Path

import click

from engine.face.cli_options import injected_embedder, llm_option
from training.labels.cmd_label import expand_files


@click.group()
def train() -> None:
    """Train a router: a generalist on a mix of label files, a specialist from it."""


def _common_train_options(f):
    opts = [
        click.option("--eval-labels", multiple=True, help="held-out label files (repeat, commas or globs)"),
        click.option("--hidden", default=None, help="hidden widths, e.g. 128,32"),
        click.option("--epochs", type=int, default=None, help="max epochs"),
        click.option("--lr", type=float, default=None, help="learning rate"),
        click.option("--batch-size", type=int, default=None, help="questions per step"),
        click.option("--dropout", type=float, default=None),
        click.option(
            "--patience", type=int, default=None, help="early-stopping patience (epochs; with --val-frac > 0)"
        ),
        click.option(
            "--val-frac",
            type=click.FloatRange(0.0, 0.9),
            default=None,
            help="share of the answer labels held for early stopping; 0 = train on all of them for --epochs",
        ),
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


def train_config_from_options(
    cfg,
    hidden=None,
    epochs=None,
    lr=None,
    dropout=None,
    patience=None,
    loss=None,
    all_zero=None,
    seed=None,
    features=None,
    batch_size=None,
    val_frac=None,
):
    """`cfg` with every option the user gave (not None) put in."""
    from dataclasses import replace

    from router.features import ALL_FEATURES, check_feature_set

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
        ("batch_size", batch_size),
        ("val_frac", val_frac),
    ):
        if v is not None:
            ch[k] = v
    if features is not None:
        names = (
            ()
            if features in ("", "none")
            else (ALL_FEATURES if features == "all" else tuple(x.strip() for x in features.split(",")))
        )
        try:
            ch["features"] = check_feature_set(names)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--features") from None
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
    for d, table in (card.get("lodo") or {}).items():
        cells = "  ".join(f"{s} {m['score']} ({m['tokens']:.0f} tok)" for s, m in table.items())
        click.echo(f"{'pooled' if d == 'pooled' else f'left out {d}'}: {cells}")
    if "target" in h:
        t = h["target"]
        for who in ("generalist", "specialist"):
            m = t[who]
            click.echo(
                f"target held-out (n={t['n']}) {who}: acc {m['accuracy']}  macro-F1 {m['macro_f1']}  "
                f"quality {m['quality']}"
            )


def _silver_rows_option(flag: str, what: str):
    return click.option(
        flag, flag[2:].replace("-", "_"), type=click.IntRange(min=0), default=0, show_default=True, help=what
    )


def set_priors_option(who: str):
    """--set-priors, for `train generalist` and `eval-router --lodo` (`who` starts its help)."""
    return _silver_rows_option(
        "--set-priors",
        f"{who} on this many silver rows per shared set, labelled by the set's kind: single-hop (nq, squad) "
        "chunk, multi-hop (hotpotqa, 2wiki, musique) logic (training/fitting/set_priors.py; needs ../shared/data)",
    )


def hop_priors_option(who: str):
    """--hop-priors, for `train generalist` and `eval-router --lodo` (`who` starts its help)."""
    return _silver_rows_option(
        "--hop-priors",
        f"{who} on this many one-hop sub-questions of a multi-hop set (2Wiki's), labelled chunk: lookups on "
        "multi-hop topics, so that topic alone does not decide logic (training/fitting/set_priors.py)",
    )


def hop_pairs_option(who: str):
    """--hop-pairs, for `train generalist` and `eval-router --lodo` (`who` starts its help)."""
    return _silver_rows_option(
        "--hop-pairs",
        f"{who} on this many multi-hop questions (2Wiki's) labelled logic, each with its own one-hop "
        "sub-questions labelled chunk: the same topic in both forms (training/fitting/set_priors.py)",
    )


def list_priors_option(who: str):
    """--list-priors, for `train generalist` and `eval-router --lodo` (`who` starts its help)."""
    return _silver_rows_option(
        "--list-priors",
        f"{who} on this many list questions a corpus (the tune halves of training/data/global_lists) "
        "labelled summary: questions about a whole corpus (training/fitting/set_priors.py)",
    )


def cost_weight_option(who: str):
    """--cost-weight, for `train generalist` and `eval-router --lodo` (`who` starts its help)."""
    return click.option(
        "--cost-weight",
        type=click.FloatRange(min=0),
        default=None,
        help=f"{who} on preferences recomputed at this cost weight (lam in softmax((score - lam * tokens / "
        "max tokens) / tau)) from each label row's scores and tokens: higher spends fewer tokens "
        "[default: the rows' own, 0.1]",
    )


def text_form_option(who: str):
    """--text-form, for `train generalist` and `eval-router --lodo` (`who` starts its help);
    the choices are router.features.TEXT_FORMS, written out so that --help imports no numpy."""
    return click.option(
        "--text-form",
        type=click.Choice(["question", "masked", "plain"]),
        default="question",
        show_default=True,
        help=f"{who}: the question as asked, its masked form (entities and numbers replaced: form, not "
        "topic), or its plain form (closing ? ! . removed: sets differ in them)",
    )


@train.command()
@click.option(
    "--labels", "labels", multiple=True, required=True, help="label files: --labels A B C, repeated, commas or globs"
)
@click.argument("more_labels", nargs=-1)
@click.option(
    "--out", required=True, type=click.Path(dir_okay=False), help="checkpoint path, e.g. checkpoints/mine.ckpt"
)
@click.option(
    "--features",
    default=None,
    help="structural features of the question (router/features.py): all | none | comma list "
    "[default: all but shape, the list gate's]",
)
@text_form_option("text embedded")
@set_priors_option("also train the router")
@hop_priors_option("also train the router")
@hop_pairs_option("also train the router")
@list_priors_option("also train the router")
@cost_weight_option("train the router")
@click.option(
    "--lodo/--no-lodo",
    default=False,
    help="also judge the recipe leave-one-dataset-out on the same labels and keep the figures in the card",
)
@_common_train_options
@click.pass_context
def generalist(
    ctx,
    labels,
    more_labels,
    out,
    features,
    text_form,
    set_priors,
    hop_priors,
    hop_pairs,
    list_priors,
    cost_weight,
    lodo,
    hidden,
    epochs,
    lr,
    batch_size,
    dropout,
    patience,
    val_frac,
    loss,
    all_zero,
    seed,
    eval_labels,
    notes,
    progress,
):
    """Train a generalist router on a mix of label files."""
    from training.fitting.fit import TrainConfig
    from training.fitting.train import train_generalist

    cfg = train_config_from_options(
        TrainConfig(
            text_form=text_form,
            prior_per_set=set_priors,
            hop_priors=hop_priors,
            hop_pairs=hop_pairs,
            list_priors=list_priors,
            cost_weight=cost_weight,
        ),
        hidden,
        epochs,
        lr,
        dropout,
        patience,
        loss,
        all_zero,
        seed,
        features,
        batch_size,
        val_frac,
    )
    files, embedder = expand_files(labels + more_labels), injected_embedder(ctx)
    extras = {}
    if lodo:
        from training.fitting.lodo import lodo_report
        from training.fitting.lodo_format import lodo_summary

        extras["lodo"] = lodo_summary(lodo_report(files, cfg, embedder=embedder))
    card = train_generalist(
        files,
        out,
        cfg,
        eval_files=expand_files(eval_labels),
        embedder=embedder,
        progress=progress,
        notes=notes,
        card_extras=extras,
    )
    _print_card(card, out)


@train.command()
@click.option(
    "--from",
    "from_ckpt",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="generalist checkpoint to start from (default: the shipped generalist)",
)
@click.option("--labels", "labels", multiple=True, help="target-domain label file(s)")
@click.argument("more_labels", nargs=-1)
@click.option(
    "--questions",
    "questions_file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="your own questions over --kb, JSONL {question, answers} (or answer): every route answers each "
    "and is scored against its answers (resumable), then the specialist is trained on those labels",
)
@click.option("--kb", "kb_dir", type=click.Path(file_okay=False), default=None, help="the KB --questions are about")
@llm_option(help="LLM that answers --questions on every route: local:MODEL, openai:MODEL or openai:MODEL@BASE_URL")
@click.option("--out", required=True, type=click.Path(dir_okay=False))
@click.option("--holdout", default=0.2, show_default=True, help="target share held out when no --eval-labels")
@_common_train_options
@click.pass_context
def specialist(
    ctx,
    from_ckpt,
    labels,
    more_labels,
    questions_file,
    kb_dir,
    llm_spec,
    out,
    holdout,
    hidden,
    epochs,
    lr,
    batch_size,
    dropout,
    patience,
    val_frac,
    loss,
    all_zero,
    seed,
    eval_labels,
    notes,
    progress,
):
    """Fine-tune a generalist on target-domain labels (lower LR, few epochs); reports
    generalist vs specialist on the target held-out split. With --questions and --kb, the labels
    are made first from your own questions (written beside --out as OUT.labels.jsonl)."""
    from router.checkpoint import DEFAULT_CHECKPOINT
    from training.fitting.fit import specialist_config
    from training.fitting.train import train_specialist

    if hidden or dropout is not None:
        raise click.BadParameter("a specialist keeps its generalist's architecture (no --hidden/--dropout)")
    if (questions_file is None) != (kb_dir is None):
        raise click.UsageError("--questions and --kb go together: your questions and the KB they are about")
    if not (labels or more_labels or questions_file):
        raise click.UsageError("give --labels FILE, or --questions FILE --kb DIR to make them")
    if questions_file is not None:
        from training.labels.own_questions import label_own_questions

        made = label_own_questions(
            questions_file, kb_dir, Path(out).with_suffix(".labels.jsonl"), llm_spec, injected_embedder(ctx)
        )
        labels = (*labels, str(made))
    cfg = train_config_from_options(
        specialist_config(),
        epochs=epochs,
        lr=lr,
        patience=patience,
        loss=loss,
        all_zero=all_zero,
        seed=seed,
        batch_size=batch_size,
        val_frac=val_frac,
    )
    card = train_specialist(
        from_ckpt or str(DEFAULT_CHECKPOINT),
        expand_files(labels + more_labels),
        out,
        cfg,
        eval_files=expand_files(eval_labels),
        holdout_frac=holdout,
        embedder=injected_embedder(ctx),
        progress=progress,
        notes=notes,
    )
    _print_card(card, out)


COMMANDS = [train]
