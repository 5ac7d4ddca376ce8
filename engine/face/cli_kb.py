"""The knowledge-base maintenance command of `logicroute`: check, and check --repair (engine.face.cli
adds it to its group). Libraries load inside the command: `check` loads no model at all, so it
runs anywhere, also beside a writer; `--repair` is a writer."""

from __future__ import annotations

import json

import click

from engine.face.cli_options import injected_embedder, llm_option


@click.command()
@click.option("--kb", "kb_dir", required=True, type=click.Path(file_okay=False), help="knowledge base folder")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
@click.option(
    "--repair",
    is_flag=True,
    help="rebuild a damaged KB from the chunks it stores, and say what cannot be recovered (exit 1 then)",
)
@click.option(
    "--summaries",
    type=click.Choice(["auto", "extractive", "llm"]),
    default="auto",
    show_default=True,
    help="with --repair: the summarizer of layers that must be rebuilt (auto: the one they were built with)",
)
@llm_option(help="with --repair --summaries llm: the LLM")
@click.pass_context
def check(ctx, kb_dir, as_json, repair, summaries, llm_spec):
    """Verify a knowledge base without changing it: documents, chunks, vectors and index agree,
    every file matches its fingerprint, the summary layers cover every chunk. Loads no model and
    is safe beside a running `index`. Exit code 0 when consistent, 1 when not.

    With --repair, rebuild a damaged one from the chunks it stores: vectors and index again (the
    embedder loads only when vectors must be recomputed), then the summary layers. Says what
    cannot be recovered (and which documents to index again), checked against the counts the
    manifest records. Exit code 0 when everything was restored, 1 when something is lost."""
    if repair:
        return _repair(ctx, kb_dir, summaries, llm_spec, as_json)
    from hierarchy.kb_check import check_kb

    report = check_kb(kb_dir)
    if as_json:
        click.echo(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        counts = [report.documents, report.chunks, report.vectors, report.index]
        docs, chunks, vectors, rows = ("?" if n is None else n for n in counts)  # ?: that file does not read
        # A KB of many segments has many files: the ones that are not ok are named, the others counted.
        ok = sum(state == "ok" for state in report.files.values())
        named = [f"{name} {state}" for name, state in report.files.items() if state != "ok"]
        click.echo(
            f"{docs} documents, {chunks} chunks, {vectors} vectors, {rows} index rows; files: "
            + ", ".join([f"{ok} ok", *named] if ok else named)
        )
        if report.layers is not None:
            lay = report.layers
            click.echo(
                f"summary layers: {lay['nodes_per_level']} nodes per level over {lay['chunks']} chunks "
                f"({lay['uncovered_chunks']} chunks not covered, {lay['stale_chunks']} no longer in the KB)"
            )
        if report.near_duplicates:
            from hierarchy.folder_walk import NAMED

            pairs = [" ~ ".join(pair) for pair in report.near_duplicates]
            more = f" and {len(pairs) - NAMED} more (--json lists them)" if len(pairs) > NAMED else ""
            what = "pair" if len(pairs) == 1 else "pairs"
            click.echo(f"near-duplicate documents: {len(pairs)} {what}: {', '.join(pairs[:NAMED])}{more}")
        for note in report.notes:
            click.echo(f"note: {note}")
        for problem in report.problems:
            click.echo(f"problem: {problem}")
        click.echo(
            "consistent" if report.ok else f"NOT consistent: repair with `logicroute check --repair --kb {kb_dir}`"
        )
    if not report.ok:
        raise click.exceptions.Exit(1)


def _repair(ctx, kb_dir, summaries, llm_spec, as_json) -> None:
    from hierarchy.kb_repair import repair_kb

    def llm():
        from engine.floor.llm.factory import make_llm

        return make_llm(llm_spec)

    report = repair_kb(kb_dir, embedder=injected_embedder(ctx), summaries=summaries, make_llm=llm)
    if as_json:
        click.echo(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        _print_repair(report)
    if report.lost:  # repaired, but not whole: a script must not take it for a full recovery
        raise click.exceptions.Exit(1)


def _print_repair(report) -> None:
    from hierarchy.kb_repair import unnamed_documents

    for note in report.notes:
        click.echo(f"note: {note}")
    state = "rebuilt" if report.rebuilt else "intact"
    click.echo(
        f"chunk level {state}: {report.documents} documents, {report.chunks} chunks"
        + (f" ({report.embedded} embedded again)" if report.embedded else "")
        + (f"; summary layers {report.layers}" if report.layers else "")
    )
    if report.lost:
        unnamed = report.unnamed_lost_documents
        which = [*report.lost_documents, *([f"{unnamed} more {unnamed_documents(unnamed)}"] if unnamed else [])]
        click.echo(f"lost: {report.lost_lines} chunks; index again: {', '.join(which) or '?'}")


KB_COMMANDS = (check,)
