"""The `label` command of the `logicroute` CLI, and the expansion of the label-file arguments
that train and eval-router take. Registered on the `logicroute` group by training/commands.py.

Only click, the standard library and engine.face.cli's shared options at module level:
`logicroute --help` stays instant.
Tests inject a tiny embedder with `CliRunner().invoke(cmd, args, obj={"embedder": fake})`.
"""

from __future__ import annotations

import glob
from pathlib import Path

import click

from engine.core.routes.logic.config import PRESET_CHOICES
from engine.face.cli_options import injected_embedder, llm_option, style_option
from engine.floor.base.errors import LogicRouteError
from training.common.answer_scores import ALIASES, METRICS, gold_style


def expand_files(values) -> list[str]:
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
    """Known route names in the registry's cheapest-first order (labels and the cascade rely on it)."""
    from engine.core.routes import check_routes

    routes = check_routes(tuple(r.strip() for r in value.split(",") if r.strip()))
    if len(routes) < 2:
        raise click.BadParameter("give at least two routes, e.g. chunk,logic")
    return routes


@click.command()
@click.argument("data")
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
@click.option(
    "--corpus",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="corpus file of a DATA whose questions share one (GraphRAG-Bench; default: the *_corpus.json beside it)",
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
    type=click.Choice([*METRICS, *ALIASES]),
    default="f1",
    show_default=True,
    help="answer scorer metric (string_acc = LogicRAG string accuracy, acc is the same; rouge_l and coverage "
    "for sentence answers)",
)
@style_option("auto")
@click.option(
    "--question-type",
    default=None,
    help="label only questions of this type (e.g. 'Contextual Summarize'); --offset and --stride count within it",
)
@click.option("--k", default=3, show_default=True, help="chunks per retrieval")
@click.option("--lam", default=0.1, show_default=True, help="cost weight in the preference vector")
@click.option("--tau", default=0.1, show_default=True, help="temperature of the preference softmax")
@llm_option(help="LLM of the answer scorer: local:MODEL, openai:MODEL or openai:MODEL@BASE_URL")
@click.option(
    "--build-kb",
    is_flag=True,
    help="build the KB at --kb from the passages of the questions read (with --stride: of every question in the "
    "span read), with extractive summary layers when 'summary' is a route; a KB already there is completed "
    "(an interrupted build leaves one short)",
)
@click.option(
    "--kb-questions",
    type=int,
    default=None,
    help="with --build-kb: build the KB from the passages of this many questions from --offset (fixed, so "
    "a run that grows --n later labels against the same KB)",
)
@click.option(
    "--stop-score",
    type=float,
    default=None,
    help="answer scorer's cascade: when the cheapest route scores >= this, the others are not run (1.0 keeps "
    "the oracle label exact); default: run every route",
)
@click.option(
    "--complete",
    is_flag=True,
    help="label nothing new: run the routes a --stop-score cascade skipped on the rows of --out for the questions "
    "selected, and replace those rows with full labels (a skipped route's score is only an upper bound until then)",
)
@click.option(
    "--logic-preset",
    type=click.Choice(PRESET_CHOICES),
    default="auto",
    show_default=True,
    help="settings of the logic route (engine.core.routes.logic.config.PRESETS): auto = lean-grounded in both "
    "styles, as `ask` picks it; a row says which when not paper",
)
@click.option(
    "--rerun",
    "rerun_routes",
    default=None,
    help="with --from: label from FILE's rows, these routes run again under this run's settings (e.g. logic "
    "with --logic-preset lean), the others copied",
)
@click.option(
    "--from",
    "from_file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="label file the --rerun rows come from (its questions among those selected)",
)
@click.option("--no-cache", is_flag=True, help="do not use the on-disk LLM call cache")
@click.pass_context
def label(
    ctx,
    data,
    kb_dir,
    out,
    scorer,
    corpus,
    n,
    offset,
    stride,
    routes,
    metric,
    style,
    question_type,
    k,
    lam,
    tau,
    llm_spec,
    build_kb,
    kb_questions,
    stop_score,
    complete,
    logic_preset,
    rerun_routes,
    from_file,
    no_cache,
):
    """Label questions of DATA (a QA data file, or a shared set name: hotpotqa, 2wiki, musique,
    nq, squad, medical) with each route's score, cost and preference vector."""
    from training.common.shared_data import resolve_data

    _check_modes(scorer, stop_score, complete, rerun_routes, from_file)
    data = resolve_data(data)
    from training.labels.label_scorers import LabelConfig
    from training.labels.labels import label_questions, select_questions

    routes_t = _routes(routes)
    rerun = _rerun(rerun_routes, from_file, routes_t)
    emb = injected_embedder(ctx)
    span = {"offset": offset, "stride": stride, "corpus": corpus, "question_type": question_type}
    questions, ds, indices = select_questions(data, n=n, **span)
    if corpus and ds.corpus is None:
        raise LogicRouteError(f"--corpus: {data} reads no corpus (its questions carry their passages)")
    kb_ds = select_questions(data, n=kb_questions, **span)[1] if build_kb and kb_questions is not None else ds
    kb = _label_kb(Path(kb_dir), data, kb_ds, build_kb, emb, layers="summary" in routes_t)
    llm = None
    if scorer == "answer":
        from engine.floor.llm.factory import make_llm

        llm = make_llm(llm_spec, cache=not no_cache)
    cfg = LabelConfig(
        scorer=scorer,
        routes=routes_t,
        metric=metric,
        k=k,
        lam=lam,
        tau=tau,
        llm=llm_spec if scorer == "answer" else None,
        stop_score=stop_score,
        style=(gold_style(ds) if style == "auto" else style),
        logic_preset=logic_preset,
    )
    res = label_questions(questions, kb, out, cfg, llm=llm, indices=indices, complete=complete, rerun=rerun)
    done = "rows completed" if complete else "rows written"
    rest = "left as they are" if complete else "already there"
    click.echo(
        f"{res['written']} {done}, {res['skipped']} {rest}, {res['all_zero']} all-zero -> {res['out']}",
        err=True,
    )


