"""Bounded conversion (hierarchy.intake_limits, hierarchy.conversion), as specs: a zip bomb is
skipped before any converter runs, with one line naming the limit it broke; a conversion that
runs out of time or memory is skipped and the next file is read; a setting raises a limit. The
bombs are built at test time in a few KB (tests/doc_bombs.py)."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.floor.base.errors import ConfigError
from hierarchy.intake_limits import IntakeLimits, OverLimit, check_text
from hierarchy.sources import load_documents
from tests import doc_bombs, doc_files

GB = 1 << 30


def skipped(folder, caplog, **limits) -> tuple[list[str], dict[str, str]]:
    """The ids read from `folder` under `limits`, and each skip line by the file it names. The
    folder also holds keep.md, so that a run whose files are all skipped still has a document."""
    (folder / "keep.md").write_text("# Keep\n\nThe Varn lighthouse was built in 1871.")
    with caplog.at_level(logging.WARNING, logger="logicroute"):
        ids = [d.id for d in load_documents(folder, IntakeLimits(**limits))]
    lines = {m.split(": skipped, ")[0].rsplit("/", 1)[-1]: m.split(": skipped, ")[1] for m in caplog.messages}
    return ids, lines


def test_a_docx_that_inflates_a_thousand_to_one_is_skipped_by_the_ratio_limit(tmp_path, caplog):
    doc_bombs.zeros_docx(tmp_path / "bomb.docx")
    doc_files.storms_docx(tmp_path / "log.docx")
    ids, lines = skipped(tmp_path, caplog)
    assert ids == ["keep.md", "log.docx"]  # the run goes on
    assert re.fullmatch(
        r"word/document\.xml is compressed 1,0\d\d to 1, over the limit intake\.max_ratio=200", lines["bomb.docx"]
    )


def test_a_docx_whose_entries_declare_a_gigabyte_is_skipped_on_their_word(tmp_path, caplog):
    doc_bombs.state_size(doc_bombs.zeros_docx(tmp_path / "bomb.docx"), GB)
    _, lines = skipped(tmp_path, caplog)
    assert lines == {
        "bomb.docx": "unpacks to 1,024 MB (as its entries declare), over the limit intake.max_inflated_mb=200"
    }


def test_a_header_that_understates_the_size_is_caught_while_inflating(tmp_path, caplog):
    doc_bombs.state_size(doc_bombs.zeros_docx(tmp_path / "bomb.docx"), 1_000)  # says 1 KB, inflates to 20 MB
    _, lines = skipped(tmp_path, caplog, max_inflated_mb=5)
    assert lines == {"bomb.docx": "unpacks to more than 5 MB, over the limit intake.max_inflated_mb=5"}


def test_a_docx_of_many_short_paragraphs_is_held_by_the_paragraph_limit_when_its_ratio_passes(tmp_path, caplog):
    doc_bombs.paragraphs_docx(tmp_path / "bomb.docx", 200_000)
    _, lines = skipped(tmp_path, caplog, max_ratio=1e6)
    assert lines == {"bomb.docx": "holds more than 100,000 paragraphs, over the limit intake.max_paragraphs=100000"}


def test_a_setting_raises_a_limit_and_a_lower_one_holds_a_pptx_too(tmp_path, caplog):
    doc_files.budget_pptx(tmp_path / "budget.pptx")
    ids, lines = skipped(tmp_path, caplog, max_paragraphs=2)
    assert ids == ["keep.md"] and lines["budget.pptx"].startswith("holds more than 2 paragraphs")
    caplog.clear()
    assert skipped(tmp_path, caplog, max_paragraphs=10_000)[0] == ["budget.pptx", "keep.md"]


def test_a_pdf_over_the_page_limit_is_skipped(tmp_path, caplog):
    doc_files.manual_pdf(tmp_path / "manual.pdf", pages=4)
    _, lines = skipped(tmp_path, caplog, max_pages=3)
    assert lines == {"manual.pdf": "a PDF of 4 pages, over the limit intake.max_pages=3"}


def test_a_pdf_whose_page_streams_inflate_past_the_limit_is_skipped(tmp_path, caplog):
    doc_files.report_pdf(tmp_path / "report.pdf")
    _, lines = skipped(tmp_path, caplog, max_inflated_mb=0.0001)  # about 100 bytes
    assert lines == {
        "report.pdf": "its pages' streams unpack to more than 0.0001 MB, over the limit intake.max_inflated_mb=0.0001"
    }


def test_an_html_or_text_file_over_the_text_limit_is_skipped(tmp_path, caplog):
    doc_files.guide_html(tmp_path / "guide.html")
    (tmp_path / "notes.txt").write_text("The Tamsk river is 143 km long. " * 100)
    (tmp_path / "short.txt").write_text("The Olm river freezes.")
    ids, lines = skipped(tmp_path, caplog, max_text_mb=0.0002)  # about 200 bytes
    assert ids == ["keep.md", "short.txt"]
    assert lines["guide.html"] == "an HTML file of 0 MB, over the limit intake.max_text_mb=0.0002"
    assert lines["notes.txt"] == "a file of 0 MB, over the limit intake.max_text_mb=0.0002"


def test_converted_text_over_the_text_limit_is_refused():
    check_text("x" * 1000, IntakeLimits(max_text_mb=0.001))
    with pytest.raises(OverLimit, match=r"MB of text, over the limit intake\.max_text_mb=0\.0001"):
        check_text("x" * 1000, IntakeLimits(max_text_mb=0.0001))


def big_html(path, paragraphs: int):
    path.write_text("<html><body>" + "<p>x</p>" * paragraphs + "</body></html>")


def test_a_conversion_over_the_time_limit_is_skipped_and_the_next_file_is_read(tmp_path, caplog):
    big_html(tmp_path / "a_slow.html", 1_000_000)  # 8 MB: seconds to parse
    doc_files.storms_docx(tmp_path / "b_log.docx")
    ids, lines = skipped(tmp_path, caplog, max_seconds=1)
    assert ids == ["b_log.docx", "keep.md"]
    assert lines == {"a_slow.html": "converting took longer than 1 s, the limit intake.max_seconds"}


@pytest.mark.skipif(sys.platform != "linux", reason="the address-space limit is enforced on Linux")
def test_a_conversion_over_the_memory_limit_is_skipped_and_the_next_file_is_read(tmp_path, caplog):
    big_html(tmp_path / "a_big.html", 500_000)  # 4 MB: a tree of hundreds of MB
    doc_files.storms_docx(tmp_path / "b_log.docx")
    ids, lines = skipped(tmp_path, caplog, max_memory_mb=150)
    assert ids == ["b_log.docx", "keep.md"]
    assert "memory than the limit intake.max_memory_mb=150" in lines["a_big.html"]


@pytest.mark.parametrize(
    "pair", ["intake.max_pages=0", "intake.max_seconds=soon", "intake.max_pagez=3", "max_pages=3", "intake.max_pages"]
)
def test_a_bad_setting_fails_in_one_line(pair):
    with pytest.raises(ConfigError) as e:
        IntakeLimits.from_sets([pair])
    assert "\n" not in str(e.value) and "intake." in str(e.value)


def test_settings_are_read_as_numbers():
    assert IntakeLimits.from_sets(["intake.max_inflated_mb=500", "intake.max_seconds=2.5"]) == IntakeLimits(
        max_inflated_mb=500, max_seconds=2.5
    )


MEASURE = """
import json, resource, sys, time
from hierarchy import conversion
from hierarchy.sources import load_documents
start = time.monotonic()
ids = [d.id for d in load_documents(sys.argv[1])]
seconds = time.monotonic() - start
conversion.stop_worker()
# this process's own peak: VmHWM belongs to its image since exec, where ru_maxrss keeps the peak of
# the process it was forked from (a test run that loaded the models would count them)
try:
    own = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1])
