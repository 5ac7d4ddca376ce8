"""The CLI: instant help, one-line errors instead of tracebacks, a stdout closed early is no
failure, the index/ask round trip."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from engine.face.cli import main
from hierarchy.kb import KnowledgeBase
from tests import doc_files
from tests.fakes import HashedBowEmbedder, layered_kb, segment_file


def test_help_imports_no_heavy_library():
    code = (
        "import sys; from click.testing import CliRunner; from engine.face.cli import main; "
        "r = CliRunner().invoke(main, ['--help']); assert r.exit_code == 0, r.output; "
        "heavy = [m for m in ('torch', 'sentence_transformers', 'faiss', 'lightning', 'llama_cpp', 'openai', "
        "'sklearn', 'fastapi', 'mcp', 'pypdf', 'bs4') if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def every_help() -> dict[str, str]:
    """`logicroute ... --help` of every command, the groups' subcommands and hidden ones included."""
    import click

    helps, runner = {}, CliRunner()

    def walk(group: click.Group, path: list[str]) -> None:
        for name in group.list_commands(None) + [n for n, c in group.commands.items() if c.hidden]:
            r = runner.invoke(main, [*path, name, "--help"])
            assert r.exit_code == 0, (path, name, r.output)
            helps[" ".join([*path, name])] = r.output
            command = group.get_command(None, name)
            if isinstance(command, click.Group):
                walk(command, [*path, name])

    walk(main, [])
    return helps


def test_every_command_has_help_and_none_names_an_issue_or_a_session():
    import re

    helps = every_help()
    assert {"bench logic", "bench llm-server", "mcp", "check", "route", "bench-logic"} <= set(helps)
    named = {name: m.group(0) for name, text in helps.items() if (m := re.search(r"(?i)\b(issue|session)s?\b", text))}
    assert named == {}


def test_help_lists_at_most_thirteen_commands_and_the_benchmarks_under_bench():
    r = CliRunner().invoke(main, ["--help"])
    names = [line.split()[0] for line in r.output.split("Commands:")[1].splitlines() if line.startswith("  ")]
    assert len(names) <= 13 and "bench" in names and not any(n.startswith("bench-") for n in names)
    assert {
        "ask",
        "index",
        "serve",
        "mcp",
        "check",
        "adapt",
        "benchmark",
        "label",
        "train",
        "eval-router",
        "calibrate",
    } <= set(names)


def test_a_command_by_its_name_before_it_moved_runs_with_a_note(tmp_path):
    r = CliRunner().invoke(main, ["repair", "--kb", str(tmp_path / "nowhere")])
    assert r.stderr.splitlines()[0] == "note: `logicroute repair` is now `logicroute check --repair`"
    assert r.exit_code == 2 and "no knowledge base" in r.stderr
    r = CliRunner().invoke(main, ["ask", "Who?"], usage_error_expected=True)
    assert r.exit_code == 2 and "Missing option '--kb'" in r.output and "--dry-run" in r.output


def test_ask_on_a_missing_kb_is_one_clear_line(tmp_path):
    r = CliRunner().invoke(main, ["ask", "Who?", "--kb", str(tmp_path / "nope"), "--route", "chunk"])
    assert r.exit_code == 2
    assert r.output.startswith("error: ") and "logicroute index" in r.output
    assert "Traceback" not in r.output


def test_index_of_an_unknown_format_is_one_clear_line(tmp_path):
    bad = tmp_path / "data.csv"
    bad.write_text("a,b\n1,2\n")
    r = CliRunner().invoke(main, ["index", str(bad), "--kb", str(tmp_path / "kb")])
    assert r.exit_code == 2 and r.output.startswith("error: ")
    assert not (tmp_path / "kb" / "manifest.json").exists()


def test_index_of_a_malformed_jsonl_names_file_and_line(tmp_path):
    bad = tmp_path / "docs.jsonl"
    bad.write_text('{"id": "a", "title": "A", "text": "fine"}\n{"id": "b", "text": \n')
    r = CliRunner().invoke(main, ["index", str(bad), "--kb", str(tmp_path / "kb"), "--summaries", "none"])
    assert r.exit_code == 2 and "docs.jsonl" in r.output and ":2" in r.output


def test_a_refusal_by_the_machine_is_one_line_not_a_traceback(tmp_path, monkeypatch):
    import hierarchy.indexing

    def disk_full(*a, **k):
        raise OSError(28, "No space left on device", str(tmp_path / "kb" / "vectors.npy"))

    monkeypatch.setattr(hierarchy.indexing, "index_sources", disk_full)
    (tmp_path / "a.txt").write_text("The Tamsk river is 143 km long.")
    r = CliRunner().invoke(main, ["index", str(tmp_path / "a.txt"), "--kb", str(tmp_path / "kb")])
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert r.output == f"error: No space left on device ({tmp_path / 'kb' / 'vectors.npy'})\n"


def index_with_a_fake_embedder(*args: str):
    """`logicroute ARGS` with a fake embedder injected: no model loads."""
    return CliRunner().invoke(main, list(args), obj={"embedder": HashedBowEmbedder(dim=128)})


