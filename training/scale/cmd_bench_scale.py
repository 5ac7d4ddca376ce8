"""`logicroute bench scale` (training.scale.bench_scale): how a knowledge base grows, per vector store.
Registered on the group by training/commands.py; nothing heavy is imported at module level."""

from __future__ import annotations

from pathlib import Path

import click

from engine.floor.base.errors import LogicRouteError
from training.scale.bench_scale_report import DEFAULT_OUT, FILES

STORE_NAMES = "faiss,faiss-hnsw,milvus"


def _ints(text: str, option: str) -> tuple[int, ...]:
    """Comma-separated counts; 1k / 1M style suffixes are read too."""
    out = []
    for part in (p.strip().lower().replace("_", "") for p in text.split(",")):
        if not part:
            continue
        scale = {"k": 1_000, "m": 1_000_000}.get(part[-1], 1)
        try:
            out.append(int(float(part[:-1] if scale > 1 else part) * scale))
        except ValueError:
            raise LogicRouteError(f"{option} takes comma-separated counts (e.g. 1000,10k), got {text!r}") from None
    return tuple(out)


@click.command("scale")
@click.option(
    "--sizes",
    default="1000,10000,100000",
    show_default=True,
    help="KB sizes in chunks of real text (cut to what the corpus holds)",
)
@click.option(
    "--corpus",
    default="shared",
    show_default=True,
    help="shared (the shared data sets: 17,613 chunks), debian-docs (Debian's manuals, fetched once by "
    "`make corpus`: 100k+ chunks), or a folder of .md/.txt files",
)
@click.option("--count-only", is_flag=True, help="print the corpus' documents and distinct chunks, then stop")
@click.option("--stores", default=STORE_NAMES, show_default=True, help="comma list of faiss, faiss-hnsw, milvus (Lite)")
@click.option(
    "--index-only-size",
    default="1000000",
    show_default=True,
    help="vectors for the index-only part, comma list allowed (real vectors, past them noisy copies; 0 = skip)",
)
@click.option(
    "--milvus-index-max",
    type=int,
    default=100_000,
    show_default=True,
    help="vectors Milvus Lite holds at most in the index-only part (~9 KB of memory each; 0 = no cap)",
)
@click.option("--queries", type=int, default=1000, show_default=True, help="questions of the shared data sets")
@click.option(
    "--out",
    "out_dir",
    default=DEFAULT_OUT,
    show_default=True,
    type=click.Path(file_okay=False),
    help="folder of report.md, report.json and curves.png",
)
@click.option("--no-layers", is_flag=True, help="leave out the summary layers' build and descent")
@click.pass_context
def bench_scale(ctx, sizes, corpus, count_only, stores, index_only_size, milvus_index_max, queries, out_dir, no_layers):
    """How a knowledge base grows: per size and vector store, build time and its embedding share,
    peak memory, disk, retrieval latency and recall@10, summary layers, a 1% add and delete
    against a rebuild; then the index alone at --index-only-size vectors. Embeddings go through
    the on-disk cache: an interrupted run keeps what it embedded, a rerun embeds nothing again."""
    from engine.face.cli_options import injected_embedder
    from training.scale.bench_scale import ScaleConfig, run_bench_scale
    from training.scale.bench_scale_report import table_lines

    cfg = ScaleConfig(
        sizes=_ints(sizes, "--sizes"),
        stores=tuple(s.strip() for s in stores.split(",") if s.strip()),
        index_only_sizes=tuple(n for n in _ints(index_only_size, "--index-only-size") if n),
        queries=queries,
        milvus_index_max=milvus_index_max,
        out=out_dir,
        layers=not no_layers,
        corpus=corpus,
    )
    if count_only:  # chunking only: no embedder, nothing written
        from training.scale.bench_scale_corpus import corpus_lines, load_corpus

        for line in corpus_lines(load_corpus(cfg.corpus, cfg.sets)):
            click.echo(line)
        return
    emb = injected_embedder(ctx)
    report = run_bench_scale(cfg, embedder=emb, fresh=emb, echo=lambda s: click.echo(s, err=True))
    for line in table_lines(report):
        click.echo(line)
    click.echo(f"report: {Path(out_dir) / FILES['md']}")
