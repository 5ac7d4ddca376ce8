"""`logicroute bench llm-server`: the LLM side of scale. `RoutedRAG.answer_many` against one
llama.cpp server process (llama-cpp-python's OpenAI-compatible server, started here on the
local model) at each concurrency, beside the in-process local model, on the same questions.

What it shows: how many answers a second one model process gives, and whether client-side
concurrency buys any. The server is reached through the same `openai:MODEL@URL` spec a user
gives for vLLM, Ollama or any OpenAI-compatible endpoint. The LLM cache is off in every run,
so every call reaches the model."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import click

from engine.core.routes import ROUTES
from engine.face.cli_options import info
from engine.floor.base.errors import LogicRouteError
from engine.floor.base.files import atomic_write_text
from engine.floor.base.stats import percentile
from training.bench.bench_report import markdown_table

DEFAULT_OUT = "docs/results/serve/bench_llm_server.md"
COLUMNS = {  # report.json's row key -> the report's column, in order
    "backend": "backend",
    "concurrency": "concurrency",
    "answers": "answers",
    "with_fallbacks": "with fallbacks",
    "wall_s": "wall s",
    "answers_per_min": "answers/min",
    "p50_s": "p50 s",
    "p95_s": "p95 s",
    "prompt_tokens_per_s": "prompt tok/s",
    "completion_tokens_per_s": "completion tok/s",
}
SERVER_START_S = 300  # loading a GGUF from a cold disk on a busy machine can take minutes


@dataclass
class Run:
    backend: str  # "in-process" or "llama.cpp server"
    concurrency: int
    answers: int = 0
    with_fallbacks: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_calls: int = 0
    error: str = ""

    def row(self) -> dict:
        lat = self.latencies or [0.0]
        return {
            "backend": self.backend,
            "concurrency": self.concurrency,
            "answers": self.answers,
            "with_fallbacks": self.with_fallbacks,
            "wall_s": round(self.seconds, 2),
            "answers_per_min": round(60 * self.answers / self.seconds, 2) if self.seconds else 0.0,
            "p50_s": round(percentile(lat, 0.5), 2),
            "p95_s": round(percentile(lat, 0.95), 2),
            "prompt_tokens_per_s": round(self.prompt_tokens / self.seconds, 1) if self.seconds else 0.0,
            "completion_tokens_per_s": round(self.completion_tokens / self.seconds, 1) if self.seconds else 0.0,
            "llm_calls": self.llm_calls,
            "error": self.error,
        }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = SERVER_START_S) -> None:
    """Until GET {url}/models answers; a server that exits first is an error with its log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LogicRouteError(f"the llama.cpp server exited with code {proc.returncode} before answering")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(1)
    raise LogicRouteError(f"the llama.cpp server did not answer {url}/models within {timeout:.0f} s")


def start_server(model_file: Path, port: int, n_ctx: int, threads: int, log_path: Path) -> subprocess.Popen:
    """One `python -m llama_cpp.server` process on the model file (needs llama-cpp-python's
    server extra: fastapi, uvicorn, sse-starlette, pydantic-settings)."""
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_file), "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--seed", "0"]
    log = open(log_path, "w")  # noqa: SIM115 - the server writes here for as long as it runs
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def run_answers(rag, questions: list[str], route: str, concurrency: int, backend: str) -> Run:
    """One answer_many over the questions; an LLM error ends the run and is kept in its row."""
    run = Run(backend=backend, concurrency=concurrency)
    t0 = time.perf_counter()
    try:
        answers = rag.answer_many(questions, concurrency=concurrency, route=route)
    except LogicRouteError as e:
        run.seconds, run.error = time.perf_counter() - t0, str(e)
        return run
    run.seconds = time.perf_counter() - t0
    for a in answers:
        run.answers += 1
        run.latencies.append(a.usage.seconds)
        run.prompt_tokens += a.usage.prompt_tokens
        run.completion_tokens += a.usage.completion_tokens
        run.llm_calls += a.usage.llm_calls
        run.with_fallbacks += bool(a.flags)  # a fallback taken: an LLM error, a timeout, broken output
    return run


def question_set(dataset: str, n: int) -> tuple[list[str], list]:
    """The first n questions of a shared data set and the passages they came with."""
    from hierarchy.datasets import load_dataset
    from training.common.shared_data import SHARED_FILES, shared_data_dir

    ds = load_dataset(shared_data_dir() / SHARED_FILES[dataset], n=n)
    return [q.text for q in ds.questions], ds.passages


