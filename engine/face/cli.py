"""The `logicroute` command: index, ask (with --dry-run, the route alone), demo; check (with
--repair), serve and mcp come from their modules.

Heavy libraries load inside commands, so `logicroute --help` is instant. Other packages add
commands through the `logicroute.commands` entry point group (each entry is a function that
takes the group; loaded on first use) (training adds label, train, calibrate, eval-router,
benchmark and the `bench` group): engine never imports them.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from importlib.metadata import entry_points
from pathlib import Path

import click

from engine.face.cli_ask import ask, print_answer
from engine.face.cli_kb import KB_COMMANDS
from engine.face.cli_options import (  # the shared options; plugins import them from here
    ROUTE_CHOICES,
    check_llm_spec,
    configure_logging,
    default_llm_spec,
    info,
    injected_embedder,
    llm_option,
    renamed,
)
from engine.face.cli_serve import mcp, serve
from engine.face.cli_stdout import reader_may_leave
from engine.floor.base.errors import LogicRouteError
from engine.floor.llm.urls import redact

DEMO_DIR = Path(__file__).resolve().parents[1] / "demo"
PLUGIN_GROUP = "logicroute.commands"
log = logging.getLogger("logicroute.cli")
__all__ = [
    "ROUTE_CHOICES",
    "default_llm_spec",
    "injected_embedder",
    "llm_option",
    "main",
]


class Group(click.Group):
    """Adds the plugin commands on first use, turns every LogicRouteError into one line on stderr
    and exit code 2 (no tracebacks), and lets a command's stdout be closed early (engine.face.cli_stdout)."""

    _plugins_loaded = False

    def _load_plugins(self) -> None:
        # On first use, not at import: a plugin module may itself import this module's options.
        if not self._plugins_loaded:
            self._plugins_loaded = True
            for ep in entry_points(group=PLUGIN_GROUP):
                ep.load()(self)

    def list_commands(self, ctx):
        self._load_plugins()
        return super().list_commands(ctx)

    def get_command(self, ctx, name):
        # The serving commands need no plugin: `ask` loads nothing of training.
        command = super().get_command(ctx, name)
        if command is None:
            self._load_plugins()
            command = super().get_command(ctx, name)
        return command

    def main(self, *args, **kwargs):
        with reader_may_leave():  # a closed stdout (`check | head -1`) is not the command's failure
            return super().main(*args, **kwargs)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except LogicRouteError as e:
            click.echo(f"error: {redact(str(e))}", err=True)  # no message prints an endpoint's password
            sys.exit(2)
        except OSError as e:  # the machine said no: a full disk, a missing permission, a dead mount
            where = f" ({e.filename})" if getattr(e, "filename", None) else ""
            click.echo(f"error: {e.strerror or e}{where}", err=True)
            sys.exit(1)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)


