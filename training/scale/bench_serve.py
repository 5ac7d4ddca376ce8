"""`logicroute bench serve`: a bounded load benchmark of `logicroute serve`.

In one run, over one warm RoutedRAG:
  1. direct: N sequential `RoutedRAG.answer` calls, the baseline;
  2. served: N requests to POST /query of the real server (a ServerThread on a free port) at each
     concurrency (1, 8, 32 by default), every request on a kept-alive HTTP connection of its
     client thread.
Reported per run: p50/p95 latency, errors (non-200 replies; 0 expected) and requests/s, and the
server's overhead per request: served p50 at concurrency 1 minus direct p50 (HTTP, JSON, the
queue, the thread hop).

The backend is scripted by default (ScriptedBackend: a fixed answer after `--llm-delay`
seconds, as a remote endpoint that answers in constant time), so the figures are the server's
and the retrieval's, not an LLM's. `--llm SPEC` runs it against a real backend instead (use a
few requests: the local model takes seconds per answer). The questions are the demo's eight,
repeated: the embedder caches their vectors, so after the first round a request costs the
router's MLP, a faiss search and the backend's call. The load client runs in the same
process as the server: at high concurrency both share the GIL and the CPU, so requests/s is a
lower bound of what a separate client would see.
"""

from __future__ import annotations

import http.client
import json
import platform
import socket
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import click

from engine.core.routes import ROUTE_CHOICES, ROUTES
from engine.face.cli_options import info
from engine.floor.base.stats import percentile
from engine.floor.base.types import Completion
from training.bench.bench_report import markdown_table

DEMO_DIR = Path(__file__).resolve().parents[2] / "engine" / "demo"
COLUMNS = {  # Run.row's key -> the report's column, in order
    "run": "run",
    "concurrency": "concurrency",
    "requests": "requests",
    "errors": "errors",
    "p50_ms": "p50 ms",
    "p95_ms": "p95 ms",
    "mean_ms": "mean ms",
    "requests_per_s": "requests/s",
}
SCRIPTED_ANSWER = "The answer is in the first passage [1]."


class ScriptedBackend:
    """An LLM that answers every free-text call with SCRIPTED_ANSWER after `delay` seconds, and
    every structured call (self-check, decomposition) with the smallest object of its schema.
    Thread-safe: it keeps no state but a call count."""

    name = "scripted:bench"

    def __init__(self, delay: float = 0.0):
        self.delay = delay
        self.calls = 0
        self._lock = threading.Lock()

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0) -> Completion:
        with self._lock:
            self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        text = SCRIPTED_ANSWER if schema is None else json.dumps(_smallest(schema))
        prompt = sum(len(str(m.get("content", "")).split()) for m in messages)
        data = None if schema is None else json.loads(text)
        return Completion(text, prompt, len(text.split()), self.delay, data=data, model=self.name)


def _smallest(schema: dict):
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: _smallest(props.get(k, {})) for k in schema.get("required") or []}
    return {"array": [], "boolean": True, "integer": 0, "number": 0.0}.get(kind, "x")


@dataclass
class Run:
    name: str
    concurrency: int
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    seconds: float = 0.0
    error_examples: list[str] = field(default_factory=list)

    def row(self) -> dict:
        lat = self.latencies
        return {
            "run": self.name,
            "concurrency": self.concurrency,
            "requests": len(lat) + self.errors,
            "errors": self.errors,
            "p50_ms": round(1000 * percentile(lat, 0.5), 2),
            "p95_ms": round(1000 * percentile(lat, 0.95), 2),
            "mean_ms": round(1000 * statistics.fmean(lat), 2) if lat else 0.0,
            "requests_per_s": round((len(lat) + self.errors) / self.seconds, 1) if self.seconds else 0.0,
        }


def run_direct(rag, questions: list[str], route: str) -> Run:
    run = Run("direct RoutedRAG.answer", 1)
    t0 = time.perf_counter()
    for q in questions:
        t = time.perf_counter()
        rag.answer(q, route=route)
        run.latencies.append(time.perf_counter() - t)
    run.seconds = time.perf_counter() - t0
    return run


def run_served(host: str, port: int, questions: list[str], route: str, concurrency: int) -> Run:
    """`questions` sent to POST /query by `concurrency` client threads, each on one kept-alive connection."""
    run = Run("served POST /query", concurrency)
    local = threading.local()
    lock = threading.Lock()

    def one(q: str) -> None:
        if getattr(local, "conn", None) is None:
            local.conn = http.client.HTTPConnection(host, port, timeout=120)
            local.conn.connect()
            local.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as any HTTP client library does
        # bytes: http.client sends headers and body in one write (a str body is a second write,
        # and Nagle's algorithm against delayed ACKs then adds ~40 ms to every request)
        body = json.dumps({"question": q, "route": route, "trace": False}).encode()
        t = time.perf_counter()
        try:
            local.conn.request("POST", "/query", body, {"Content-Type": "application/json"})
            r = local.conn.getresponse()
            payload = r.read()
            ok, why = r.status == 200, f"{r.status} {payload[:200]!r}"
        except (OSError, http.client.HTTPException) as e:
            local.conn = None
            ok, why = False, repr(e)
        dt = time.perf_counter() - t
        with lock:
            if ok:
                run.latencies.append(dt)
            else:
                run.errors += 1
                if len(run.error_examples) < 3:
                    run.error_examples.append(why)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="bench-client") as pool:
        list(pool.map(one, questions))
    run.seconds = time.perf_counter() - t0
    return run