def test_a_full_disk_during_index_names_the_file_it_could_not_write(tmp_path, monkeypatch):
    for folder, text in (("a", "The Tamsk river is 143 km long."), ("b", "The Olm river freezes every winter.")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / f"{folder}.txt").write_text(text)
    kb_dir = tmp_path / "kb"
    first = index_with_a_fake_embedder("index", str(tmp_path / "a"), "--kb", str(kb_dir), "--summaries", "none")
    assert first.exit_code == 0

    def disk_full(fd):  # as the kernel says it: an errno and no file name
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", disk_full)
    r = index_with_a_fake_embedder("index", str(tmp_path / "b"), "--kb", str(kb_dir), "--summaries", "none")
    monkeypatch.undo()
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert r.stderr.startswith("error: No space left on device (") and r.stderr.count("\n") == 1
    named = r.stderr.removeprefix("error: No space left on device (").rstrip(")\n")
    assert os.path.dirname(named) == str(kb_dir) and not os.path.basename(named).startswith(".")
    assert KnowledgeBase.open(kb_dir, HashedBowEmbedder(dim=128)).doc_ids == ["a.txt"]  # the last commit, whole


def test_files_no_reader_takes_are_counted_in_one_line_and_listed_with_v(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nIndexed.")
    doc_files.report_pdf(tmp_path / "docs" / "manual.pdf")  # a PDF has a reader now (the docs extra)
    for name in ("intro.rst", "usage.rst", "logo.png"):
        (tmp_path / "docs" / name).write_text("not read")
    args = ["index", str(tmp_path / "docs"), "--kb", str(tmp_path / "kb"), "--summaries", "none"]
    r = index_with_a_fake_embedder(*args)
    assert r.exit_code == 0 and "2 documents" in r.stderr
    lines = [line for line in r.stderr.splitlines() if "skipped" in line]
    summary = "skipped 3 files: 2 .rst, 1 .png (no reader; -v lists them)"
    assert lines == [f"warning: {tmp_path / 'docs'}: {summary}"]
    verbose = index_with_a_fake_embedder("-v", *args)
    assert all(f"{tmp_path / 'docs' / name}: skipped" in verbose.stderr for name in ("logo.png", "intro.rst"))


def test_bad_llm_spec_is_one_clear_line(tmp_path):
    r = CliRunner().invoke(main, ["demo", "--kb", str(tmp_path / "kb"), "--llm", "nonsense"])
    assert r.exit_code == 2 and "bad LLM spec" in r.output


@pytest.mark.embedder
def test_embedder_index_then_ask_with_an_unreachable_endpoint_fails_cleanly(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Ardmere\nThe Ardmere Lighthouse was built in 1871.\n")
    runner = CliRunner()
    r = runner.invoke(main, ["index", str(docs), "--kb", str(tmp_path / "kb"), "--summaries", "none"])
    assert r.exit_code == 0, r.output
    manifest = json.loads((tmp_path / "kb" / "manifest.json").read_text())
    assert manifest["counts"]["chunks"] == 1
    r = runner.invoke(
        main,
        [
            "ask",
            "When was the lighthouse built?",
            "--kb",
            str(tmp_path / "kb"),
            "--route",
            "chunk",
            "--set",
            "cache=false",
            "--llm",
            "openai:m@http://127.0.0.1:9/v1",
        ],
        env={"OPENAI_API_KEY": "x", "LOGICROUTE_API_KEY": "x"},
    )
    assert r.exit_code == 2 and r.output.startswith("error: ") and "Traceback" not in r.output


# ---------------------------------------------------------------- a reader that leaves early


@pytest.mark.parametrize(("damaged", "status"), [(False, 0), (True, 1)], ids=["healthy", "damaged"])
def test_a_closed_stdout_is_not_a_failure_and_the_exit_status_stays_the_commands(tmp_path, damaged, status):
    kb = layered_kb(tmp_path / "kb", HashedBowEmbedder(dim=128))
    if damaged:
        segment_file(kb.path, "vectors").write_bytes(b"garbage")
    logicroute = str(Path(sys.executable).parent / "logicroute")
    for args in (["check", "--kb", str(kb.path)], ["check", "--kb", str(kb.path), "--json"], ["--help"]):
        read, write = os.pipe()
        os.close(read)  # the reader is gone before the first line: every write meets a closed pipe
        try:
            r = subprocess.run([logicroute, *args], stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
        finally:
            os.close(write)
        expected = 0 if args == ["--help"] else status
        assert (r.returncode, r.stderr) == (expected, ""), args  # no "Broken pipe", no traceback


def test_the_route_line_says_what_overrode_the_routers_probabilities(capsys):
    from engine.core.decide import Decision
    from engine.face.cli_ask import print_answer
    from engine.floor.base.trace import Trace
    from engine.floor.base.types import Answer, Usage

    probs = {"chunk": 0.95, "summary": 0.04, "logic": 0.01}
    for decision, says in (
        (Decision("summary", "argmax", form="list", list_gate=0.91), "(list gate P 0.91; router chunk 0.95"),
        (Decision("logic", "argmax", form="chain"), "(form: chain; router chunk 0.95"),
        (Decision("chunk", "argmax"), "(chunk 0.95, summary 0.04, logic 0.01)"),
    ):
        trace = Trace(route=decision.route, decision=decision)
        print_answer(Answer(text="x", route=decision.route, usage=Usage(), trace=trace, route_probs=probs))
        assert f"route: {decision.route}  {says}" in capsys.readouterr().out


def test_the_demo_reads_its_corpus_and_questions_where_they_ship():
    from engine.face.cli import DEMO_DIR

    assert (DEMO_DIR / "corpus.jsonl").is_file() and (DEMO_DIR / "questions.jsonl").is_file()
