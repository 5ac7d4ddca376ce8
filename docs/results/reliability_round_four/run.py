import os
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, ".")
from tests.engine.fake_endpoint import FakeEndpoint, Trickle

route = sys.argv[1] if len(sys.argv) > 1 else "logic"
n = int(sys.argv[2]) if len(sys.argv) > 2 else 3
with FakeEndpoint(Trickle(every=1.0)) as server:
    spec = f"openai:m@{server.url}?timeout=60&retries=0"
    for i in range(n):
        cache = tempfile.mkdtemp()
        q = f"Where was the builder of the Ardmere lighthouse born {uuid.uuid4().hex[:6]}?"
        t0 = time.perf_counter()
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "engine.face.cli",
                "ask",
                q,
                "--kb",
                "/tmp/tl/kb",
                "--route",
                route,
                "--set",
                "budget.max_seconds=5",
                "--set",
                "cache=false",
                "--llm",
                spec,
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "LOGICROUTE_CACHE_DIR": cache},
        )
        dt = time.perf_counter() - t0
        print(
            f"{route} run {i}: exit {p.returncode} in {dt:.1f}s; stdout={p.stdout.strip()[:80]!r}; "
            f"stderr={p.stderr.strip().splitlines()[-1:]}"
        )