def demo_kb(folder: Path):
    """The shipped demo corpus indexed into `folder` (MiniLM; extractive summary layers)."""
    from hierarchy.indexing import index_sources

    return index_sources(folder, [DEMO_DIR / "corpus.jsonl"], show_progress=False).kb


def demo_questions(n: int) -> list[str]:
    lines = (DEMO_DIR / "questions.jsonl").read_text().splitlines()
    base = [json.loads(line)["question"] for line in lines if line.strip()]
    return [base[i % len(base)] for i in range(n)]


def benchmark_serve(
    kb_dir: Path, n: int, concurrencies: tuple[int, ...], route: str, llm, llm_spec: str, workers: int
) -> dict:
    from engine.core.pipeline import RoutedRAG
    from engine.face.serve.config import ServeConfig
    from engine.face.serve.run import ServerThread
    from engine.face.serve.service import AnswerService
    from hierarchy.kb import KnowledgeBase

    rag = RoutedRAG(kb=KnowledgeBase.open(kb_dir), llm=llm, cache=False, llm_spec=llm_spec)
    questions = demo_questions(n)
    rag.answer(questions[0], route=route)  # warm: embedder, router, summary layers, the LLM
    info(f"direct: {n} answers ...")
    runs = [run_direct(rag, questions, route)]
    config = ServeConfig(workers=workers, queue_size=max(concurrencies) + 8, deadline_seconds=600)
    service = AnswerService(rag, config, llm_spec=llm_spec)
    with ServerThread(service) as server:
        for c in concurrencies:
            info(f"served: {n} requests at concurrency {c} ...")
            runs.append(run_served(config.host, server.port, questions, route, c))
        server_metrics = service.metrics_dict()
    rows = [r.row() for r in runs]
    direct, served1 = rows[0], next((r for r in rows[1:] if r["concurrency"] == 1), None)
    overhead = None
    if served1 is not None:
        overhead = {
            "p50_ms": round(served1["p50_ms"] - direct["p50_ms"], 2),
            "mean_ms": round(served1["mean_ms"] - direct["mean_ms"], 2),
        }
    return {
        "requests_per_run": n,
        "route": route,
        "llm": llm_spec,
        "workers": workers,
        "rows": rows,
        "overhead_per_request": overhead,
        "error_examples": [e for r in runs for e in r.error_examples],
        "server_metrics_routes": server_metrics["routes"],
        "machine": f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}",
    }


def report_markdown(result: dict, command: str) -> str:
    lines = [
        "# bench serve: the HTTP server's own cost",
        "",
        f"`{command}`",
        "",
        f"{result['requests_per_run']} requests per run, route `{result['route']}`, LLM `{result['llm']}`, "
        f"{result['workers']} answering threads; load client in the server's process ({result['machine']}).",
        "",
        *markdown_table(list(COLUMNS.values()), [[r[c] for c in COLUMNS] for r in result["rows"]]),
    ]
    o = result["overhead_per_request"]
    if o:
        lines += [
            "",
            f"**Server overhead per request** (served at concurrency 1 minus direct): {o['p50_ms']} ms at the "
            f"median, {o['mean_ms']} ms on average.",
        ]
    if result["error_examples"]:
        lines += ["", "Errors, first examples: " + "; ".join(f"`{e}`" for e in result["error_examples"])]
    return "\n".join(lines) + "\n"


@click.command("serve")
@click.option("--requests", "n", type=click.IntRange(min=1), default=500, show_default=True, help="requests per run")
@click.option("--concurrency", default="1,8,32", show_default=True, help="comma-separated client concurrencies")
@click.option("--route", type=click.Choice(ROUTE_CHOICES), default=ROUTES[0], show_default=True)
@click.option(
    "--kb", "kb_dir", type=click.Path(file_okay=False), help="a KB to serve (default: the demo corpus, indexed)"
)
@click.option("--llm", "llm_spec", default=None, help="a real LLM spec instead of the scripted backend")
@click.option(
    "--llm-delay", type=click.FloatRange(min=0), default=0.0, show_default=True, help="scripted backend: seconds"
)
@click.option("--workers", type=click.IntRange(min=1), default=8, show_default=True, help="answers at once")
@click.option("--out", type=click.Path(dir_okay=False), default="docs/results/serve/bench_serve.md", show_default=True)
def bench_serve(n, concurrency, route, kb_dir, llm_spec, llm_delay, workers, out):
    """Load-test `logicroute serve`: N requests at each concurrency, against a direct
    RoutedRAG.answer baseline, with a scripted LLM backend (or --llm)."""
    import sys

    from engine.floor.base.files import atomic_write_text

    concurrencies = tuple(int(c) for c in concurrency.split(",") if c.strip())
    if llm_spec:
        from engine.face.cli_options import check_llm_spec
        from engine.floor.llm.factory import make_llm

        check_llm_spec(llm_spec)
        llm = make_llm(llm_spec, cache=False)
    else:
        llm, llm_spec = ScriptedBackend(llm_delay), f"scripted (answers after {llm_delay:g}s)"
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        if kb_dir is None:
            info("indexing the demo corpus (loads MiniLM) ...")
            kb_dir = Path(tmp) / "kb"
            demo_kb(kb_dir)
        result = benchmark_serve(Path(kb_dir), n, concurrencies, route, llm, llm_spec, workers)
    args = next((sys.argv[i + 1 :] for i, a in enumerate(sys.argv) if a in ("serve", "bench serve")), [])
    text = report_markdown(result, " ".join(["logicroute bench serve", *args]))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, text)
    atomic_write_text(str(Path(out).with_suffix(".json")), json.dumps(result, indent=2) + "\n")
    click.echo(text)
