"""The `logicroute` command. Heavy libraries load inside commands, so --help is instant."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from engine.errors import LogicRouteError
from engine.llm import DEFAULT_LLM

DEMO_DIR = Path(__file__).resolve().parents[1] / "engine" / "demo"


class Group(click.Group):
    """Turns every LogicRouteError into one line on stderr and exit code 2: no tracebacks."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except LogicRouteError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)


@click.group(cls=Group)
@click.version_option(package_name="logicroute")
def main() -> None:
    """logicroute: query-adaptive RAG. A trained router sends each question to the cheapest
    route that answers it well: chunk, summary or logic (LogicRAG DAG reasoning)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def llm_option(f):
    return click.option("--llm", "llm_spec", default=lambda: os.environ.get("LOGICROUTE_LLM", DEFAULT_LLM),
                        show_default=DEFAULT_LLM,
                        help="local:MODEL, openai:MODEL or openai:MODEL@BASE_URL")(f)


@main.command()
@click.argument("sources", nargs=-1)
@click.option("--kb", "kb_dir", required=True, type=click.Path(file_okay=False), help="knowledge base folder")
@click.option("--summaries", type=click.Choice(["extractive", "llm", "none"]), default="extractive", show_default=True,
              help="summary layer over chunk clusters (extractive costs no LLM tokens)")
@click.option("--rebuild", is_flag=True, help="rebuild the summary layer from scratch")
@click.option("--delete", "delete_ids", multiple=True, help="document id to delete (repeatable)")
@click.option("--chunk-words", default=200, show_default=True)
@click.option("--overlap-words", default=40, show_default=True)
@llm_option
def index(sources, kb_dir, summaries, rebuild, delete_ids, chunk_words, overlap_words, llm_spec):
    """Index SOURCES (folders of .txt/.md, JSONL {id,title,text}, QA data files) into --kb."""
    from hierarchy.kb import KnowledgeBase
    from hierarchy.sources import load_documents

    if not sources and not delete_ids and not rebuild:
        raise click.UsageError("give SOURCES to add, --delete DOC_ID to remove, or --rebuild")
    path = Path(kb_dir)
    docs = [d for s in sources for d in load_documents(s)]  # before touching the KB: bad input writes nothing
    if (path / "manifest.json").exists():
        kb = KnowledgeBase.open(path)
    else:
        kb = KnowledgeBase.create(path, chunk_words=chunk_words, overlap_words=overlap_words)
    if delete_ids:
        n = kb.delete(delete_ids)
        click.echo(f"deleted {n} chunks of {len(delete_ids)} documents", err=True)
    report = kb.add(docs, show_progress=True) if docs else {}
    click.echo(f"{len(docs)} documents -> {report.get('added_chunks', 0)} new chunks "
               f"({report.get('duplicate_chunks', 0)} duplicates) in {report.get('seconds', 0):.1f}s; "
               f"KB holds {len(kb)} chunks", err=True)
    if summaries != "none" and (rebuild or not (path / "layers").exists()):
        from hierarchy.layers import build_layers

        llm = None
        if summaries == "llm":
            from engine.llm import make_llm

            llm = make_llm(llm_spec)
        cost = build_layers(kb, summarizer=summaries, llm=llm, show_progress=True, rebuild=rebuild)
        click.echo(f"summary layer: {json.dumps(cost)}", err=True)


@main.command()
@click.argument("question")
@click.option("--kb", "kb_dir", required=True, type=click.Path(file_okay=False))
@click.option("--route", type=click.Choice(["auto", "chunk", "summary", "logic"]), default="auto", show_default=True)
@click.option("--k", default=3, show_default=True, help="chunks per retrieval")
@click.option("--checkpoint", default=None, help="router checkpoint (default: shipped generalist)")
@click.option("--json", "as_json", is_flag=True, help="print the whole Answer as JSON")
@click.option("--trace-format", type=click.Choice(["none", "json", "mermaid"]), default="none",
              help="also print the trace (mermaid: the logic route's DAG)")
@click.option("--no-cache", is_flag=True, help="do not use the on-disk LLM call cache")
@llm_option
def ask(question, kb_dir, route, k, checkpoint, as_json, trace_format, no_cache, llm_spec):
    """Answer QUESTION from the knowledge base --kb."""
    from engine.pipeline import RoutedRAG

    rag = RoutedRAG.open(kb_dir, llm_spec=llm_spec, checkpoint=checkpoint, k=k, cache=not no_cache)
    ans = rag.answer(question, route=route)
    if as_json:
        click.echo(json.dumps(ans.to_dict(), indent=2, ensure_ascii=False))
    else:
        print_answer(ans)
    if trace_format == "json" and not as_json:
        click.echo(json.dumps(ans.trace, indent=2, ensure_ascii=False))
    elif trace_format == "mermaid":
        from engine.dag import trace_to_mermaid

        click.echo(trace_to_mermaid(ans.trace))


def print_answer(ans, question: str | None = None) -> None:
    if question:
        click.secho(f"Q: {question}", bold=True)
    probs = ""
    if ans.route_probs:
        probs = "  (" + ", ".join(f"{r} {p:.2f}" for r, p in ans.route_probs.items()) + ")"
    click.echo(f"route: {ans.route}{probs}")
    click.secho(f"answer: {ans.text}", fg="green")
    titles = [r.get("title", "") for r in ans.trace.get("retrieved", [])]
    if titles:
        click.echo("evidence: " + "; ".join(t for t in titles if t))
    u = ans.usage
    click.echo(f"cost: {u.llm_calls} LLM calls, {u.prompt_tokens}+{u.completion_tokens} tokens, {u.seconds:.1f}s"
               + (f" ({u.cached_calls} cached; {u.llm_seconds_uncached:.1f}s of LLM time uncached)"
                  if u.cached_calls else ""))
    for f in ans.flags:
        click.secho(f"flag: {f}", fg="yellow")


@main.command()
@click.option("--kb", "kb_dir", default=None, help="where to build the demo KB (default: cache folder)")
@click.option("--route", type=click.Choice(["auto", "chunk", "summary", "logic"]), default="auto", show_default=True)
@llm_option
def demo(kb_dir, route, llm_spec):
    """Build a KB from the shipped fictional corpus and answer its sample questions."""
    from engine.cache_dir import cache_dir
    from engine.pipeline import RoutedRAG
    from training.metrics import f1

    kb_path = Path(kb_dir) if kb_dir else cache_dir() / "demo_kb"
    click.echo(f"[1/3] indexing the demo corpus into {kb_path} (loads MiniLM) ...", err=True)
    rag = RoutedRAG.build([DEMO_DIR / "corpus.jsonl"], kb=kb_path, llm_spec=llm_spec)
    click.echo(f"[2/3] loading the LLM {llm_spec} (first run assembles the 1.1 GB model) ...", err=True)
    rag.get_llm()
    questions = [json.loads(line) for line in (DEMO_DIR / "questions.jsonl").read_text().splitlines() if line.strip()]
    click.echo(f"[3/3] answering {len(questions)} questions", err=True)
    total_f1 = 0.0
    for item in questions:
        click.echo()
        ans = rag.answer(item["question"], route=route)
        print_answer(ans, item["question"])
        score = f1(ans.text, item["answers"])
        total_f1 += score
        click.echo(f"gold: {item['answers'][0]}  (F1 {score:.2f})")
    click.echo(f"\nmean F1 {total_f1 / max(len(questions), 1):.2f} over {len(questions)} questions")


def _register_optional() -> None:
    """Commands owned by other modules; each module keeps heavy imports inside its functions."""
    from training.cmd_benchmark import COMMANDS as benchmark_commands
    from training.cmd_router import COMMANDS as router_commands

    for cmd in (*router_commands, *benchmark_commands):
        main.add_command(cmd)


_register_optional()

if __name__ == "__main__":
    main()
