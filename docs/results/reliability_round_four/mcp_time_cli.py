import json
import os
import select
import subprocess
import sys
import tempfile
import time

os.chdir(os.environ.get("SRC", "."))
p = subprocess.Popen(
    [sys.executable, "-m", "engine.face.cli", "mcp", "--kb", "/tmp/tl/kb", "--llm", "openai:m@http://127.0.0.1:9/v1"],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    env={**os.environ, "LOGICROUTE_CACHE_DIR": tempfile.mkdtemp(), "PYTHONPATH": os.environ.get("SRC", ".")},
)
init = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "m", "version": "1"}},
}
p.stdin.write((json.dumps(init) + "\n").encode())
p.stdin.flush()
print("init reply:", p.stdout.readline()[:60])
frame = (
    b'{"jsonrpc": "2.0", "id": 8, "method": "tools/call", '
    b'"params": {"name": "ask", "arguments": {"question": "\\ud800?"}}}\n'
)
t0 = time.perf_counter()
p.stdin.write(frame)
p.stdin.flush()
r, _, _ = select.select([p.stdout], [], [], 20)
line = p.stdout.readline() if r else b""
print(f"surrogate frame reply after {time.perf_counter() - t0:.3f}s: {line[:160]!r}")
p.stdin.write(b'{"jsonrpc": "2.0", "id": 2, "method": "ping"}\n')
p.stdin.flush()
print("next:", p.stdout.readline()[:80])
p.stdin.close()
p.wait(10)
print("stderr:", p.stderr.read().decode()[-300:])
