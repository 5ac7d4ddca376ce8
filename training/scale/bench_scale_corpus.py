"""The corpus of `logicroute bench scale` (training.scale.bench_scale): real text only, one of

- `shared` (the default): the distinct passages of the shared data sets (hierarchy.datasets, via
  training.scale.bench_commits.distinct_passages): 17,613 distinct chunks;
- `debian-docs`: the manuals of seven Debian documentation packages, fetched once by
  training.scale.corpus_fetch (`make corpus`) into a cache folder as Markdown: 100k+ distinct chunks;
- any other folder of .md/.txt files, read by the KB's own reader
  (hierarchy.sources.load_documents), as `logicroute index FOLDER` reads it.

The documents are shuffled once with a fixed seed so every size mixes every set or package, and
chunked as the KB chunks them. Each size takes the first documents whose distinct chunks reach
it; the documents after them are the 1% add. A size past the corpus is cut to what it holds,
minus the 1% kept back for the add, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.floor.base.errors import LogicRouteError

SCALE_SETS = ("hotpotqa", "2wiki", "musique", "nq", "squad", "medical")
ADD_SHARE = 0.01  # the add and the delete: 1% of the documents
SHARED = "shared"
DEBIAN_DOCS = "debian-docs"
PACKAGE_KEYS = ("name", "version", "deb", "deb_sha256")  # what the report keeps of a fetched package


@dataclass
class ScaleCorpus:
    """Documents in benchmark order and the distinct chunks each adds (the KB dedupes chunks by
    content, so a document repeating a chunk seen before adds fewer)."""

    sets: tuple[str, ...]  # the shared data sets, or the folder's parts (its top-level folders)
    docs: list = field(default_factory=list)  # hierarchy.documents.Document
    adds: list[int] = field(default_factory=list)  # new distinct chunks per document
    texts: list[str] = field(default_factory=list)  # the embedded text of every distinct chunk, in order
    name: str = SHARED
    path: str = ""  # the folder of a folder corpus
    packages: list[dict] = field(default_factory=list)  # a fetched corpus' manifest: name, version...
    parts: dict[str, dict] = field(default_factory=dict)  # per set or part: documents, chunks

    @property
    def about(self) -> str:
        """What the corpus is, in words: the data sets, or the packages and their versions."""
        if self.name == SHARED:
            return f"the shared data sets ({', '.join(self.sets)})"
        pkgs = ", ".join(f"{p['name']} {p['version']}" for p in self.packages)
        return f"{self.name} ({pkgs or 'a folder'}; {self.path})"

    def describe(self) -> dict:
        """The report's record of the corpus."""
        return {
            "name": self.name,
            "about": self.about,
            "path": self.path,
            "sets": list(self.sets),
            "packages": self.packages,
            "parts": self.parts,
            "documents": len(self.docs),
            "distinct_chunks": self.chunks,
            "max_kb_chunks": self.max_kb,
        }

    @property
    def chunks(self) -> int:
        return len(self.texts)

    @property
    def max_kb(self) -> int:
        """The largest KB that leaves 1% of the corpus for the add."""
        return int(self.chunks / (1 + ADD_SHARE))

    def take(self, n: int) -> tuple[list, list]:
        """(the first documents whose chunks reach n, the documents after them whose chunks reach
        1% of n: the add)."""
        cum = np.cumsum(self.adds)
        end = int(np.searchsorted(cum, n)) + 1  # cum[end - 1] is the first running total >= n
        rest = cum[end:] - cum[end - 1]
        stop = end + int(np.searchsorted(rest, max(1.0, n * ADD_SHARE))) + 1
        return self.docs[:end], self.docs[end:stop]

    def chunks_for(self, n: int) -> int:
        """Distinct chunks of the documents take(n) returns: the part of the corpus a size embeds."""
        docs, extra = self.take(n)
        return int(sum(self.adds[: len(docs) + len(extra)]))


def scale_corpus(sets: tuple[str, ...] = SCALE_SETS, seed: int = 0) -> ScaleCorpus:
    """The shared data sets' distinct passages, shuffled with `seed`, and their distinct chunks."""
    from training.common.shared_data import SHARED_FILES
    from training.scale.bench_commits import distinct_passages

    unique: dict[str, tuple] = {}  # in file order, each passage once, counted for the first set that has it
    for s in sets:
        for d in distinct_passages([SHARED_FILES[s]]):
            unique.setdefault(d.id, (s, d))
    return _chunked(ScaleCorpus(sets=tuple(sets)), list(unique.values()), seed)


def corpus_folder(name: str) -> Path | None:
    """The folder of corpus `name`: None for the shared data sets."""
    if name == SHARED:
        return None
    if name == DEBIAN_DOCS:
        from training.scale.corpus_fetch import default_dir

        return default_dir()
    return Path(name).expanduser()


