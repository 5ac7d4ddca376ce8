"""Every answer's trace JSON made while tests/engine and tests/router run (chunk, summary and
logic routes with scripted LLMs, the pipeline's decision, OOD guard, escalation and absence), as
sorted lines: the before/after check that a change to the Trace's types keeps its JSON. A pytest
plugin: run it on two commits, the outputs must be byte-identical.

    PYTHONPATH=. python -m pytest -q -m "not local_llm" -p docs.results.design.trace_dump tests/engine tests/router
    sort /tmp/trace_dump.jsonl | sha256sum

Each Answer made is kept; after each test its trace's JSON (Trace.to_dict(), the form `ask
--json`, the server and MCP write) is appended to TRACE_DUMP (default /tmp/trace_dump.jsonl),
in the trace's key order, with the wall-clock seconds of its LLM calls zeroed (they vary run to
run) and the names of the moment (pytest's temporary folders, a fake endpoint's port) made
steady, after the test's id. The real local model's tests (local_llm) are left out: they take
most of the run's time, and their answers take the same paths; so is the one test whose number
of answers varies run to run (_VARIES)."""

from __future__ import annotations

import json
import os
import re

import pytest

from engine.floor.base.types import Answer

OUT = os.environ.get("TRACE_DUMP", "/tmp/trace_dump.jsonl")
_made: list[Answer] = []
_post_init = Answer.__post_init__


def _keep(self: Answer) -> None:
    _post_init(self)
    _made.append(self)


Answer.__post_init__ = _keep


def _steady(value):
    """The JSON with every float under a key naming seconds zeroed."""
    if isinstance(value, dict):
        return {k: 0.0 if "seconds" in k and isinstance(v, float) else _steady(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_steady(v) for v in value]
    return value


# where a test's answers differ run to run: how many queries run while documents change
_VARIES = {"tests/engine/test_serve_native.py::test_documents_change_while_queries_run_and_every_query_answers"}
# names of the machine's moment: pytest's numbered temporary folders, a fake endpoint's port
_MOMENT = [(re.compile(r"pytest-\d+"), "pytest-N"), (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:PORT")]


def _steady_line(line: str) -> str:
    for pattern, name in _MOMENT:
        line = pattern.sub(name, line)
    return line


def _unwritable(value) -> str:
    """A value JSON cannot write (a test's stand-in object), named by its type."""
    return f"<{type(value).__name__}>"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    answers = [] if item.nodeid in _VARIES else list(_made)
    _made.clear()
    with open(OUT, "a", encoding="utf-8") as out:
        for answer in answers:
            line = json.dumps(_steady(answer.trace.to_dict()), ensure_ascii=False, default=_unwritable)
            out.write(f"{item.nodeid}\t{_steady_line(line)}\n")
