"""`logicroute bench llm-server`: each run counts every answer and its tokens from the answers
themselves; the report has one row per backend and concurrency; a server that
dies or never answers is a one-line error, not a hang."""

from __future__ import annotations

import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from engine.floor.base.errors import LLMError, LogicRouteError
from tests.fakes import ScriptedLLM, make_rag
from training.scale.bench_llm_server import report_markdown, run_answers, wait_ready


def test_a_run_books_every_answer_its_tokens_and_the_answers_that_fell_back():
    llm = ScriptedLLM(rules={"Question": "Paris"}, delay=0.01)
    rag = make_rag(llm)
    run = run_answers(
        rag,
        ["Where was Marie Curie born?", "When was Christopher Nolan born?", "Who directed Inception?"],
        "chunk",
        2,
        "x",
    )
    row = run.row()
    assert row["answers"] == 3 and row["llm_calls"] == 3
    assert run.prompt_tokens == llm.reported_tokens[0] and run.completion_tokens == llm.reported_tokens[1]
    assert row["answers_per_min"] > 0 and row["p50_s"] <= row["p95_s"]
    assert row["with_fallbacks"] == 0


def test_a_run_an_llm_error_stopped_keeps_the_error_in_its_row_and_the_report():
    rag = make_rag(ScriptedLLM(rules={"Question": LLMError("no answer within 60s after 5 tries")}))
    row = run_answers(rag, ["Where is the Louvre?"], "chunk", 4, "server").row()
    assert row["answers"] == 0 and "no answer within 60s" in row["error"]
    result = {"model": "m", "dataset": "nq", "questions": 1, "route": "chunk", "threads": 2, "rows": [row]}
    md = report_markdown({**result, "server_timeout_s": 60, "machine": "x"}, "logicroute bench llm-server")
    assert "server, concurrency 4: `no answer within 60s after 5 tries`" in md


def test_the_report_has_one_row_per_backend_and_concurrency():
    rag = make_rag(ScriptedLLM(rules={"Question": "Paris"}))
    rows = [
        run_answers(rag, ["Where is the Louvre?"], "chunk", c, b).row()
        for b in ("in-process", "server")
        for c in (1, 4)
    ]
    result = {
        "model": "m",
        "dataset": "nq",
        "questions": 1,
        "route": "chunk",
        "threads": 2,
        "rows": rows,
        "machine": "x",
        "server_timeout_s": 600,
    }
    table = [
        line for line in report_markdown(result, "logicroute bench llm-server").splitlines() if line.startswith("| ")
    ]
    assert len(table) == 1 + 4  # header + one line per run
    assert table[1].startswith("| in-process | 1 |") and table[-1].startswith("| server | 4 |")


def test_a_server_that_exits_before_answering_is_an_error_at_once():
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(3)"])
    proc.wait()
    with pytest.raises(LogicRouteError, match="exited with code 3"):
        wait_ready("http://127.0.0.1:9/v1", proc, timeout=30)


def test_waiting_ends_when_the_models_endpoint_answers_or_the_time_is_up():
    class Models(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.end_headers()
            self.wfile.write(b'{"data": []}')

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        wait_ready(f"http://127.0.0.1:{server.server_port}/v1", alive, timeout=10)  # returns: it answered
        with pytest.raises(LogicRouteError, match="did not answer"):
            wait_ready(f"http://127.0.0.1:{server.server_port}/nothing", alive, timeout=1.5)
    finally:
        alive.kill()
        server.shutdown()
