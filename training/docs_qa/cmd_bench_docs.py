"""`logicroute bench docs` (training.docs_qa.bench_docs): RoutedRAG configurations on documentation
folders, with questions the folders do not answer. Registered on the bench group by
training/commands.py; nothing heavy is imported at module level."""

from __future__ import annotations

from pathlib import Path

import click

from engine.face.cli_options import llm_option
from training.common.bench_sets_cli import check_set_kbs, command_line, run_record, set_kb_options
from training.common.bench_signature import router_fingerprint

DEFAULT_SYSTEMS = "chunk,before,default"


@click.command("docs")
@set_kb_options(
    set_help="a question set (training/data/docs_questions/*.jsonl); repeat it, each followed by its --kb",
    kb_help="the KB the set's folder was indexed into (default index settings), one per --set-file, in order",
    systems=click.option(
        "--systems",
        default=DEFAULT_SYSTEMS,
        show_default=True,
        help="comma list of training.docs_qa.bench_docs.SYSTEMS: chunk (route=chunk), default (RoutedRAG's "
        "defaults), before (the defaults with keep_absence, ood_kb_questions and abstain_ungrounded off)",
    ),
    out_default="docs/results/docs",
)
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
    from engine.face.cli_options import injected
    from engine.floor.base.errors import LogicRouteError
    from training.common.jsonl_store import JsonlStore, exclusive_folder
    from training.docs_qa import bench_docs as bd
    from training.docs_qa.bench_docs_report import build, write
    from training.docs_qa.bench_docs_sets import read_set, select

    check_set_kbs(set_files, kbs)
    names = bd.check_systems([s.strip() for s in systems.split(",") if s.strip()])
    sets = [bd.DocsSet(Path(f).stem, Path(f), Path(kb), select(read_set(f), half)) for f, kb in zip(set_files, kbs)]
    if len({s.name for s in sets}) != len(sets):
        raise LogicRouteError("two set files share a name: each set is reported under its file name")
    llm = injected(ctx, "llm")  # tests inject a scripted LLM through ctx.obj
    if llm is None:
        from engine.face.cli_options import check_llm_spec

        check_llm_spec(llm_spec)
    rag_for = injected(ctx, "rag_for") or _real_rags(llm, llm_spec, k)
    out = Path(out_dir)
    with exclusive_folder(out, "bench docs"):
        store = JsonlStore(out / "results.jsonl", key=bd.row_key)
        setup = {"llm": llm_spec if llm is None else getattr(llm, "name", "injected"), "k": k, "style": bd.STYLE}
        setup["router"] = router_fingerprint()
        rows = bd.run(sets, names, store, rag_for, setup=setup, redo=redo, concurrency=concurrency)
        flags = ["--redo"] if redo else []
        command = command_line("docs", set_files, kbs, systems, half, out_dir, k, llm_spec, *flags)
        run = run_record(command, half, bd.STYLE, setup["llm"], k, {n: bd.SYSTEMS[n] for n in names}, sets)
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

    from engine.core.pipeline import RoutedRAG
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
                from engine.floor.llm.factory import make_llm

                shared["llm"] = make_llm(llm_spec)
        options = SYSTEMS[system]["options"]
        return RoutedRAG(kb=kbs[docs.kb], llm=shared["llm"], llm_spec=llm_spec, style=STYLE, k=k, **options)

    return rag_for
