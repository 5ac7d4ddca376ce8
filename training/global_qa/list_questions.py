"""List questions about a whole documentation folder, their gold answer a set computed by code
(issue 57, item 1): "Which Node.js API modules document a 'close' event?", gold the modules whose
page has that heading. One generator per corpus (list_corpus_node, list_corpus_npm,
list_corpus_valgrind) reads a folder on this machine and yields candidate questions; `select`
keeps those with a gold set of a useful size, caps each family, and splits the halves by a seed.

A question's line (training/data/global_lists/<corpus>.jsonl) holds everything needed to ask and
score it: id, question, corpus, folder, family, kind (what the items are: module, command,
option, tool), gold items each with its aliases and sources (files relative to folder), and half
(`tune` or `judge`; the judge half is for judging a change only). The corpus's whole vocabulary
of items of each kind goes beside it (<corpus>.vocab.json), so a scorer can tell a wrong but real
item in an answer (list_score)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

MIN_ITEMS = 3
MAX_ITEMS = 20
PER_FAMILY = 14  # at most this many questions of one family, chosen by the seed
SEED = 57
HALVES = ("tune", "judge")


@dataclass(frozen=True)
class Item:
    """One thing an answer may name: its canonical name, the other spellings an answer may use
    (the name itself included), and the files (relative to the folder) that support it."""

    name: str
    aliases: tuple[str, ...]
    sources: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"name": self.name, "aliases": list(self.aliases), "sources": list(self.sources)}


@dataclass(frozen=True)
class ListQuestion:
    id: str
    question: str
    family: str
    kind: str
    gold: tuple[Item, ...]
    half: str = ""

    def to_json(self, corpus: str, folder: str) -> dict:
        return {
            "id": self.id,
            "question": self.question,
            "corpus": corpus,
            "folder": folder,
            "family": self.family,
            "kind": self.kind,
            "gold": [g.to_json() for g in self.gold],
            "half": self.half,
        }


@dataclass
class Corpus:
    """What a generator found in a folder: the vocabulary (every item of each kind, by name) and
    the candidate questions, before selection."""

    name: str
    folder: str
    vocabulary: dict[str, dict[str, Item]] = field(default_factory=dict)
    candidates: list[ListQuestion] = field(default_factory=list)

    def add_vocabulary(self, kind: str, items: Iterable[Item]) -> None:
        self.vocabulary.setdefault(kind, {}).update({i.name: i for i in items})

    def ask(self, qid: str, question: str, family: str, kind: str, members: dict[str, set[str]]) -> None:
        """A candidate question whose gold is `members` (item name -> the files that support it),
        the items' aliases taken from the vocabulary of `kind`."""
        known = self.vocabulary[kind]
        gold = tuple(Item(name, known[name].aliases, tuple(sorted(files))) for name, files in sorted(members.items()))
        self.candidates.append(ListQuestion(qid, question, family, kind, gold))


def sized(questions: Iterable[ListQuestion], lo: int = MIN_ITEMS, hi: int = MAX_ITEMS) -> list[ListQuestion]:
    """Those whose gold set has lo..hi items: an empty set or one item is not a list, a huge one
    is not a question anyone asks this way."""
    return [q for q in questions if lo <= len(q.gold) <= hi]


def cap_families(questions: list[ListQuestion], per_family: int, seed: int) -> list[ListQuestion]:
    """At most `per_family` of each family, chosen by the seed from the id-sorted candidates."""
    out: list[ListQuestion] = []
    for family in sorted({q.family for q in questions}):
        mine = sorted((q for q in questions if q.family == family), key=lambda q: q.id)
        if len(mine) > per_family:
            mine = sorted(random.Random(f"{seed}-{family}").sample(mine, per_family), key=lambda q: q.id)
        out += mine
    return sorted(out, key=lambda q: q.id)


def split_halves(questions: list[ListQuestion], seed: int, corpus: str) -> list[ListQuestion]:
    """Half `tune`, half `judge`: the id-sorted questions shuffled by the seed, the first half
    (rounded up) tune. Returned sorted by id."""
    ids = sorted(q.id for q in questions)
    random.Random(f"{seed}-{corpus}").shuffle(ids)
    tune = set(ids[: (len(ids) + 1) // 2])
    halves = {i: ("tune" if i in tune else "judge") for i in ids}
    return sorted((_with_half(q, halves[q.id]) for q in questions), key=lambda q: q.id)


def _with_half(q: ListQuestion, half: str) -> ListQuestion:
    return ListQuestion(q.id, q.question, q.family, q.kind, q.gold, half)


def select(corpus: Corpus, per_family: int = PER_FAMILY, seed: int = SEED) -> list[ListQuestion]:
    """The benchmark's questions of a corpus: sized, capped per family, split into halves."""
    ids = [q.id for q in corpus.candidates]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ValueError(f"{corpus.name}: duplicate question ids {dupes[:5]}")
    return split_halves(cap_families(sized(corpus.candidates), per_family, seed), seed, corpus.name)


def vocabulary_path(questions_file: str | Path) -> Path:
    p = Path(questions_file)
    return p.with_name(p.name.removesuffix(".jsonl") + ".vocab.json")


def write(corpus: Corpus, questions: list[ListQuestion], out: str | Path) -> Path:
    """The questions as jsonl at `out`, the vocabulary beside it (<name>.vocab.json)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(q.to_json(corpus.name, corpus.folder), ensure_ascii=False) for q in questions]
    out.write_text("".join(line + "\n" for line in lines))
    vocab = {
        "corpus": corpus.name,
        "folder": corpus.folder,
        "kinds": {
            kind: [{"name": i.name, "aliases": list(i.aliases)} for _, i in sorted(items.items())]
            for kind, items in sorted(corpus.vocabulary.items())
        },
    }
    vocabulary_path(out).write_text(json.dumps(vocab, indent=1, ensure_ascii=False) + "\n")
    return out


def load(questions_file: str | Path) -> tuple[list[dict], dict[str, list[Item]]]:
    """A question file and its vocabulary (kind -> items), as list_score wants them."""
    path = Path(questions_file)
    questions = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    raw = json.loads(vocabulary_path(path).read_text())
    vocab = {k: [Item(i["name"], tuple(i["aliases"])) for i in items] for k, items in raw["kinds"].items()}
    return questions, vocab