@click.group(cls=Group)
@click.version_option(package_name="logicroute")
@click.option("-q", "--quiet", is_flag=True, help="no progress bars and no info lines: warnings and errors only")
@click.option("-v", "--verbose", is_flag=True, help="debug messages too (and the model libraries' warnings)")
@click.pass_context
def main(ctx: click.Context, quiet: bool, verbose: bool) -> None:
    """logicroute: query-adaptive RAG. A trained router sends each question to the cheapest
    route that answers it well: chunk, summary or logic (LogicRAG DAG reasoning)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    configure_logging(ctx, quiet, verbose)


@main.command()
@click.argument("sources", nargs=-1)
@click.option("--kb", "kb_dir", required=True, type=click.Path(file_okay=False), help="knowledge base folder")
@click.option(
    "--summaries",
    type=click.Choice(["extractive", "llm", "none", "extractive-embedded"]),
    default="extractive",
    show_default=True,
    help="summary layer over chunk clusters (extractive costs no LLM tokens and embeds one text per cluster; "
    "extractive-embedded, the earlier and slower extractive layer, embeds every sentence)",
)
@click.option("--rebuild", is_flag=True, help="rebuild the summary layer from scratch")
@click.option("--delete", "delete_ids", multiple=True, help="document id to delete (repeatable)")
@click.option("--chunk-words", default=200, show_default=True)
@click.option("--overlap-words", default=40, show_default=True)
@click.option(
    "--store",
    "store_spec",
    default=None,
    metavar="faiss|faiss-hnsw|milvus|milvus://PATH.db|milvus://HOST:PORT",
    help="where the vectors live (default: faiss-hnsw, exact up to 20k chunks and HNSW above; a new KB "
    "remembers it; naming another store moves an existing KB's vectors there). faiss: exact at every size; "
    "milvus: Milvus Lite in the KB folder; milvus://HOST:PORT: a Milvus server ($LOGICROUTE_MILVUS_TOKEN)",
)
@click.option(
    "--retrieval",
    type=click.Choice(["dense", "hybrid"]),
    default=None,
    help="how the KB's searches find chunks, recorded in it: hybrid (a new KB's default) fuses the embedding's "
    "ranking with BM25 over titles, headings and text; dense: the embedding alone. A KB indexed before BM25 "
    "gains its index with any index run, --kb DIR alone too",
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="intake.NAME=VALUE",
    help="a limit on reading one file (repeatable): intake.max_text_mb=10, intake.max_inflated_mb=200, "
    'intake.max_seconds=120, intake.max_memory_mb=2048, ... (docs/configuration.md, "Reading documents")',
)
@click.option(
    "--keep-aggregates",
    is_flag=True,
    help="read a documentation site's aggregate and navigation pages (print.html, genindex.html) and copies "
    "of pages too, which are skipped by default (intake.keep_aggregates=true)",
)
@llm_option
@click.pass_context
def index(
    ctx,
    sources,
    kb_dir,
    summaries,
    rebuild,
    delete_ids,
    chunk_words,
    overlap_words,
    store_spec,
    retrieval,
    sets,
    keep_aggregates,
    llm_spec,
):
    """Index SOURCES into --kb: folders or files of Markdown, text, PDF, HTML, DOCX and PPTX (the last
    four with the docs extra), JSONL {id,title,text}, QA data files. A folder's links that lead outside
    it are skipped and named, and so are a documentation site's aggregate pages and copies of pages; a file
    over a limit (--set intake.NAME=VALUE) is skipped with one line."""
    from hierarchy.indexing import index_sources
    from hierarchy.intake_limits import IntakeLimits
    from hierarchy.kb import KnowledgeBase
    from hierarchy.vector_store.base import parse_store

    # a bad key fails before anything is read
    limits = IntakeLimits.from_sets([*sets, *(["intake.keep_aggregates=true"] if keep_aggregates else [])])

    store = None
    if store_spec is not None:
        try:
            store = parse_store(store_spec)
        except LogicRouteError as e:
            raise click.BadParameter(str(e), param_hint="--store") from None
    if not sources and not delete_ids and not rebuild and store is None and not KnowledgeBase.exists(kb_dir):
        # with no sources an existing KB is brought up to date (layers an interrupted run left behind)
        raise click.UsageError("give SOURCES to add, --delete DOC_ID to remove, or --rebuild")
    if summaries == "llm":
        check_llm_spec(llm_spec)  # before the chunks are embedded, not after

    def llm():
        from engine.floor.llm.factory import make_llm

        return make_llm(llm_spec)

    result = index_sources(
        kb_dir,
        sources,
        delete_ids=delete_ids,
        summaries=summaries,
        rebuild=rebuild,
        make_llm=llm,
        chunk_words=chunk_words,
        overlap_words=overlap_words,
        embedder=injected_embedder(ctx),
        store=store,
        retrieval=retrieval,
        limits=limits,
    )
    if result.moved_store:
        info(f"vectors moved to {result.moved_store}")
    if delete_ids:
        info(f"deleted {result.deleted_chunks} chunks of {len(delete_ids)} documents")
    info(added_line(result.documents, result.added, len(result.kb)))
    if result.layers is not None:
        info(f"summary layer: {json.dumps(result.layers)}")
    info(phases_line(result.phases))


def phases_line(phases: dict) -> str:
    """Where an index run's time went: wall (and CPU) seconds per phase, the summary layer's share."""
    names = {"read": "reading", "chunks": "chunks and embeddings", "layers": "summary layer"}
    total = sum(p["seconds"] for p in phases.values()) or 1.0
    parts = [f"{names.get(k, k)} {p['seconds']:.1f}s (CPU {p['cpu_seconds']:.1f}s)" for k, p in phases.items()]
    share = 100 * phases.get("layers", {}).get("seconds", 0.0) / total
    return f"time: {', '.join(parts)}; summary layer {share:.0f}% of {total:.1f}s"


def added_line(documents: int, report: dict, kb_chunks: int) -> str:
    """What an index run added, in one line. Chunks a document already had are "unchanged", not
    duplicates: a rerun over an unchanged folder (after a run that was killed, say) must not
    read as if something were wrong. Duplicates are chunks another document holds already."""
    same = report.get("unchanged_documents", 0)
    already = f" ({same} already indexed, unchanged)" if same else ""
    parts = [f"{report['unchanged_chunks']} unchanged"] if report.get("unchanged_chunks") else []
    if report.get("duplicate_chunks"):
        parts.append(f"{report['duplicate_chunks']} duplicates of other documents' chunks")
    kept = f" ({', '.join(parts)})" if parts else ""
    return (
        f"{documents} documents{already} -> {report.get('added_chunks', 0)} new chunks{kept} "
        f"in {report.get('seconds', 0):.1f}s; KB holds {kb_chunks} chunks"
    )


@main.command()
@click.option("--kb", "kb_dir", default=None, help="where to build the demo KB (default: cache folder)")
@click.option("--route", type=click.Choice(ROUTE_CHOICES), default="auto", show_default=True)
@llm_option
def demo(kb_dir, route, llm_spec):
    """Build a KB from the shipped fictional corpus and answer its sample questions."""
    from engine.core.pipeline import RoutedRAG
    from engine.floor.base.files import cache_dir
    from engine.floor.base.metrics import f1

    check_llm_spec(llm_spec)
    kb_path = Path(kb_dir) if kb_dir else cache_dir() / "demo_kb"
    info(f"[1/3] indexing the demo corpus into {kb_path} (loads MiniLM) ...")
    # short answers: the demo scores them with F1 against its gold phrases
    rag = RoutedRAG.build([DEMO_DIR / "corpus.jsonl"], kb=kb_path, llm_spec=llm_spec, style="short")
    info(f"[2/3] loading the LLM {redact(llm_spec)} (first run assembles the 1.1 GB model) ...")
    rag.get_llm()
    questions = [json.loads(line) for line in (DEMO_DIR / "questions.jsonl").read_text().splitlines() if line.strip()]
    info(f"[3/3] answering {len(questions)} questions")
    total_f1 = 0.0
    for item in questions:
        click.echo()
        ans = rag.answer(item["question"], route=route)
        print_answer(ans, item["question"])
        score = f1(ans.text, item["answers"])
        total_f1 += score
        click.echo(f"gold: {item['answers'][0]}  (F1 {score:.2f})")
    click.echo(f"\nmean F1 {total_f1 / max(len(questions), 1):.2f} over {len(questions)} questions")


main.add_command(ask)  # engine.face.cli_ask
for kb_command in KB_COMMANDS:  # check (engine.face.cli_kb)
    main.add_command(kb_command)
main.add_command(renamed("route", "ask --dry-run", ask, dry_run=True))  # the names of before, hidden
main.add_command(renamed("repair", "check --repair", KB_COMMANDS[0], repair=True))
main.add_command(serve)  # engine.face.cli_serve: the HTTP server
main.add_command(mcp)  # engine.face.cli_serve: the Model Context Protocol server


if __name__ == "__main__":
    main()
