"""`python -m tests.engine.mcp_stdio_server FOLDER [--allow-writes]`: the MCP server over stdio
on the films KB of the server specs (written into FOLDER), with the fake LLM and router: what a
client starts as a subprocess, without loading a model."""

from __future__ import annotations

import sys
from pathlib import Path

from engine.face.serve.mcp_framing import run_stdio
from engine.face.serve.mcp_tools import build_server
from tests.engine.serve_helpers import film_service

if __name__ == "__main__":
    service = film_service(Path(sys.argv[1]))
    run_stdio(build_server(service, allow_writes="--allow-writes" in sys.argv[2:]))
