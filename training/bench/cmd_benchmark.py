"""The benchmark commands of `logicroute`: benchmark (routing decisions, training/bench/benchmark.py)
and, under `logicroute bench`, logic, summary, index and reader. Registered on the group by
training/commands.py. Nothing heavy is imported at module level."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from engine.core.routes import ROUTES
from engine.face.cli_options import llm_option, style_option
from engine.floor.base.errors import LogicRouteError
from training.bench.bench_data import ESCALATE_BELOW
from training.common.answer_scores import ALIASES, METRICS
from training.common.logic_experiment import logic_preset_option


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {text!r}") from None


@click.command()
@click.argument("data", nargs=-1, required=True)
@click.option("--n", type=int, default=50, show_default=True, help="questions per data file (0 = all)")
@click.option("--offset", type=int, default=0, show_default=True, help="first question taken from each file")
@click.option(
    "--corpus",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="corpus file of the data files whose questions share one (GraphRAG-Bench; default: the *_corpus.json "
    "beside each); their KB is the whole corpus",
)
@click.option(
    "--kb-per-dataset",
    is_flag=True,
    help="one KB per data file from its questions' passages (default: one KB over all files)",
)
@click.option(
    "--kb-questions",
    type=int,
    default=None,
    help="build the KB from the passages of the first max(N, this) questions (more distractors)",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="output folder: KBs, results.jsonl (resumable), report.json/.md, plots",
)
@click.option("--checkpoint", default=None, help="router checkpoint (default: shipped generalist)")
@click.option(
    "--labels",
    "label_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False),
    help="label file(s) of the answer scorer: their per-route answers (same LLM and k) are reused "
    "instead of answering again (repeatable)",
)
@click.option(
    "--routes",
    default="chunk,summary,logic",
    show_default=True,
    help="fixed routes to run (router systems choose among these)",
)
@click.option(
    "--thresholds", default="0.25,0.5,0.75", show_default=True, help="P(logic) thresholds of the router@t systems"
)
@click.option(
    "--metric",
    type=click.Choice([*METRICS, *ALIASES]),
    default="f1",
    show_default=True,
    help="score of the oracle and of the cost-quality analysis (acc = string_acc; rouge_l and coverage for "
    "sentence answers)",
)
@style_option("auto")
@logic_preset_option
@click.option("--k", default=3, show_default=True, help="chunks per retrieval")
@click.option("--seed", default=0, show_default=True, help="seed of the random router")
@click.option(
    "--concurrency",
    default=1,
    show_default=True,
    help="questions answered at once (helps remote endpoints; the local model serializes)",
)
@click.option(
    "--logic-max-seconds",
    type=float,
    default=1800.0,
    show_default=True,
    help="wall-clock cap of one logic answer (0 = the route's default, 300 s; a low cap makes "
    "results depend on machine load)",
)
@click.option("--no-llm-router", is_flag=True, help="leave out the LLM-as-router baseline")
@click.option(
    "--no-self-check",
    is_flag=True,
    help="leave out router+check (the self-check asked about the router's cheap answers, one LLM call each)",
)
@click.option(
    "--escalate-below",
    type=click.FloatRange(min=0, max=1, min_open=True),
    default=ESCALATE_BELOW,
    show_default=True,
    help="router+confidence: a cheap answer whose confidence (the local model's) is below this goes to logic",
)
@click.option(
    "--retrieval",
    "retrievals",
    multiple=True,
    type=click.Choice(["dense", "lexical", "hybrid"]),
    help="what every route's searches do (default: the KB's own, hybrid for a new KB); repeated: one run per "
    "mode in OUT/<mode>, compared in OUT/retrieval.md",
)
@click.option("--retry-errors", is_flag=True, help="answer again the questions that failed in an earlier run")
@click.option("--no-cache", is_flag=True, help="do not use the on-disk LLM call cache")
@llm_option
def benchmark(
    data,
    n,
    offset,
    corpus,
    kb_per_dataset,
    kb_questions,
    out_dir,
    checkpoint,
    label_files,
    routes,
    thresholds,
    metric,
    style,
    k,
    seed,
    concurrency,
    logic_preset,
    logic_max_seconds,
    no_llm_router,
    no_self_check,
    escalate_below,
    retrievals,
    retry_errors,
    no_cache,
    llm_spec,
):
    """Compare routing decisions on DATA files (paths or names: hotpotqa, 2wiki, musique, nq,
    squad, medical): fixed routes, the router (argmax and thresholds), the oracle, a random router and
    an LLM as router; EM/F1/accuracy, costs, and a RouteLLM cost-quality analysis. Resumable:
    rerun the same command to continue."""
    from dataclasses import replace

    from training.bench.bench_data import BenchConfig
    from training.bench.bench_report import summary_lines
    from training.bench.benchmark import run_benchmark
    from training.common.shared_data import resolve_data

    cfg = BenchConfig(
        data=[resolve_data(d) for d in data],
        out=out_dir,
        n=n or None,
        offset=offset,
        corpus=corpus,
        kb_per_dataset=kb_per_dataset,
        kb_questions=kb_questions,
        llm_spec=llm_spec,
        checkpoint=checkpoint,
        labels=list(label_files),
        routes=tuple(r.strip() for r in routes.split(",") if r.strip()),
        thresholds=_floats(thresholds),
        metric=metric,
        style=style,
        seed=seed,
        k=k,
        logic_preset=logic_preset,
        concurrency=concurrency,
        logic_max_seconds=logic_max_seconds or None,
        llm_router=not no_llm_router,
        self_check=not no_self_check,
        escalate_below=escalate_below,
        cache=not no_cache,
        retry_errors=retry_errors,
    )
    modes = list(dict.fromkeys(retrievals)) or [None]
    reports = {}
    for mode in modes:
        out = out_dir if len(modes) == 1 else str(Path(out_dir) / mode)
        cfg = replace(cfg, out=out, retrieval=mode)
        reports[mode] = run_benchmark(cfg, echo=lambda s: click.echo(s, err=True))
        click.echo("\n".join(summary_lines(reports[mode], out, mode)))
    if len(modes) > 1:
        from training.bench.bench_retrieval_compare import write_comparison

        command = "logicroute " + " ".join(sys.argv[1:])
        click.echo(f"side by side: {write_comparison(reports, out_dir, command)}")


@click.command("logic")
@click.option("--n", type=int, default=30, show_default=True, help="first N questions of each data set")
@click.option(
    "--offset",
    type=int,
    default=0,
    show_default=True,
    help="ask the questions [OFFSET, OFFSET+N) against a KB of the passages of [OFFSET, OFFSET+KB_N): "
    "an untuned second check (e.g. --offset 100)",
)
@click.option(
    "--kb-n",
    type=int,
    default=100,
    show_default=True,
    help="KB = the passages of the first KB_N questions of each file",
)
@click.option(
    "--systems",
    default="chunk,logic,logic-no-merge,logic-no-memory,logic-with-replacement,logic-no-reflection",
    show_default=True,
    help="comma list of: chunk, logic, logic-no-merge, logic-no-memory, logic-with-replacement, "
    "logic-no-reflection (each switches one mechanism off), logic-last-hop-chunks, logic-dag-single-hop, "
    "logic-lean (every cost cut on) and its rows logic-lean-whole-chunks, logic-lean-long-prompts, "
    "logic-lean-always-reflect, logic-lean-final-call (each turns one cut back off), logic-lean-memory150, "
    "logic-lean-compact, logic-lean-compact-ev60, logic-lean-questions, logic-lean-no-reflect-notes, "
    "logic-lean-examples1, logic-lean-examples2, logic-lean-reflect-unknown and its rows "
    "logic-lean-reflect-unknown-long-prompts, logic-lean-reflect-unknown-whole-chunks, "
    "logic-lean-reflect-unknown-ev200, logic-forms, logic-lean-forms, logic-lean-forms-ev100, "
    "logic-lean-forms-compressed (plans read off the question's form)",
)
@click.option(
    "--datasets",
    default="2wiki,musique",
    show_default=True,
    help="comma list of 2wiki, musique (the first questions: all 2-hop), musique-34hop (3- and 4-hop)",
)
@click.option("--k", default=3, show_default=True, help="chunks per retrieval")
@click.option("--out", "out_dir", default="runs/bench_logic", show_default=True, type=click.Path(file_okay=False))
@click.option("--no-cache", is_flag=True, help="every LLM call made for real (timings): not through the on-disk cache")
@llm_option
def bench_logic(n, offset, kb_n, systems, datasets, k, out_dir, no_cache, llm_spec):
    """The logic route against the chunk route on 2Wiki and MuSiQue, per question type, with the
    paper's ablations (graph pruning, context pruning, reflection, sampling without replacement
    each switched off) and its reference numbers. Resumable; LLM calls through the cache."""
    from training.bench.bench_logic import main

    try:
        main(
            n,
            out_dir,
            llm_spec,
            systems=[s.strip() for s in systems.split(",") if s.strip()],
            datasets=[d.strip() for d in datasets.split(",") if d.strip()],
            k=k,
            kb_n=kb_n,
            offset=offset,
            cache=not no_cache,
        )
    except ValueError as e:
        raise LogicRouteError(str(e)) from None
    click.echo(f"report: {Path(out_dir) / 'report.md'}")


@click.command("summary")
@click.option(
    "--parts",
    default="build,qa",
    show_default=True,
    help="build: layer build cost and incremental update on HotpotQA's ~5,000 passages; "
    "qa: summary vs chunk route answers",
)
@click.option(
    "--corpora",
    default="full,small",
    show_default=True,
    help="qa corpora: full (all HotpotQA passages + 500 NQ questions'), small (the questions' own)",
)
@click.option("--n-hotpot", type=int, default=30, show_default=True)
@click.option("--n-nq", type=int, default=30, show_default=True)
@click.option("--no-llm-summaries", is_flag=True, help="skip the LLM-written layers (small corpus)")
@click.option("--force", is_flag=True, help="redo the build part even when build.json exists")
@click.option(
    "--modes",
    default="cold,warm",
    show_default=True,
    help="build part: cold (fresh embedding cache per step, the worst case) and/or warm",
)
@click.option("--out", "out_dir", default="runs/bench_summary", show_default=True, type=click.Path(file_okay=False))
@llm_option
def bench_summary(parts, corpora, n_hotpot, n_nq, no_llm_summaries, force, modes, out_dir, llm_spec):
    """Summary layers: build cost (zero LLM tokens with extractive summaries) beside published
    graph-RAG indexing costs, incremental add vs full rebuild, and the summary route vs the chunk
    route with extractive and LLM-written summaries. Resumable per part and per question."""
    from training.bench.bench_summary import main

    try:
        main(
            out_dir,
            parts=[p.strip() for p in parts.split(",") if p.strip()],
            n_hotpot=n_hotpot,
            n_nq=n_nq,
            llm=llm_spec,
            corpora=[c.strip() for c in corpora.split(",") if c.strip()],
            llm_summaries=not no_llm_summaries,
            force=force,
            build_modes=[m.strip() for m in modes.split(",") if m.strip()],
        )
    except ValueError as e:
        raise LogicRouteError(str(e)) from None
    click.echo(f"report: {Path(out_dir) / 'report.md'}")


@click.command("index")
@click.option(
    "--data",
    default="hotpotqa",
    show_default=True,
    help="QA data file whose passages are indexed (or a shared data set name)",
)
@click.option("--limit", type=int, default=None, help="index only the first N passages")
@click.option("--queries", type=int, default=200, show_default=True, help="questions used for latency")
@click.option("--k", default=3, show_default=True, help="chunks per search")
@click.option("--batch-size", default=64, show_default=True, help="embedding batch size of the KB build")
@click.option("--no-sandwich", is_flag=True, help="run the bare baseline once (before the build) only")
@click.option("--out", default=None, type=click.Path(dir_okay=False), help="write the result JSON here")
def bench_index(data, limit, queries, k, batch_size, no_sandwich, out):
    """The chunk index: KB build throughput against bare SentenceTransformer.encode on the
    same texts (cold embedding cache), and search latency. Prints the result as JSON."""
    from training.bench.bench_index import run_bench
    from training.common.shared_data import resolve_data

    res = run_bench(
        resolve_data(data),
        limit=limit,
        n_queries=queries,
        k=k,
        batch_size=batch_size,
        sandwich=not no_sandwich,
        log=lambda m: print(m, file=sys.stderr),
    )
    if out:
        from engine.floor.base.files import atomic_write_json

        atomic_write_json(out, res)
    click.echo(json.dumps(res))


@click.command("reader")
@click.argument("data", default="demo")
@click.option("--n", type=int, default=30, show_default=True, help="questions of DATA (the demo has 8)")
@click.option("--offset", type=int, default=0, show_default=True, help="first question of DATA")
@click.option("--route", type=click.Choice(ROUTES), default=ROUTES[0], show_default=True)
@click.option("--k", default=3, show_default=True, help="chunks per retrieval")
@click.option(
    "--system",
    "systems",
    multiple=True,
    help="compare systems side by side (repeatable): [short:|reader:]NAME[+FIELD=VALUE...], NAME a route, "
    "routed (the router decides, as `ask` does) or a logic preset, FIELD a LogicExperiment field "
    "(training/common/logic_experiment.py), e.g. reader:paper, short:lean, reader:lean+reshow_best=0 "
    "[default: --route in the reader style]",
)
@click.option("--out", "out_dir", default=None, help="output folder [default: runs/bench_reader/<DATA>]")
@click.option("--no-cache", is_flag=True, help="every LLM call made for real (timings): not through the on-disk cache")
@llm_option
@click.pass_context
def bench_reader(ctx, data, n, offset, route, k, systems, out_dir, no_cache, llm_spec):
    """Reader-style answers (sentences citing passages) on DATA: a shared set name or QA file, or
    'demo' (the shipped corpus). How often the reply contains a gold answer, cites a passage, names
    only listed passages, and says "not in the indexed documents", wrongly so when a gold answer was
    in its passages; for the logic route, the share of sub-answers no passage states."""
    from engine.face.cli_options import injected_embedder
    from engine.floor.llm.factory import make_llm
    from hierarchy.indexing import index_sources
    from training.bench.bench_reader import DEMO, demo_questions, run_bench_reader

    out = Path(out_dir or Path("runs") / "bench_reader" / Path(data).stem)
    emb = injected_embedder(ctx)
    if data == DEMO:
        items, corpus = demo_questions()
        kb = index_sources(out / "kb", [corpus], summaries="extractive", embedder=emb).kb
    else:
        from training.common.passage_kb import passages_kb
        from training.common.shared_data import resolve_data
        from training.labels.labels import select_questions

        questions, ds, _ = select_questions(resolve_data(data), n=n, offset=offset)
        items = [(q.id, q.text, q.answers) for q in questions]
        layers = route == "summary" or any(":summary" in s or s == "summary" for s in systems)
        kb = passages_kb(out / "kb", ds.passages, emb, layers=layers)
    llm = make_llm(llm_spec, cache=not no_cache)
    report = run_bench_reader(items, kb, llm, out, route=route, k=k, systems=systems)
    click.echo(json.dumps(report, indent=2))


COMMANDS = [benchmark]
BENCH_COMMANDS = [bench_logic, bench_summary, bench_index, bench_reader]  # `logicroute bench ...`