def benchmark(
    model: str,
    dataset: str,
    n: int,
    concurrencies: tuple[int, ...],
    route: str,
    workdir: Path,
    threads: int,
    queue_timeout: float = 600,
) -> dict:
    from engine.core.pipeline import RoutedRAG
    from engine.floor.llm.factory import make_llm
    from engine.floor.llm.model_files import model_path
    from training.common.passage_kb import passages_kb

    # Every run asks questions of its own, and the warm-ups one more: no run finds its prompts
    # in a cache an earlier run filled (the local model keeps llama.cpp states of prompts).
    levels = len(concurrencies)
    questions, passages = question_set(dataset, 2 * n * levels + 1)
    warm = questions[-1]

    def batch(backend: int, level: int) -> list[str]:
        start = (backend * levels + level) * n
        return questions[start : start + n]

    kb = passages_kb(workdir / "kb", passages, overwrite=True, show_progress=False)
    runs: list[Run] = []
    local = RoutedRAG(kb=kb, llm=make_llm(f"local:{model}", cache=False), cache=False, llm_spec=f"local:{model}")
    local.answer(warm, route=route)  # warm: the embedder and the model
    for i, c in enumerate(concurrencies):
        info(f"in-process local:{model}: {n} answers at concurrency {c} ...")
        runs.append(run_answers(local, batch(0, i), route, c, "in-process"))
    del local
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    info(f"starting the llama.cpp server on {url} ...")
    proc = start_server(model_path(model), port, 4096, threads, workdir / "server.log")
    try:
        wait_ready(url, proc)
        # One request at a time is all this server computes: a request queued behind the others
        # waits (concurrency - 1) answers before its own, so the wait per try is the queue's.
        spec = f"openai:{model}@{url}?timeout={queue_timeout:g}&retries=0"
        served = RoutedRAG(kb=kb, llm=make_llm(spec, cache=False), cache=False, llm_spec=spec)
        served.answer(warm, route=route)
        for i, c in enumerate(concurrencies):
            info(f"llama.cpp server: {n} answers at concurrency {c} ...")
            runs.append(run_answers(served, batch(1, i), route, c, "llama.cpp server"))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return {
        "model": model,
        "dataset": dataset,
        "questions": n,
        "route": route,
        "threads": threads,
        "server_timeout_s": queue_timeout,
        "rows": [r.row() for r in runs],
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, load at the end {_load()}",
    }


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def report_markdown(result: dict, command: str) -> str:
    lines = [
        "# bench llm-server: answers per minute from one model process",
        "",
        f"`{command}`",
        "",
        f"{result['questions']} questions of {result['dataset']} per run, each run its own (one KB of their "
        "passages), route "
        f"`{result['route']}`, model {result['model']} ({result['threads']} threads), LLM cache off, "
        f"server requests waited on {result['server_timeout_s']:g} s; "
        f"{result['machine']}.",
        "",
        *markdown_table(list(COLUMNS.values()), [[r[c] for c in COLUMNS] for r in result["rows"]]),
    ]
    errors = [r for r in result["rows"] if r.get("error")]
    if errors:
        lines += ["", "Runs that stopped on an error:"]
        lines += [f"- {r['backend']}, concurrency {r['concurrency']}: `{r['error']}`" for r in errors]
    return "\n".join(lines) + "\n"


@click.command("llm-server")
@click.option("--model", default="qwen2.5-coder-1.5b", show_default=True, help="a local model name")
@click.option("--dataset", default="nq", show_default=True, help="shared data set the questions come from")
@click.option("--n", type=click.IntRange(min=1), default=16, show_default=True, help="questions per run")
@click.option("--concurrency", default="1,4", show_default=True, help="comma-separated answer_many concurrencies")
@click.option("--route", type=click.Choice(ROUTES), default=ROUTES[0], show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=os.cpu_count() or 1, help="model threads")
@click.option(
    "--server-timeout",
    type=float,
    default=600,
    show_default=True,
    help="seconds a request to the server is waited on (it queues behind the others), no retries",
)
@click.option("--workdir", type=click.Path(file_okay=False), default="runs/bench_llm_server", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), default=DEFAULT_OUT, show_default=True)
def bench_llm_server(model, dataset, n, concurrency, route, threads, server_timeout, workdir, out):
    """answer_many throughput: the in-process local model against one llama.cpp server process
    (started here on the same model file, reached as openai:MODEL@URL), at each concurrency."""
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError as e:
        raise LogicRouteError(f"the llama.cpp server needs llama-cpp-python[server]: {e}") from e
    try:
        levels = tuple(int(x) for x in concurrency.split(",") if x.strip())
    except ValueError:
        raise LogicRouteError(f"--concurrency takes comma-separated integers, got {concurrency!r}") from None
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    result = benchmark(model, dataset, n, levels, route, work, threads, server_timeout)
    args = next((sys.argv[i + 1 :] for i, a in enumerate(sys.argv) if a in ("llm-server", "bench llm-server")), [])
    command = " ".join(["logicroute bench llm-server", *args])
    md = report_markdown(result, command.strip())
    atomic_write_text(Path(out), md)
    atomic_write_text(Path(out).with_suffix(".json"), json.dumps({**result, "command": command}, indent=1))
    click.echo(md)
    click.echo(f"report: {out}")
