"""The `milvus-server` store of `logicroute bench scale`: a Milvus 2.3.5 standalone server (the
`milvus` package of [dev]) that the bench starts for each measurement, with its data in a
temporary folder, and stops (SIGTERM, then SIGKILL) when the measurement ends; and the resident
memory of the server's processes, read from Linux /proc.

The server is started as `make milvus` starts it: `python -m tests.milvus_server` of the checkout
(free loopback ports, its own process group, no server left behind by a killed run). It runs as
a child process rather than an import: that helper lives with the tests, outside the installed
package, and the server dies with the thread that started it, so it belongs to a process whose
only work is to keep it."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.floor.base.errors import LogicRouteError
from training.scale.bench_memory import descendants, status_mb

SERVER = "milvus-server"  # the --stores name
HELPER = Path("tests") / "milvus_server.py"
STOP_WAIT_S = 30.0  # the helper's own stop is bounded (~5 s, then SIGKILL); past this the wrapper is killed


def checkout() -> Path:
    """The logicroute checkout whose tests/milvus_server.py starts the server."""
    root = Path(__file__).resolve().parents[2]
    if not (root / HELPER).is_file():
        raise LogicRouteError(
            f"--stores {SERVER} starts a server with {HELPER} of a logicroute checkout, which {root} lacks: "
            "run the bench from a checkout (`make install`)"
        )
    return root


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class BenchServer:
    proc: subprocess.Popen  # the helper, which keeps the server (its child) alive
    port: int
    data: Path

    @property
    def store(self) -> str:
        """The --store value of this server."""
        return f"milvus://127.0.0.1:{self.port}"

    def memory(self) -> dict:
        """Resident memory of the server's processes (the helper itself left out: it only waits)."""
        pids = descendants(self.proc.pid)
        return {"rss_mb": status_mb(pids, "VmRSS"), "peak_rss_mb": status_mb(pids, "VmHWM"), "processes": len(pids)}


@contextmanager
def milvus_server(start_timeout: float = 300.0) -> Iterator[BenchServer]:
    """A fresh standalone server on a free loopback port, data in a temporary folder; stopped and
    its folder removed on the way out, whatever happened inside."""
    root = checkout()
    data = Path(tempfile.mkdtemp(prefix="bench_milvus_server_"))
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "tests.milvus_server", "--port", str(port), "--data", str(data)]
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_serving(proc, start_timeout)
        yield BenchServer(proc, port, data)
    finally:
        _stop(proc)
        shutil.rmtree(data, ignore_errors=True)


def _wait_serving(proc: subprocess.Popen, timeout: float) -> None:
    """Until the helper says it serves; one line with its last words if it exits first."""
    deadline = time.monotonic() + timeout
    last = ""
    for line in proc.stdout:  # the helper gives up by itself after its own start timeout (120 s)
        if "serving at" in line:
            return
        last = line.strip() or last
        if time.monotonic() > deadline:
            break
    raise LogicRouteError(f"the Milvus server for --stores {SERVER} did not start: {last or 'no output'}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # the helper stops the server cleanly, then exits
        try:
            proc.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            proc.kill()  # the server, started with PR_SET_PDEATHSIG, goes with it
            proc.wait(timeout=10)
    if proc.stdout:
        proc.stdout.close()


def measure_on_server(vectors: np.ndarray, q: np.ndarray, truth: list[list[str]]) -> dict:
    """training.scale.bench_store.measure on a server of its own: build (the store's upserts, as
    `index` writes them), then the timed queries; the server's memory when it started, after the
    build and at the end, and its peak over both (VmHWM: the server is new, so its peak is theirs)."""
    from hierarchy.vector_store.open import new_store
    from training.scale.bench_store import bench_spec, row_ids, timed_queries

    with milvus_server() as srv:
        idle = srv.memory()
        t0 = time.perf_counter()
        store = new_store(bench_spec(srv.store), srv.data, vectors.shape[1], row_ids(len(vectors)), vectors)
        build = time.perf_counter() - t0
        built = srv.memory()
        timed = timed_queries(lambda row: [c for c, _ in store.search(row, 10)[0]], q, truth)
        end = srv.memory()
        store.close()
    return {
        "store": SERVER,
        "index": store.describe()["type"],
        "n": len(vectors),
        "queries": len(q),
        "build_s": round(build, 3),
        **timed,
        "server": {
            "rss_idle_mb": idle["rss_mb"],
            "rss_after_build_mb": built["rss_mb"],
            "rss_end_mb": end["rss_mb"],
            "peak_rss_mb": end["peak_rss_mb"],
            "processes": end["processes"],
        },
    }


def side_by_side(report: dict) -> list[str]:
    """Per size measured on both: the server against faiss-hnsw as ratios (the machine is shared,
    so a ratio of one run says more than either figure). Memory: the server's peak RSS against
    what faiss-hnsw's build added to the bench's own peak (its peak less what it held before)."""
    from training.bench.bench_report import markdown_table

    rows = []
    by = {(r["store"], r["n"]): r for r in report.get("index_only", [])}
    for (store, n), s in by.items():
        f = by.get(("faiss-hnsw", n))
        if store != SERVER or not f:
            continue
        added = max(0.1, f["peak_rss_mb"] - f.get("rss_start_mb", 0))
        rows.append(
            [
                f"{n:,}",
                f"{s['build_s']:.1f} s / {f['build_s']:.1f} s = {s['build_s'] / max(f['build_s'], 1e-3):.2f}x",
                f"{s['p50_ms']:.1f} ms / {f['p50_ms']:.2f} ms = {s['p50_ms'] / max(f['p50_ms'], 1e-3):.0f}x",
                f"{s['p95_ms']:.1f} ms / {f['p95_ms']:.2f} ms = {s['p95_ms'] / max(f['p95_ms'], 1e-3):.0f}x",
                f"{s['recall_at_10']:.3f} / {f['recall_at_10']:.3f}",
                f"{s['server']['peak_rss_mb']:,.0f} MB / {added:,.0f} MB = {s['server']['peak_rss_mb'] / added:.1f}x",
            ]
        )
    if not rows:
        return []
    head = ["vectors", "add: server / faiss-hnsw", "search p50", "search p95", "recall@10", "memory (see below)"]
    return markdown_table(head, rows)
