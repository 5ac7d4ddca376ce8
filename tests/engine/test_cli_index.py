"""`logicroute index` as a user runs it (a fake embedder injected, no model): a rerun over
unchanged files says they are already indexed."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from engine.cli import main
from tests.fakes import HashedBowEmbedder


@pytest.fixture
def emb() -> HashedBowEmbedder:
    return HashedBowEmbedder(dim=128)


def run(emb, *args: str):
    return CliRunner().invoke(main, list(args), obj={"embedder": emb})


def write(path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_rerun_over_unchanged_files_says_already_indexed_not_duplicates(tmp_path, emb):
    for i in range(3):
        write(tmp_path / "docs" / f"d{i}.txt", f"Document number {i} tells of harbour {i}.")
    args = ["index", str(tmp_path / "docs"), "--kb", str(tmp_path / "kb"), "--summaries", "none"]
    assert run(emb, *args).exit_code == 0
    again = run(emb, *args)
    assert again.exit_code == 0
    assert "3 documents (3 already indexed, unchanged) -> 0 new chunks (3 unchanged)" in again.stderr
    assert "duplicate" not in again.stderr


def test_a_chunk_another_document_holds_is_reported_as_a_duplicate(tmp_path, emb):
    write(tmp_path / "a" / "x.md", "# Harbours\n\nThe same words in two files.")
    write(tmp_path / "b" / "y.md", "# Harbours\n\nThe same words in two files.")  # same title and text: one chunk
    run(emb, "index", str(tmp_path / "a"), "--kb", str(tmp_path / "kb"), "--summaries", "none")
    r = run(emb, "index", str(tmp_path / "b"), "--kb", str(tmp_path / "kb"), "--summaries", "none")
    assert "1 documents -> 0 new chunks (1 duplicates of other documents' chunks)" in r.stderr