def check_corpus(name: str) -> None:
    """One clear error line when corpus `name` is a folder that is not there."""
    folder = corpus_folder(name)
    if folder is None or folder.is_dir():
        return
    from training.scale.corpus_fetch import fetch_hint

    if name == DEBIAN_DOCS:
        raise LogicRouteError(f"--corpus {DEBIAN_DOCS}: no corpus folder at {folder}: {fetch_hint()}")
    raise LogicRouteError(
        f"--corpus {name}: no such folder ({SHARED}, {DEBIAN_DOCS} or a folder of .md/.txt files; "
        f"for {DEBIAN_DOCS}, {fetch_hint()})"
    )


def folder_corpus(folder: str | Path, seed: int = 0, name: str = "") -> ScaleCorpus:
    """The documents of a folder, read by the KB's own reader, shuffled with `seed`, and their
    distinct chunks; a fetched corpus' manifest (training.scale.corpus_fetch) names its packages."""
    from hierarchy.sources import load_documents
    from training.scale.corpus_fetch import read_manifest

    folder = Path(folder).expanduser()
    check_corpus(str(folder))
    docs = load_documents(folder)  # ids: paths relative to the folder
    docs = [(d.id.split("/", 1)[0] if "/" in d.id else ".", d) for d in docs]
    manifest = read_manifest(folder) or {}
    corpus = ScaleCorpus(
        sets=tuple(dict.fromkeys(part for part, _ in docs)),
        name=name or folder.name,
        path=str(folder),
        packages=[
            {k: p.get(k) for k in ("name", "version", "deb", "deb_sha256")} for p in manifest.get("packages", [])
        ],
    )
    return _chunked(corpus, docs, seed)


def load_corpus(name: str = SHARED, sets: tuple[str, ...] = SCALE_SETS, seed: int = 0) -> ScaleCorpus:
    """Corpus `name`: shared, debian-docs, or a folder."""
    if name == SHARED:
        return scale_corpus(sets, seed)
    check_corpus(name)
    return folder_corpus(corpus_folder(name), seed, name=name if name == DEBIAN_DOCS else "")


def _chunked(corpus: ScaleCorpus, docs: list[tuple[str, object]], seed: int) -> ScaleCorpus:
    """(part, document) pairs shuffled with `seed`, chunked as the KB chunks them, into `corpus`."""
    from hierarchy.chunking import chunk_document, chunk_embed_text

    seen: set[str] = set()
    corpus.parts = {part: {"documents": 0, "chunks": 0} for part in corpus.sets}
    for i in np.random.default_rng(seed).permutation(len(docs)):
        part, doc = docs[i]
        new = [c for c in chunk_document(doc) if c.id not in seen]
        seen.update(c.id for c in new)
        corpus.docs.append(doc)
        corpus.adds.append(len(new))
        corpus.texts += [chunk_embed_text(c) for c in new]
        corpus.parts[part]["documents"] += 1
        corpus.parts[part]["chunks"] += len(new)
    return corpus


def corpus_lines(corpus: ScaleCorpus) -> list[str]:
    """The corpus in a few lines: what it is, its documents and distinct chunks, per part."""
    versions = {p["name"]: p["version"] for p in corpus.packages}
    lines = [
        f"corpus: {corpus.about}: {len(corpus.docs):,} documents, {corpus.chunks:,} distinct chunks; "
        f"the largest KB that leaves 1% for the add holds {corpus.max_kb:,}"
    ]
    for part, n in corpus.parts.items():
        name = f"{part} {versions[part]}" if part in versions else part
        lines.append(f"  {name}: {n['documents']:,} documents, {n['chunks']:,} distinct chunks")
    return lines


def plan_sizes(sizes: tuple[int, ...], corpus: ScaleCorpus) -> tuple[list[tuple[int, int]], list[str]]:
    """(requested, measured) chunk counts, each cut to the corpus, without repeats; and notes."""
    plan: list[tuple[int, int]] = []
    notes = []
    for asked in sizes:
        n = min(asked, corpus.max_kb)
        if n < asked:
            more = (
                f"; {DEBIAN_DOCS} holds 100k+ (`make corpus`, then --corpus {DEBIAN_DOCS})"
                if corpus.name == SHARED
                else ""
            )
            notes.append(
                f"{asked:,} chunks asked: {corpus.about} hold {corpus.chunks:,} distinct real chunks, so the largest "
                f"KB has {n:,} (1% kept back for the add){more}"
            )
        if n not in [m for _, m in plan]:
            plan.append((asked, n))
    return plan, notes
