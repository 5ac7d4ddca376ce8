"""Benchmark of the summary layers and the summary route (`logicroute bench summary`).

Parts (each writes its own file under out_dir and is skipped when that file exists, unless
force=True; the QA part resumes per question from its JSONL files):

build        Extractive layers built over HotpotQA dev500's passages, an incremental add of 1%
             of them, a full rebuild, with cold and warm embedding caches; LLM tokens are 0 by
             construction (training.bench.bench_summary_build).
qa           Summary route vs chunk route with the local LLM on HotpotQA and NQ-open questions,
             on a full and a small corpus, with extractive and LLM-written layers
             (training.bench.bench_summary_qa).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from engine.floor.llm.base import DEFAULT_LLM
from training.bench.bench_summary_build import bench_build, build_table
from training.bench.bench_summary_qa import bench_qa, qa_table
from training.common.shared_data import shared_data_dir


def main(
    out_dir: str | Path = "runs/bench_summary",
    *,
    parts: Iterable[str] = ("build", "qa"),
    n_hotpot: int = 30,
    build_modes: Iterable[str] = ("cold", "warm"),
    n_nq: int = 30,
    llm: str = DEFAULT_LLM,
    corpora: Iterable[str] = ("full", "small"),
    llm_summaries: bool = True,
    k: int = 3,
    data_dir: str | Path | None = None,
    force: bool = False,
    show_progress: bool = True,
) -> dict:
    """Run the selected parts; returns {"build": ..., "qa": ...} and writes
    out_dir/build.json, out_dir/qa.json, out_dir/report.md."""
    parts = tuple(parts)
    unknown = set(parts) - {"build", "qa"}
    if unknown:
        raise ValueError(f"unknown parts {sorted(unknown)}: choose from build, qa")
    if set(build_modes) - {"cold", "warm"}:
        raise ValueError(f"unknown build modes {sorted(set(build_modes))}: choose from cold, warm")
    corpora = tuple(corpora)
    if set(corpora) - {"full", "small"}:
        raise ValueError(f"unknown corpora {corpora}: choose from full, small")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = Path(data_dir) if data_dir else shared_data_dir()
    result: dict = {}
    report: list[str] = ["# Summary layers benchmark", ""]
    # a part not run this time (or build.json without --force) keeps its earlier result in the report
    f, q = out / "build.json", out / "qa.json"
    if "build" in parts and (force or not f.is_file()):
        result["build"] = bench_build(out, data, show_progress, modes=tuple(build_modes))
        f.write_text(json.dumps(result["build"], indent=2) + "\n")
    elif f.is_file():
        result["build"] = json.loads(f.read_text())
    if "qa" in parts:
        result["qa"] = bench_qa(
            out,
            data,
            n_hotpot=n_hotpot,
            n_nq=n_nq,
            llm_spec=llm,
            corpora=corpora,
            llm_summaries=llm_summaries,
            k=k,
            show_progress=show_progress,
        )
        q.write_text(json.dumps(result["qa"], indent=2) + "\n")
    elif q.is_file():
        result["qa"] = json.loads(q.read_text())
    if "build" in result:
        report += ["## Build cost", "", build_table(result["build"]), ""]
    if "qa" in result:
        report += ["## Summary route vs chunk route", "", qa_table(result["qa"]), ""]
    (out / "report.md").write_text("\n".join(report) + "\n")
    print("\n".join(report))
    return result
