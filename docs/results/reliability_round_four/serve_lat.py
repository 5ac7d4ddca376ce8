"""serve's first question against its second (a fast scripted endpoint, a new embedding cache)."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, ".")
from tests.engine.fake_endpoint import FakeEndpoint


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def post(url, body):
    t0 = time.perf_counter()
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        r.read()
        return r.status, time.perf_counter() - t0


with FakeEndpoint("Ada Brankov was born in Kesh [1].") as server:
    server.replies = ["Ada Brankov was born in Kesh [1]."] * 20
    port = free_port()
    cache = os.environ.get("CACHE") or tempfile.mkdtemp()
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine.face.cli",
            "serve",
            "--kb",
            "/tmp/tl/kb",
            "--port",
            str(port),
            "--llm",
            f"openai:m@{server.url}?timeout=30&retries=0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "LOGICROUTE_CACHE_DIR": cache, "PYTHONPATH": os.environ.get("SRC", ".")},
    )
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
            break
        except Exception:
            time.sleep(0.1)
    ready = time.perf_counter() - t0
    a = post(
        f"http://127.0.0.1:{port}/query",
        {"question": "Where was the builder of the Ardmere lighthouse born?", "route": "chunk"},
    )
    b = post(f"http://127.0.0.1:{port}/query", {"question": "Who built the Ardmere lighthouse?", "route": "chunk"})
    p.terminate()
    p.wait()
    print(f"health at {ready:.1f}s; first question {a[0]} in {a[1]:.2f}s; second {b[0]} in {b[1]:.2f}s")