except OSError:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // (1024 if sys.platform == "darwin" else 1)
worker = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // (1024 if sys.platform == "darwin" else 1)
print(json.dumps({"ids": ids, "seconds": seconds, "peak_kb": max(own, worker)}))
"""


def test_the_bombs_are_skipped_in_seconds_and_under_a_gigabyte_of_memory(tmp_path):
    doc_bombs.zeros_docx(tmp_path / "zeros.docx")
    doc_bombs.state_size(doc_bombs.zeros_docx(tmp_path / "declared.docx"), GB)
    doc_bombs.paragraphs_docx(tmp_path / "paragraphs.docx", 1_000_000)
    doc_files.storms_docx(tmp_path / "log.docx")
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(MEASURE), str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["ids"] == ["log.docx"] and got["seconds"] < 30 and got["peak_kb"] < 1024 * 1024, got
    assert run.stderr.count("skipped, ") == 3 and "over the limit intake." in run.stderr


MEASURE_INDEX = """
import json, resource, sys, tempfile, time
sys.path.insert(0, sys.argv[2])
from tests.fakes import HashedBowEmbedder
from hierarchy import conversion
from hierarchy.indexing import index_sources
start = time.monotonic()
try:
    index_sources(tempfile.mkdtemp() + "/kb", [sys.argv[1]], summaries="none", embedder=HashedBowEmbedder(dim=384))
    indexed = True
except Exception as e:  # the only file skipped: no document to index
    indexed = type(e).__name__
conversion.stop_worker()
own = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1])
worker = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"indexed": indexed, "seconds": time.monotonic() - start, "peak_kb": max(own, worker)}))
"""


@pytest.mark.parametrize("suffix", [".html", ".md"])
def test_a_45_mb_flat_file_is_skipped_by_the_text_limit_in_bounded_memory(tmp_path, suffix):
    """Indexing holds about 40 times a file's text (chunks, vectors, lexical index, one commit):
    a 45 MB flat HTML file took a 3 GB process tree and 110 s. The default text limit skips it
    in one line naming the setting that raises it."""
    words = ("keeper lighthouse river harbour signal tide ferry north. " * 16).strip()
    line = f"<p>{{}} {words}</p>" if suffix == ".html" else "{} " + words + "\n"
    body = "\n".join(line.format(i) for i in range(45 * 1024 * 1024 // (len(line) + 6)))  # no two chunks alike
    (tmp_path / f"flat{suffix}").write_text(f"<html><body>{body}</body></html>" if suffix == ".html" else body)
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(MEASURE_INDEX), str(tmp_path), str(root)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert got["indexed"] == "DataFormatError" and got["peak_kb"] < 1024 * 1024 and got["seconds"] < 30, got
    assert "a file of 45 MB, over the limit intake.max_text_mb=10" in run.stderr.replace("an HTML file", "a file")
