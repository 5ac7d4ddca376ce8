"""`logicroute bench global-lists-answer` (training.global_qa.list_answer): routes answering the
list questions `bench global-lists` wrote, scored by set recall and precision. Registered on the
bench group by training/commands.py; nothing heavy at module level."""

from __future__ import annotations

from pathlib import Path

import click

from engine.face.cli_options import llm_option
from training.common.bench_sets_cli import (
    check_set_kbs,
    command_line,
    run_record,
    set_kb_options,
)
from training.common.bench_signature import router_fingerprint
from training.global_qa.list_answer import DEFAULT_SYSTEMS, SYSTEMS


@click.command("global-lists-answer")
@set_kb_options(
    set_help="a list-question file (training/data/global_lists/*.jsonl); repeat it, each followed by its --kb",
    kb_help="the KB the set's folder was indexed into (with summary layers), one per --set-file, in order",
    systems=click.option(
        "--systems",
        default=",".join(DEFAULT_SYSTEMS),
        show_default=True,
        help="comma list of: " + ", ".join(f"{n} ({s.about})" for n, s in SYSTEMS.items()),
    ),
    out_default="docs/results/global_lists",
)
@click.option("--redo", is_flag=True, help="answer every row again, ignoring results.jsonl")
@click.option(
    "--report-only",
    is_flag=True,
    help="answer nothing: the report of the rows results.jsonl holds (a run cut short, a new scorer)",
)
@llm_option
@click.pass_context
def bench_global_lists_answer(ctx, set_files, kbs, systems, half, out_dir, k, redo, report_only, llm_spec):
    """List questions answered: each --set-file's questions on its --kb by every system in the
    reader style (chunk, logic, the summary route's descent and its global mode, the default path
    as `ask --kb` answers), each answer
    scored by the recall and precision of the set it lists. Reports per set and pooled: recall,
    precision, LLM calls, tokens and seconds a question, and each system's recall paired against
    chunk and logic (95% bootstrap). Resumable: results.jsonl keeps every answer."""
    from engine.face.cli_options import injected
    from engine.floor.base.errors import LogicRouteError
    from training.common.jsonl_store import JsonlStore, exclusive_folder
    from training.global_qa import list_answer as la
    from training.global_qa.list_answer_report import build, write

    check_set_kbs(set_files, kbs)
    names = la.check_systems([s.strip() for s in systems.split(",") if s.strip()])
    sets = [la.read_set(f, kb, half) for f, kb in zip(set_files, kbs)]
    if len({s.name for s in sets}) != len(sets):
        raise LogicRouteError("two set files share a name: each set is reported under its file name")
    llm = injected(ctx, "llm")  # tests inject a scripted LLM (and a KB opener) through ctx.obj
    if llm is None and not report_only:
        from engine.face.cli_options import check_llm_spec

        check_llm_spec(llm_spec)
    answer_for = injected(ctx, "answer_for") or _real_answerers(llm, llm_spec, k)
    out = Path(out_dir)
    with exclusive_folder(out, "bench global-lists-answer"):
        store = JsonlStore(out / "results.jsonl", key=la.row_key)
        setup = {"llm": llm_spec if llm is None else getattr(llm, "name", "injected"), "k": k, "style": la.STYLE}
        setup["router"] = router_fingerprint()
        if report_only:
            rows = la.stored_rows(sets, names, store, setup)
        else:
            rows = la.run(sets, names, store, answer_for, setup=setup, redo=redo)
        flags = [f for f, on in (("--redo", redo), ("--report-only", report_only)) if on]
        command = command_line("global-lists-answer", set_files, kbs, systems, half, out_dir, k, llm_spec, *flags)
        systems_about = {n: SYSTEMS[n].about for n in names}
        run = run_record(command, half, la.STYLE, setup["llm"], k, systems_about, sets)
        scored = la.scored_rows(sets, names, rows)
        errors = sum(1 for r in scored if r.get("error"))
        notes = [f"{errors} answer(s) failed with an error (scored as listing nothing)"] if errors else []
        missing = len(names) * sum(len(s.questions) for s in sets) - len(rows)
        if missing:
            notes.append(
                f"{missing} (system, question) pair(s) not answered yet: each figure is over what was answered"
            )
        if notes:
            run["notes"] = notes
        report = build(scored, [s.name for s in sets], names, run)
        path = write(report, out)
    for scope, per in report["sets"].items():
        for system, t in per.items():
            click.echo(
                f"{scope} {system}: recall {t['recall']}, precision {t['precision']} over {t['questions']} "
                f"questions, {t['llm_calls_per_q']} calls/q, {t['tokens_per_q']} tokens/q"
            )
    click.echo(f"report: {path}")


def _real_answerers(llm, llm_spec: str, k: int):
    """answer_for(set): the set's KB opened once, every system over one shared LLM (the local
    model loads once)."""
    shared = {"llm": llm}

    def answer_for(lists):
        from hierarchy.kb import KnowledgeBase
        from training.global_qa.list_answer import answerer

        if shared["llm"] is None:
            from engine.floor.llm.factory import make_llm

            shared["llm"] = make_llm(llm_spec)
        return answerer(KnowledgeBase.open(lists.kb), shared["llm"], k)

    return answer_for
