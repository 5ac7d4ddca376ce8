"""Quiet, honest progress: bars that move per batch, -q that hides them (and the info lines),
-v that shows debug lines, no third-party bar on stderr, and `calibrate` refusing a sample too
small to calibrate on. The real MiniLM loads in one test only (marked `embedder`)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import engine.floor.embedder as embedder_mod
import hierarchy.layers.nodes as nodes_mod
from engine.face.cli import main
from engine.floor.base.progress import progress_on
from hierarchy.kb import KnowledgeBase
from hierarchy.layers.update import build_layers
from tests.fakes import HashedBowEmbedder
from tests.samples import make_docs


class RecordedBar:
    """Stands in for a tqdm bar: what it was asked to show and every update."""

    made: list[RecordedBar] = []

    def __init__(self, total, desc, unit, requested=True):
        self.total, self.desc, self.shown, self.updates = total, desc, progress_on(requested), []
        RecordedBar.made.append(self)

    def update(self, n):
        self.updates.append(n)

    def close(self):
        pass


@pytest.fixture
def bars(monkeypatch):
    RecordedBar.made = []
    monkeypatch.setattr(embedder_mod, "progress_bar", RecordedBar)
    monkeypatch.setattr(nodes_mod, "progress_bar", RecordedBar)
    return RecordedBar.made


@pytest.fixture
def fake_model_embedder(tmp_path, monkeypatch):
    """A real Embedder whose model is never loaded: each model call is recorded and returns ones."""
    folder = tmp_path / "model"
    folder.mkdir()
    e = embedder_mod.Embedder(folder, batch_size=4, cache=False)
    e._dim, e._model = 8, object()
    e.model_calls = []

    def encode_model(texts):
        e.model_calls.append(len(texts))
        return np.ones((len(texts), 8), np.float32)

    monkeypatch.setattr(e, "_encode_model", encode_model)
    return e


@pytest.fixture
def logicroute_level():
    logger = logging.getLogger("logicroute")
    before = logger.level
    yield logger
    logger.setLevel(before)


# ---------------------------------------------------------------- bars that move per batch


def test_the_embedding_bar_moves_once_per_batch(fake_model_embedder, bars):
    v = fake_model_embedder.encode([f"text number {i}" for i in range(10)], show_progress=True)
    assert v.shape == (10, 8)
    assert fake_model_embedder.model_calls == [4, 4, 2]  # one model call per batch, not one per block of 32
    (bar,) = bars
    assert bar.shown and bar.total == 10 and bar.updates == [4, 4, 2]


def test_without_a_bar_the_embedder_encodes_in_blocks(fake_model_embedder, bars, logicroute_level):
    fake_model_embedder.encode([f"a {i}" for i in range(10)], show_progress=False)
    logicroute_level.setLevel(logging.WARNING)  # what -q sets
    fake_model_embedder.encode([f"b {i}" for i in range(10)], show_progress=True)
    assert fake_model_embedder.model_calls == [10, 10]
    assert [b.shown for b in bars] == [False, False]


def test_the_summary_bar_moves_on_a_small_kb(tmp_path, bars):
    kb = KnowledgeBase.create(tmp_path / "kb", HashedBowEmbedder(), chunk_words=200, overlap_words=0)
    kb.add(make_docs(4), show_progress=False)  # 32 chunks
    build_layers(kb, show_progress=True, cluster_size=4)
    level1 = next(b for b in bars if b.desc.startswith("summaries level 1"))
    assert level1.total >= 4 and len(level1.updates) == level1.total  # one step per cluster here
    assert sum(level1.updates) == level1.total


# ---------------------------------------------------------------- -q and -v


def write_docs(tmp_path: Path) -> Path:
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n" for d in make_docs(2)))
    return src


def index(tmp_path, *flags):
    args = [*flags, "index", str(write_docs(tmp_path)), "--kb", str(tmp_path / "kb"), "--summaries", "extractive"]
    res = CliRunner().invoke(main, args, obj={"embedder": HashedBowEmbedder()}, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res


def test_by_default_index_shows_its_bars_and_result_lines(tmp_path):
    res = index(tmp_path)
    assert "summaries level 1" in res.stderr and "16 documents -> 16 new chunks" in res.stderr


def test_quiet_hides_the_bars_and_the_info_lines(tmp_path, logicroute_level):
    before = logicroute_level.level
    res = index(tmp_path, "-q")
    assert res.stderr == "" and res.stdout == ""
    assert KnowledgeBase.open(tmp_path / "kb", HashedBowEmbedder()).manifest["counts"]["chunks"] == 16
    assert logicroute_level.level == before and logicroute_level.handlers == []  # undone after the command


def test_quiet_keeps_warnings(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\nThe Ardmere Lighthouse was built in 1871.\n")
    (docs / "image.md").write_bytes(b"\x89PNG\x00\x00binary")
    args = ["-q", "index", str(docs), "--kb", str(tmp_path / "kb"), "--summaries", "none"]
    res = CliRunner().invoke(main, args, obj={"embedder": HashedBowEmbedder()}, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert res.stderr.startswith("warning: ") and "image.md" in res.stderr and "documents ->" not in res.stderr


def test_verbose_shows_debug_lines(tmp_path, monkeypatch):
    from engine.core.pipeline import RoutedRAG

    def stop(cls, *args, **kwargs):
        raise SystemExit(0)

    monkeypatch.setattr(RoutedRAG, "open", classmethod(stop))
    args = [
        "ask",
        "Who?",
        "--kb",
        str(tmp_path),
        "--set",
        "budget.max_llm_calls=3",
        "--llm",
        "local:qwen2.5-coder-0.5b",
    ]
    res = CliRunner().invoke(main, ["-v", *args])
    assert "debug: budget limits {'max_llm_calls': 3}" in res.stderr
    res = CliRunner().invoke(main, args)
    assert "debug:" not in res.stderr
    res = CliRunner().invoke(main, ["-q", "-v", *args], usage_error_expected=True)
    assert res.exit_code == 2 and "exclude each other" in res.output


# ---------------------------------------------------------------- calibrate


def test_calibrate_refuses_fewer_than_twenty_questions(tmp_path, monkeypatch):
    import router.checkpoint

    def load_router(*args, **kwargs):
        raise RuntimeError("the router loaded")

    monkeypatch.setattr(router.checkpoint, "load_router", load_router)
    qfile = tmp_path / "qs.txt"
    qfile.write_text("".join(f"Question {i}?\n" for i in range(12)))
    out = tmp_path / "thresholds.json"
    res = CliRunner().invoke(main, ["calibrate", str(qfile), "--logic-share", "0.3", "--out", str(out)])
    assert res.exit_code == 2 and res.output.startswith("error: ") and len(res.output.strip().splitlines()) == 1
    assert "12 questions are too few" in res.output and "at least 20" in res.output and "--min-questions" in res.output
    assert not out.exists()
    res = CliRunner().invoke(
        main, ["calibrate", str(qfile), "--logic-share", "0.3", "--out", str(out)] + ["--min-questions", "12"]
    )
    assert str(res.exception) == "the router loaded"  # past the check: the next step loads the router


# ---------------------------------------------------------------- third-party output


@pytest.mark.embedder
def test_a_dry_run_json_prints_nothing_but_its_json():
    logicroute = Path(sys.executable).parent / "logicroute"
    r = subprocess.run(
        [str(logicroute), "ask", "Who directed the film that won in 1998?", "--dry-run", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""  # no "Loading weights" bar, no library warning
    assert json.loads(r.stdout)["route"] in ("chunk", "summary", "logic")
