"""`logicroute bench retrieval` (training.retrieval.bench_retrieval): dense, lexical and hybrid retrieval on
the shared QA sets, documentation questions and a growing KB. Nothing heavy loads at import."""

from __future__ import annotations

from pathlib import Path

import click

from training.common.bench_sets_cli import machine
from training.scale.cmd_bench_scale import _ints

PARTS = ("qa", "docs", "scale")


@click.command("retrieval")
@click.option("--parts", default=",".join(PARTS), show_default=True, help="comma list of qa, docs, scale")
@click.option("--docs-folder", default=None, help="Markdown docs of the questions [default: /usr/share/doc/nodejs/api]")
@click.option("--sizes", default="1000,10000,100000", show_default=True, help="KB sizes of the latency part")
@click.option("--corpus", default="debian-docs", show_default=True, help="text of the latency part (bench scale's)")
@click.option("--queries", type=int, default=300, show_default=True, help="timed queries per size and mode")
@click.option("--kb-root", default="runs/bench_retrieval", show_default=True, help="where the KBs are built, kept")
@click.option(
    "--out", "out_dir", default="docs/results/retrieval", show_default=True, help="folder of retrieval_hybrid.md/.json"
)
@click.pass_context
def bench_retrieval(ctx, parts, docs_folder, sizes, corpus, queries, kb_root, out_dir):
    """Dense, lexical (BM25) and hybrid retrieval, measured: recall@3/@10 of the gold passages and
    answer-in-context on every shared QA set (and the grid the defaults were fitted on, on other
    questions of the same files), hit@3 of the heading
    that answers 20 documentation questions, then latency p50/p95, build time, disk and memory
    at each KB size. A part that runs replaces its section of the report; the others stay."""
    from engine.face.cli_options import injected_embedder
    from engine.floor.embedder import get_embedder
    from training.retrieval import bench_retrieval as br
    from training.retrieval.bench_retrieval_report import write_report
    from training.retrieval.doc_questions import DOCS_FOLDER

    want = [p.strip() for p in parts.split(",") if p.strip()]
    bad = [p for p in want if p not in PARTS]
    if bad:
        raise click.BadParameter(f"{', '.join(bad)}: parts are {', '.join(PARTS)}", param_hint="--parts")
    emb = injected_embedder(ctx) or get_embedder()
    out = Path(out_dir)
    previous = out / "retrieval_hybrid.json"
    report = br.load(previous) if previous.is_file() else {}
    asked = {"parts": ",".join(want), "sizes": sizes, "corpus": corpus, "queries": queries}
    if docs_folder:
        asked["docs-folder"] = docs_folder
    run = {
        "command": "logicroute bench retrieval " + " ".join(f"--{k} {v}" for k, v in asked.items()),
        "machine": machine("start"),
    }
    report.setdefault("runs", {}).update(dict.fromkeys(want, run))  # which command made each part
    echo = lambda s: click.echo(s, err=True)  # noqa: E731
    root = Path(kb_root)
    if "qa" in want:
        report["qa"] = br.run_qa(root, emb, echo)
    if "docs" in want:
        report["docs"] = br.run_docs(Path(docs_folder or DOCS_FOLDER), root / "docs", emb, echo)
    if "scale" in want:
        import numpy as np

        from training.retrieval.bench_retrieval_scale import run_scale

        qa = [br.qa_set(name, root / "test", emb) for name in br.QA_SETS]
        pool = np.concatenate([s.kb.vectors for s in qa])
        qvecs = np.concatenate([s.vectors for s in qa])
        report["scale"] = run_scale(_ints(sizes, "--sizes"), corpus, pool, qvecs, queries, echo)
    br.save(out, report)
    click.echo(f"report: {write_report(report, out / 'retrieval_hybrid.md')}")
