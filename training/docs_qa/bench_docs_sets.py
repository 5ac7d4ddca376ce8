"""The question sets of `logicroute bench docs`: questions a newcomer asks about a documentation
folder, those the folder answers (positives, each with the phrases a right answer contains) and
those it does not (negatives: off-topic ones and near misses, an entity the folder names with an
attribute it never states). The sets live in training/data/docs_questions/ (its README says how
they were written); the folders they are about stay outside the repository.

One JSON object a line:

    {"id": "npm-p01", "question": "...", "kind": "positive", "must": ["--no-save"],
     "source": "commands/npm-uninstall.md", "half": "tune"}
    {"id": "npm-n01", "question": "...", "kind": "negative", "negative_kind": "near_miss",
     "source": "commands/npm-audit.md", "half": "judge"}

`must` holds phrases ALL of which a right answer contains; an element that is a list is a group
of spellings of which one is enough (["--save-dev", "-D"]). `half` splits every set in two by a
seeded shuffle within each group (positives, off-topic, near misses; `split_halves`), written
into the file so that the judge half stays fixed while the tune half is looked at.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from engine.floor.base.errors import DataFormatError

KINDS = ("positive", "negative")
NEGATIVE_KINDS = ("off_topic", "near_miss")
GROUPS = ("positive", *NEGATIVE_KINDS)  # what the halves are balanced over, and the report's rows
HALVES = ("tune", "judge")
HALF_CHOICES = (*HALVES, "all")
SPLIT_SEED = 56  # the issue that asked for the sets: the halves of the shipped files

Must = tuple[str | tuple[str, ...], ...]


@dataclass(frozen=True)
class DocsQuestion:
    id: str
    question: str
    kind: str
    half: str
    must: Must = ()
    negative_kind: str | None = None
    source: str = ""

    @property
    def group(self) -> str:
        """positive, off_topic or near_miss."""
        return self.negative_kind if self.kind == "negative" and self.negative_kind else self.kind


def _must(value, where: str) -> Must:
    if not isinstance(value, list) or not value:
        raise DataFormatError(f"{where}: a positive needs `must`, a non-empty list of phrases")
    out: list[str | tuple[str, ...]] = []
    for part in value:
        if isinstance(part, str) and part.strip():
            out.append(part.strip())
        elif isinstance(part, list) and part and all(isinstance(p, str) and p.strip() for p in part):
            out.append(tuple(p.strip() for p in part))
        else:
            raise DataFormatError(f"{where}: each `must` element is a phrase or a non-empty list of phrases")
    return tuple(out)


def parse_question(row: dict, where: str) -> DocsQuestion:
    """One line of a set file, checked: a DataFormatError names the line and what is wrong."""
    if not isinstance(row, dict):
        raise DataFormatError(f"{where}: expected a JSON object")
    for key in ("id", "question", "kind", "half"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise DataFormatError(f"{where}: `{key}` must be a non-empty string")
    kind, half = row["kind"], row["half"]
    if kind not in KINDS:
        raise DataFormatError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    if half not in HALVES:
        raise DataFormatError(f"{where}: half {half!r} is not one of {', '.join(HALVES)}")
    neg = row.get("negative_kind")
    if kind == "negative":
        if neg not in NEGATIVE_KINDS:
            raise DataFormatError(f"{where}: a negative needs negative_kind, one of {', '.join(NEGATIVE_KINDS)}")
        if row.get("must"):
            raise DataFormatError(f"{where}: a negative has no `must` (no answer is right but an abstention)")
        must: Must = ()
    else:
        if neg is not None:
            raise DataFormatError(f"{where}: negative_kind is for negatives only")
        must = _must(row.get("must"), where)
    return DocsQuestion(
        id=row["id"].strip(),
        question=" ".join(row["question"].split()),
        kind=kind,
        half=half,
        must=must,
        negative_kind=neg,
        source=str(row.get("source") or ""),
    )


def read_set(path: str | Path) -> list[DocsQuestion]:
    """Every question of a set file, in file order. A malformed line or a repeated id is an error
    naming the line: a set is a benchmark's ground truth, never read past a fault."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise DataFormatError(f"cannot read the question set {path}: {e}") from None
    out: list[DocsQuestion] = []
    seen: set[str] = set()
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{i}"
        try:
            row = json.loads(line)
        except ValueError:
            raise DataFormatError(f"{where}: malformed JSON") from None
        q = parse_question(row, where)
        if q.id in seen:
            raise DataFormatError(f"{where}: id {q.id!r} occurs twice")
        seen.add(q.id)
        out.append(q)
    if not out:
        raise DataFormatError(f"{path}: no questions")
    return out


def select(questions: Iterable[DocsQuestion], half: str) -> list[DocsQuestion]:
    """The questions of one half ("tune" or "judge"), or all of them."""
    if half not in HALF_CHOICES:
        raise DataFormatError(f"half {half!r} is not one of {', '.join(HALF_CHOICES)}")
    return [q for q in questions if half == "all" or q.half == half]


def group_of(row: dict) -> str:
    """A raw row's group, as DocsQuestion.group gives a parsed one's."""
    if row.get("kind") == "negative" and row.get("negative_kind"):
        return row["negative_kind"]
    return row["kind"]


def split_halves(rows: Sequence[dict], seed: int = SPLIT_SEED) -> dict[str, str]:
    """{id: half}: within each group (positives, off-topic, near misses), the ids in sorted
    order shuffled by a generator seeded with the seed and the group; the first half (the
    larger one for an odd count) is "tune", the rest "judge". The same rows give the same
    halves on every machine, and a group's halves differ in size by one at most."""
    halves: dict[str, str] = {}
    for group in GROUPS:
        ids = sorted(str(r["id"]) for r in rows if group_of(r) == group)
        random.Random(f"{seed}:{group}").shuffle(ids)
        cut = (len(ids) + 1) // 2
        halves.update({i: HALVES[0] if n < cut else HALVES[1] for n, i in enumerate(ids)})
    return halves
