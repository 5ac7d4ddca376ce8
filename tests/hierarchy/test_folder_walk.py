"""The folder walk stays inside what the user named (hierarchy.folder_walk): a link, to a file or
a folder, that leads outside the folder is skipped and named in one line; links inside it are
read once, with no loop; named pipes are never opened, in a folder or named alone."""

from __future__ import annotations

import logging
import os
import threading
import time

import pytest

from engine.floor.base.errors import DataFormatError
from hierarchy.sources import load_documents

SECRET = "root:x:0:0:the secret line"


@pytest.fixture
def docs(tmp_path):
    """A folder of one Markdown file, and a file and a folder outside it."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Lighthouse\n\nThe Varn lighthouse was built in 1871.")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "passwd").write_text(SECRET)
    return tmp_path / "docs"


def read(folder, caplog, level=logging.WARNING):
    with caplog.at_level(level, logger="logicroute"):
        return load_documents(folder)


def test_a_link_to_a_file_outside_the_folder_is_skipped_and_named(docs, caplog):
    (docs / "notes.txt").symlink_to(docs.parent / "outside" / "passwd")
    got = read(docs, caplog)
    assert [d.id for d in got] == ["a.md"] and not any(SECRET in d.text for d in got)
    target = (docs.parent / "outside" / "passwd").resolve()
    assert caplog.messages == [f"{docs}: skipped 1 link that leads outside the folder: notes.txt -> {target}"]


def test_a_link_to_a_folder_outside_the_folder_is_skipped_and_named(docs, caplog):
    (docs / "shared").symlink_to(docs.parent / "outside", target_is_directory=True)
    got = read(docs, caplog)
    assert [d.id for d in got] == ["a.md"]
    assert caplog.messages == [
        f"{docs}: skipped 1 link that leads outside the folder: shared -> {(docs.parent / 'outside').resolve()}"
    ]


def test_a_relative_link_that_climbs_out_of_the_folder_is_skipped(docs, caplog):
    (docs / "sub").mkdir()
    (docs / "sub" / "up.txt").symlink_to(os.path.join("..", "..", "outside", "passwd"))
    assert [d.id for d in read(docs, caplog)] == ["a.md"]
    assert "sub/up.txt -> " in caplog.text and "outside the folder" in caplog.text


def test_the_line_names_five_links_and_v_lists_every_one(docs, caplog):
    for i in range(7):
        (docs / f"l{i}.txt").symlink_to(docs.parent / "outside" / "passwd")
    read(docs, caplog, logging.DEBUG)
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert line.startswith(f"{docs}: skipped 7 links that lead outside the folder: l0.txt -> ")
    assert "l4.txt" in line and "l5.txt" not in line and line.endswith(" and 2 more (-v lists them)")
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG and "outside" in r.getMessage()]
    assert [m.split("skipped ")[1].split(" ->")[0] for m in debug] == [f"l{i}.txt" for i in range(7)]


def test_links_inside_the_folder_are_read_once_under_the_files_own_path(docs, caplog):
    (docs / "sub").mkdir()
    (docs / "sub" / "b.txt").write_text("The Tamsk river is 143 km long.")
    (docs / "alias.md").symlink_to(docs / "a.md")  # the same file twice
    (docs / "again").symlink_to(docs / "sub", target_is_directory=True)  # the same folder twice
    got = read(docs, caplog)
    assert [d.id for d in got] == ["a.md", "sub/b.txt"] and caplog.messages == []


def test_a_folder_link_to_an_ancestor_does_not_loop(docs, caplog):
    (docs / "sub").mkdir()
    (docs / "sub" / "b.txt").write_text("The Tamsk river is 143 km long.")
    (docs / "sub" / "loop").symlink_to(docs, target_is_directory=True)
    (docs / "sub" / "self").symlink_to(docs / "sub", target_is_directory=True)
    assert [d.id for d in read(docs, caplog)] == ["a.md", "sub/b.txt"] and caplog.messages == []


def test_a_link_to_a_hidden_file_inside_the_folder_is_read_under_the_links_name(docs, caplog):
    (docs / ".drafts").mkdir()
    (docs / ".drafts" / "plan.md").write_text("# Plan\n\nRepaint the tower in 1903.")
    (docs / "plan.md").symlink_to(docs / ".drafts" / "plan.md")
    got = read(docs, caplog)
    assert [d.id for d in got] == ["a.md", "plan.md"]
    assert got[1].meta["source"] == str((docs / ".drafts" / "plan.md").resolve())


def test_a_link_that_leads_nowhere_is_named(docs, caplog):
    (docs / "gone.md").symlink_to(docs / "missing.md")
    assert [d.id for d in read(docs, caplog)] == ["a.md"]
    assert caplog.messages == [f"{docs}: skipped 1 link that leads nowhere: gone.md"]


class PipeWriter:
    """Writes SECRET into a named pipe as soon as anything opens it for reading, so that a walk
    that opens the pipe reads the secret (and the test fails) instead of hanging."""

    def __init__(self, fifo):
        self.fifo, self.done = fifo, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.done.is_set():
            try:
                fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # no reader yet
                time.sleep(0.02)
                continue
            os.write(fd, SECRET.encode())
            os.close(fd)
            return

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this system")
def test_a_named_pipe_in_a_folder_is_skipped_with_a_note_and_never_opened(docs, caplog):
    os.mkfifo(docs / "feed.txt")
    with PipeWriter(docs / "feed.txt"):
        got = read(docs, caplog)
    assert [d.id for d in got] == ["a.md"]
    assert caplog.messages == [f"{docs}: skipped 1 entry that is not a file (never opened): feed.txt (a named pipe)"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this system")
def test_a_named_pipe_named_as_the_source_is_refused_and_never_opened(tmp_path):
    os.mkfifo(tmp_path / "feed.txt")
    with (
        PipeWriter(tmp_path / "feed.txt"),
        pytest.raises(DataFormatError, match=r"feed\.txt: a named pipe, not a file"),
    ):
        load_documents(tmp_path / "feed.txt")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_a_link_to_a_device_inside_a_folder_is_not_read(docs, caplog):
    (docs / "zeros.txt").symlink_to("/dev/zero")  # leads outside the folder: named as such, never opened
    assert [d.id for d in read(docs, caplog)] == ["a.md"]
    assert "zeros.txt -> /dev/zero" in caplog.text
