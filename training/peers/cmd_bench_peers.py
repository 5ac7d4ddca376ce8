"""`logicroute bench peers`: logicroute's routes and router beside the systems users would pick
instead (LightRAG, HippoRAG 2, nano-graphrag), on the same passages, questions, LLM and embedder (issue 45).
The harness is training/peers/bench_peers_run.py; the peers run in venvs of their own
(training/peers/bench_peers_subprocess.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from engine.face.cli_options import info, llm_option
from engine.floor.base.errors import LogicRouteError
from training.common.logic_experiment import logic_preset_option

DEFAULT_SERVER_PORT = 8741  # fixed: the served model's name (and so its cache keys) holds the URL


def _options(settings: tuple[str, ...], venvs: tuple[str, ...], logic_preset: str) -> dict:
    """PeerContext.options: {"lightrag": {"mode": "naive"}, "lightrag_venv": PATH, "logic_preset": ...}."""
    out: dict = {"logic_preset": logic_preset}
    for s in settings:
        name, eq, value = s.partition("=")
        system, dot, key = name.partition(".")
        if not eq or not dot:
            raise LogicRouteError(f"--set takes SYSTEM.KEY=VALUE (e.g. lightrag.mode=naive), got {s!r}")
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = value
        out.setdefault(system, {})[key] = parsed
    for v in venvs:
        system, eq, path = v.partition("=")
        if not eq:
            raise LogicRouteError(f"--venv takes SYSTEM=PATH, got {v!r}")
        out[f"{system}_venv"] = path
    return out


def _serve(llm_spec: str, port: int, n_ctx: int, threads: int, workdir: Path):
    """(spec of the served model, server process): the local model behind llama.cpp's server."""
    from engine.floor.llm.base import parse_spec
    from engine.floor.llm.model_files import model_path
    from training.scale.bench_llm_server import start_server, wait_ready

    s = parse_spec(llm_spec)
    if s.backend != "local":
        raise LogicRouteError(f"--serve-local serves a local model, not {llm_spec!r}")
    url = f"http://127.0.0.1:{port}/v1"
    info(f"starting the llama.cpp server on {url} ({n_ctx} tokens of context) ...")
    workdir.mkdir(parents=True, exist_ok=True)
    proc = start_server(model_path(s.model), port, n_ctx, threads, workdir / "server.log")
    try:
        wait_ready(url, proc)
    except LogicRouteError:
        proc.terminate()
        raise
    return f"openai:{s.model}@{url}?timeout=3600&retries=0", proc


def with_context(llm, n_ctx: int):
    """The in-process model (under its cache) with an `n_ctx`-token context, set before its first
    call; a served model is left as it is (its server got the context). The context is not part of
    the model's name, so the LLM call cache's keys and the rows' signatures stay the same."""
    model = getattr(llm, "inner", llm)
    if hasattr(model, "n_ctx"):
        model.n_ctx = n_ctx
    return llm


@click.command("peers")
@click.argument("data", nargs=-1, required=True)
@click.option(
    "--systems",
    default="chunk,logic,router,lightrag,hipporag",
    show_default=True,
    help="comma-separated systems: chunk, logic, router, router-adapted (logicroute's; router-adapted needs "
    "`logicroute adapt --kb OUT/SET/kb` first), lightrag, hipporag, nano-graphrag, graphrag",
)
@click.option("--n", type=click.IntRange(min=1), default=30, show_default=True, help="questions per data set")
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True, help="first question")
@click.option("--kb-questions", type=int, default=None, help="KB = the passages of the first max(N, this) questions")
@click.option("--max-passages", type=click.IntRange(min=1), default=None, help="cut the KB (smoke runs)")
@click.option("--k", default=3, show_default=True, help="chunks per retrieval (logicroute's routes)")
@click.option("--index-batch", default=5, show_default=True, help="passages per resumable indexing step")
@click.option("--set", "settings", multiple=True, help="a peer setting, SYSTEM.KEY=VALUE (lightrag.mode=naive)")
@click.option("--venv", "venvs", multiple=True, help="SYSTEM=PATH: the venv a peer is installed in")
@click.option("--serve-local", is_flag=True, help="serve the --llm local model through llama.cpp's server")
@click.option("--server-port", default=DEFAULT_SERVER_PORT, show_default=True)
@click.option(
    "--ctx",
    "--server-ctx",
    "server_ctx",
    default=8192,
    show_default=True,
    help="the model's context in tokens, served (--serve-local) or in process: the peers' query prompts need more "
    "than the local model's 4,096",
)
@click.option("--threads", type=click.IntRange(min=1), default=2, show_default=True, help="the server's threads")
@click.option("--out", default="runs/bench_peers", show_default=True, type=click.Path(file_okay=False))
@click.option("--report-dir", default="docs/results/peers", show_default=True, type=click.Path(file_okay=False))
@click.option("--retry-errors", is_flag=True, help="answer again the questions that failed before")
@click.option(
    "--report-only",
    is_flag=True,
    help="index and answer nothing: the report of the rows there are (a system whose rows are missing says so)",
)
@click.option("--no-cache", is_flag=True, help="do not use the on-disk LLM call cache")
@logic_preset_option
@llm_option
def bench_peers(
    data, systems, n, offset, kb_questions, max_passages, k, index_batch, settings, venvs, serve_local,
    server_port, server_ctx, threads, out, report_dir, retry_errors, report_only, no_cache, logic_preset, llm_spec,
):  # fmt: skip
    """Each system on each DATA set (a shared set name or a file): one KB of the passages of the
    first N questions and their distractors, the same LLM (--llm, or with --serve-local the local
    model behind llama.cpp's OpenAI-compatible server) and MiniLM; indexing and per-question
    calls, tokens and time, EM/F1/Acc, errors counted. Resumable: rerun the same command.
    Report: REPORT_DIR/<set>.md and .json."""
    from engine.floor.llm.factory import make_llm
    from training.common.shared_data import resolve_data
    from training.peers.bench_peers_report import write_report
    from training.peers.bench_peers_run import PeersConfig, run_peers
    from training.peers.bench_peers_subprocess import builtin_registry

    names = tuple(s.strip() for s in systems.split(",") if s.strip())
    options = _options(settings, venvs, logic_preset)
    proc = None
    if serve_local:
        import signal

        # a `kill` of this command must stop the server too: SIGTERM unwinds through the finally below
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        llm_spec, proc = _serve(llm_spec, server_port, server_ctx, threads, Path(out))
    args = next((sys.argv[i + 1 :] for i, a in enumerate(sys.argv) if a == "peers"), [])
    command = " ".join(["logicroute bench peers", *args])
    try:
        llm = make_llm(llm_spec, cache=not no_cache)
        with_context(llm, server_ctx)
        for d in data:
            cfg = PeersConfig(
                data=resolve_data(d), systems=names, out=out, n=n, offset=offset, kb_questions=kb_questions,
                max_passages=max_passages, k=k, index_batch=index_batch, retry_errors=retry_errors, options=options,
                report_only=report_only,
            )  # fmt: skip
            report = run_peers(cfg, builtin_registry(), llm, echo=info)
            md = write_report(report, report_dir, command)
            click.echo(md.read_text())
            click.echo(f"report: {md}")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
