"""Documents and chunks of installed documentation sites, every page read (intake.keep_aggregates)
and each page once (the default), with the pages the default skips and why. Chunks as `index`
cuts them (hierarchy.chunking, default sizes); no embedder is loaded.

    PYTHONPATH=. python docs/results/docs_sites/measure.py FOLDER... > results.json
"""

from __future__ import annotations

import json
import logging
import sys
import time

from hierarchy.chunking import chunk_document
from hierarchy.intake_limits import IntakeLimits
from hierarchy.sources import load_documents


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def measure(folder: str) -> dict:
    row: dict = {"folder": folder}
    logger = logging.getLogger("logicroute")
    logger.setLevel(logging.DEBUG)
    for name, limits in (("all", IntakeLimits(keep_aggregates=True)), ("once", IntakeLimits())):
        lines = Lines()
        logger.addHandler(lines)
        start = time.perf_counter()
        docs = load_documents(folder, limits)
        seconds = time.perf_counter() - start
        logger.removeHandler(lines)
        chunks = {d.id: len(chunk_document(d)) for d in docs}
        ends = (": aggregate page", ": duplicate page")
        skipped = [line.split(": skipped ", 1)[1] for line in lines.lines if line.endswith(ends)]
        row[name] = {
            "docs": len(docs),
            "chunks": sum(chunks.values()),
            "seconds": round(seconds, 1),
            "per_doc": chunks,
            "skipped": skipped,
        }
    return row


if __name__ == "__main__":
    rows = []
    for folder in sys.argv[1:]:
        rows.append(measure(folder))
        print(folder, rows[-1]["all"]["chunks"], "->", rows[-1]["once"]["chunks"], file=sys.stderr, flush=True)
    json.dump(rows, sys.stdout, indent=1)
