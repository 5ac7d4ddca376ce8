"""The shared benchmark sets by name: where each file lives under shared/data (its README), and
a set's name or a file path resolved to a file. The readers of their formats are the product's
(hierarchy.datasets), since `index` and `ask --questions` read such files too."""

from __future__ import annotations

import os
from pathlib import Path

from engine.floor.base.errors import LogicRouteError

# Where the benchmark files live under shared/data (see its README).
SHARED_FILES: dict[str, str] = {
    "hotpotqa": "hotpotqa/hotpotqa_dev500.jsonl",
    "2wiki": "2wikimultihopqa/2wiki_train500.json",
    "musique": "musique/musique_200.jsonl",
    "nq": "nq/nq_open_oracle_2655.jsonl.gz",
    "squad": "squad/squad_v1.1_dev.json",
    "medical": "graphrag_bench/medical_questions_dev.json",
}


def shared_data_dir() -> Path:
    """$LOGICROUTE_DATA_DIR, else shared/data beside the repository (its parent's shared/data)."""
    env = os.environ.get("LOGICROUTE_DATA_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "data"


def resolve_data(arg: str | Path) -> str:
    """A data file path, or a shared data set name (hotpotqa, 2wiki, musique, nq, squad, medical)."""
    if Path(arg).exists():
        return str(arg)
    if arg in SHARED_FILES:
        p = shared_data_dir() / SHARED_FILES[str(arg)]
        if p.is_file():
            return str(p)
        raise LogicRouteError(f"data set {arg!r}: {p} not found (set LOGICROUTE_DATA_DIR)")
    raise LogicRouteError(f"{arg}: no such data file (or a name: {', '.join(SHARED_FILES)})")
