"""Reading QA data files from disk: their text (optionally gzipped), their JSON or JSON-lines
records, and the one corpus that a corpus-format set's questions share (GraphRAG-Bench), cut
into passage texts. Only strings and dicts come out: hierarchy.datasets turns them into
questions and passages.

A corpus file is a JSON array of {corpus_name, context}; each context (one long document) is
cut by hierarchy.chunking into passages of CORPUS_CHUNK_WORDS words at sentence boundaries,
titled with its corpus_name.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from engine.floor.base.errors import DataFormatError, LogicRouteError
from hierarchy.chunking import split_text

# 150 words without overlap: the passage size of the first GraphRAG-Bench measurements,
# and under the KB chunker's 200 words, so the KB keeps every passage whole as one chunk.
CORPUS_CHUNK_WORDS = 150
CORPUS_OVERLAP_WORDS = 0
CORPUS_SUFFIX = "_corpus.json"


def read_text(path: Path) -> str:
    """The whole file as text; a .gz file is decompressed."""
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rt", encoding="utf-8") as f:
                return f.read()
        return path.read_text(encoding="utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise DataFormatError(f"{path}: unreadable ({type(e).__name__}: {e})") from None


def parse_records(path: Path, text: str, prefer_lines: bool) -> list[tuple[str, Any]]:
    """Decode a whole file into (location, record) pairs; every line is decoded, so a bad
    line anywhere refuses the load."""
    if not prefer_lines:
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            # A .json file holding JSON lines is still accepted.
            if e.msg != "Extra data":
                raise DataFormatError(f"{path}:{e.lineno}: malformed JSON ({e.msg})") from None
        else:
            if isinstance(obj, list):
                return [(f"record {i}", r) for i, r in enumerate(obj)]
            return [("1", obj)]
    records = []
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        try:
            records.append((str(i + 1), json.loads(line)))
        except json.JSONDecodeError as e:
            raise DataFormatError(f"{path}:{i + 1}: malformed JSON line ({e.msg})") from None
    return records


def find_corpus(questions: Path, corpus: str | Path | None = None) -> Path:
    """The corpus file of a questions file: `corpus` when given, else the `*_corpus.json`
    beside it (medical_questions_dev.json -> medical_corpus.json first, else the only one)."""
    if corpus is not None:
        if not Path(corpus).is_file():
            raise LogicRouteError(f"{corpus}: no such corpus file")
        return Path(corpus)
    prefix = questions.name.split("_questions")[0]
    same = questions.parent / f"{prefix}{CORPUS_SUFFIX}"
    if same.is_file():
        return same
    found = sorted(questions.parent.glob(f"*{CORPUS_SUFFIX}"))
    if len(found) == 1:
        return found[0]
    which = f"several ({', '.join(p.name for p in found)})" if found else "none"
    raise LogicRouteError(
        f"{questions}: its questions share one corpus file, and {which} lie beside it as *{CORPUS_SUFFIX}: "
        "name it (--corpus FILE)"
    )


def corpus_texts(path: Path) -> list[tuple[str, str]]:
    """(title, passage text) of every passage cut from a corpus file, in corpus order."""
    records = parse_records(path, read_text(path), prefer_lines=path.name.endswith((".jsonl", ".jsonl.gz")))
    out: list[tuple[str, str]] = []
    for loc, r in records:
        if not (isinstance(r, dict) and isinstance(r.get("corpus_name"), str) and isinstance(r.get("context"), str)):
            raise DataFormatError(f"{path}:{loc}: expected a corpus record {{corpus_name, context}} of strings")
        out += [(r["corpus_name"], t) for t in split_text(r["context"], CORPUS_CHUNK_WORDS, CORPUS_OVERLAP_WORDS)]
    if not out:
        raise DataFormatError(f"{path}: the corpus holds no text")
    return out
