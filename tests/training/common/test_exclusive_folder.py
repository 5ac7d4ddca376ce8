"""One process at a time writes a run folder (a benchmark's --out): a second one is refused at
once with the holder's pid, and the folder is free again when the first one ends."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from engine.floor.base.errors import LogicRouteError
from training.common.jsonl_store import exclusive_folder

TRY_FROM_ANOTHER_PROCESS = """
import sys
from engine.floor.base.errors import LogicRouteError
from training.common.jsonl_store import exclusive_folder
try:
    with exclusive_folder(sys.argv[1], "benchmark run"):
        print("got it")
except LogicRouteError as e:
    print(e)
"""


def _other_process(folder) -> str:
    out = subprocess.run(
        [sys.executable, "-c", TRY_FROM_ANOTHER_PROCESS, str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=os.getcwd(),
    )
    return out.stdout.strip()


def test_a_second_process_is_refused_while_the_first_holds_the_folder(tmp_path):
    with exclusive_folder(tmp_path / "run", "benchmark run"):
        said = _other_process(tmp_path / "run")
    assert "in use by another benchmark run" in said and f"pid {os.getpid()}" in said
    assert _other_process(tmp_path / "run") == "got it"


def test_the_same_process_cannot_enter_twice_either(tmp_path):
    with exclusive_folder(tmp_path, "benchmark run"):
        second = exclusive_folder(tmp_path, "benchmark run")
        with pytest.raises(LogicRouteError, match="in use"):
            second.__enter__()
