"""`logicroute bench docs` (training.docs_qa.bench_docs): RoutedRAG configurations on documentation
folders, with questions the folders do not answer. Registered on the bench group by
training/commands.py; nothing heavy is imported at module level."""

from __future__ import annotations

import os
import platform
import shlex
from pathlib import Path

import click

from engine.cli_options import llm_option

DEFAULT_SYSTEMS = "chunk,before,default"


def _command_line(set_files, kbs, systems, half, out_dir, k, llm_spec, redo) -> str:
    """The command as it could be typed again (the LLM only when it is not the default)."""
    from engine.llm.base import DEFAULT_LLM

    words = ["logicroute", "bench", "docs"]
    for s, kb in zip(set_files, kbs, strict=True):
        words += ["--set-file", s, "--kb", kb]
    words += ["--systems", systems, "--half", half, "--out", out_dir]
    if k != 3:
        words += ["-k", str(k)]
    if llm_spec != DEFAULT_LLM:
        words += ["--llm", llm_spec]
    if redo:
        words.append("--redo")
    return shlex.join(words)


@click.command("docs")
@click.option(
    "--set-file",
    "set_files",
    multiple=True,
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="a question set (training/data/docs_questions/*.jsonl); repeat it, each followed by its --kb",
)
@click.option(
    "--kb",
    "kbs",
    multiple=True,
    required=True,
    type=click.Path(exists=True, file_okay=False),
    help="the KB the set's folder was indexed into (default index settings), one per --set-file, in order",
)
@click.option(
    "--systems",
    default=DEFAULT_SYSTEMS,
    show_default=True,
    help="comma list of training.docs_qa.bench_docs.SYSTEMS: chunk (route=chunk), default (RoutedRAG's defaults), "
    "before (the defaults with keep_absence, ood_kb_questions and abstain_ungrounded off)",
)
@click.option(
    "--half",
    type=click.Choice(("tune", "judge", "all")),
    default="tune",
    show_default=True,
    help="which half of each set; judge is for judging a change only",
)
@click.option("--out", "out_dir", default="docs/results/docs", show_default=True, help="folder of report.md, results")
@click.option("-k", "k", type=int, default=3, show_default=True, help="passages per retrieval")
@click.option("--concurrency", type=int, default=1, show_default=True, help="answers in flight (remote LLMs)")
@click.option("--redo", is_flag=True, help="answer every row again, ignoring results.jsonl (e.g. after a code change)")
@llm_option
@click.pass_context
def bench_docs(ctx, set_files, kbs, systems, half, out_dir, k, concurrency, redo, llm_spec):
    """Answers and abstentions on documentation folders: each --set-file's questions (positives
    with the phrases a right answer holds, and negatives the folder does not answer: off-topic
    ones and near misses) on its --kb, by every system in the reader style. Reports per set and
    pooled: positives right / abstained / wrong, negatives abstained / answered (fabrications)
    by kind, LLM calls, tokens and seconds a question, and each system paired with `before`.
    Resumable: results.jsonl keeps every answer, a rerun answers only what is missing."""
    from engine.base.errors import LogicRouteError
    from engine.cli_options import injected
    from training.common.jsonl_store import JsonlStore, exclusive_folder
    from training.docs_qa import bench_docs as bd
    from training.docs_qa.bench_docs_report import build, write
    from training.docs_qa.bench_docs_sets import read_set, select

    if len(set_files) != len(kbs):
        raise click.UsageError(f"{len(set_files)} --set-file but {len(kbs)} --kb: give one --kb after each set")
    names = bd.check_systems([s.strip() for s in systems.split(",") if s.strip()])
    sets = [bd.DocsSet(Path(f).stem, Path(f), Path(kb), select(read_set(f), half)) for f, kb in zip(set_files, kbs)]
    if len({s.name for s in sets}) != len(sets):
        raise LogicRouteError("two set files share a name: each set is reported under its file name")
    llm = injected(ctx, "llm")  # tests inject a scripted LLM through ctx.obj
    if llm is None:
        from engine.cli_options import check_llm_spec

        check_llm_spec(llm_spec)
    rag_for = injected(ctx, "rag_for") or _real_rags(llm, llm_spec, k)
    out = Path(out_dir)
    with exclusive_folder(out, "bench docs"):
        store = JsonlStore(out / "results.jsonl", key=bd.row_key)
        setup = {"llm": llm_spec if llm is None else getattr(llm, "name", "injected"), "k": k, "style": bd.STYLE}
        rows = bd.run(sets, names, store, rag_for, setup=setup, redo=redo, concurrency=concurrency)
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        run = {
            "command": _command_line(set_files, kbs, systems, half, out_dir, k, llm_spec, redo),
            "half": half,
            "style": bd.STYLE,
            "llm": setup["llm"],
            "k": k,
            "systems": {n: bd.SYSTEMS[n] for n in names},
            "sets": [
                {"name": s.name, "file": str(s.path), "kb": str(s.kb), "questions": len(s.questions)} for s in sets
            ],
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load {load} at the end",
        }
        scored = bd.scored_rows(sets, names, rows)
        errors = sum(1 for r in scored if r["outcome"] == "error")
        if errors:
            run["notes"] = [f"{errors} answer(s) failed with an error (counted neither right nor abstained)"]
        report = build(scored, [s.name for s in sets], names, bd.REFERENCE, run)
        path = write(report, out)
    for scope, per in report["sets"].items():
        for system, t in per.items():
            click.echo(
                f"{scope} {system}: positives right {t['positives_right']}/{t['positives']}, negatives abstained "
                f"{t['negatives_abstained']}/{t['negatives']}, {t['llm_calls_per_q']} calls/q"
            )
    click.echo(f"report: {path}")


def _real_rags(llm, llm_spec: str, k: int):
    """rag_for(set, system): a RoutedRAG over the set's KB (opened once per KB) with the system's
    settings, all sharing one LLM (the local model loads once)."""
    import threading

    from engine.pipeline import RoutedRAG
    from hierarchy.kb import KnowledgeBase
    from training.docs_qa.bench_docs import STYLE, SYSTEMS

    kbs: dict = {}
    shared = {"llm": llm}
    lock = threading.Lock()

    def rag_for(docs, system: str):
        with lock:
            if docs.kb not in kbs:
                kbs[docs.kb] = KnowledgeBase.open(docs.kb)
            if shared["llm"] is None:
                from engine.llm.factory import make_llm

                shared["llm"] = make_llm(llm_spec)
        options = SYSTEMS[system]["options"]
        return RoutedRAG(kb=kbs[docs.kb], llm=shared["llm"], llm_spec=llm_spec, style=STYLE, k=k, **options)

    return rag_for