COMMANDS = [label]


def _check_modes(scorer, stop_score, complete, rerun_routes, from_file) -> None:
    """Refuses the combinations of the cascade, completion and rerun modes that mean nothing."""
    if stop_score is not None and scorer != "answer":
        raise click.UsageError("--stop-score is the answer scorer's cascade: use it with --scorer answer")
    if complete and stop_score is not None:
        raise click.UsageError("--complete runs what a --stop-score cascade skipped: give one or the other")
    if (rerun_routes is None) != (from_file is None):
        raise click.UsageError("--rerun and --from go together: the routes to run again, the rows to take")
    if rerun_routes is not None and (complete or stop_score is not None or scorer != "answer"):
        raise click.UsageError("--rerun runs routes of full answer-scorer rows: not with --complete or --stop-score")


def _rerun(rerun_routes, from_file, routes_t: tuple[str, ...]):
    """--rerun's (rows of --from, routes to answer again), or None without it."""
    if rerun_routes is None:
        return None
    from training.labels.labels import read_labels

    again = tuple(r.strip() for r in rerun_routes.split(",") if r.strip())
    if not again or not set(again) <= set(routes_t):
        raise click.BadParameter(f"give routes among {','.join(routes_t)}", param_hint="--rerun")
    return read_labels(from_file), again


def _label_kb(kb_path: Path, data: str, ds, build_kb: bool, emb, *, layers: bool):
    """The KB the labels are answered from: with --build-kb built, or completed, from ds's
    passages; else opened. Never an empty one."""
    from hierarchy.kb import KnowledgeBase
    from training.common.passage_kb import passages_kb

    if build_kb:
        verb = "resuming (adding what it lacks)" if KnowledgeBase.exists(kb_path) else "building"
        click.echo(f"{verb} the KB at {kb_path} from {len(ds.passages)} passages", err=True)
        kb = passages_kb(kb_path, ds.passages, emb, layers=layers)
    elif KnowledgeBase.exists(kb_path):
        kb = KnowledgeBase.open(kb_path, emb)
    else:
        raise LogicRouteError(
            f"no knowledge base at {kb_path}: pass --build-kb or run `logicroute index {data} --kb {kb_path}`"
        )
    if not len(kb):  # a label answered from no passage would teach the router noise
        raise LogicRouteError(
            f"the knowledge base at {kb_path} holds no chunks (an interrupted build?): --build-kb completes it"
        )
    return kb
