"""What the question writer writes from, found by plain code (no LLM): the chunks of a single-hop
question, the chunk pairs of a bridge (chunk A names the subject of chunk B) or a comparison
(two chunks of the same kind), and the summary nodes of an overview. Each kind is a lazy
iterator in a seeded order, so a run reads only as far as it writes and a rerun walks the same
order (training.adapt.adapt_questions)."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass

MIN_WORDS = 12  # a chunk shorter than this rarely states a fact worth a question
MAX_TITLE_WORDS = 6  # longer titles are headings, not entity names another chunk would mention
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_PAREN = re.compile(r"\s*\([^)]*\)\s*$")
_WORD = re.compile(r"[\w'’-]+")
STOP_WORDS = "the a an of in on at to for and or by with from is was are were it its this that as be"
_STOP = frozenset(f"{STOP_WORDS} introduction overview summary contents index notes".split())


@dataclass(frozen=True)
class Candidate:
    kind: str
    chunks: tuple  # hierarchy.documents.Chunk, in the order the prompt shows them
    entity: str = ""  # bridge: the name chunk A mentions and chunk B is about
    node: str = ""  # overview: the summary node id
    summary: str = ""  # overview: the node's summary text
    extra_chunk_ids: tuple[str, ...] = ()  # overview: every chunk under the node

    @property
    def chunk_ids(self) -> tuple[str, ...]:
        return self.extra_chunk_ids or tuple(c.id for c in self.chunks)

    @property
    def titles(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.title for c in self.chunks))


def kb_chunks(kb) -> list:
    """The KB's chunks in its own order."""
    return [kb.chunks[cid] for cid in kb.chunk_ids]


def _long_enough(c) -> bool:
    return len(c.text.split()) >= MIN_WORDS


def entity_name(title: str) -> str:
    """How other chunks name a title's subject: "Kesh (village)" -> "Kesh"."""
    return _PAREN.sub("", title).strip()


def _usable_name(name: str) -> bool:
    """A title other chunks can be said to name: a proper name ("Kesh") or an identifier
    ("path.relative"), not a common word a documentation file is titled by ("path", "events")."""
    words = name.split()
    marked = any(ch.isupper() or ch.isdigit() or ch in "._" for ch in name)
    return 0 < len(words) <= MAX_TITLE_WORDS and len(name) >= 3 and name.lower() not in _STOP and marked


def single_candidates(chunks: list, rng: random.Random) -> Iterator[Candidate]:
    pool = [c for c in chunks if _long_enough(c)]
    rng.shuffle(pool)
    for c in pool:
        yield Candidate("single", (c,))


def title_index(chunks: list) -> dict[str, list]:
    """Entity name (as written) -> the first chunk of each document with that title."""
    index: dict[str, list] = {}
    seen_docs: set[str] = set()
    for c in sorted(chunks, key=lambda c: (c.doc_id, c.position)):
        if c.doc_id in seen_docs:
            continue
        seen_docs.add(c.doc_id)
        name = entity_name(c.title)
        if _usable_name(name) and _long_enough(c):
            index.setdefault(name, []).append(c)
    return index


def mentions(text: str, index: dict[str, list]) -> list[str]:
    """The index's names that occur in `text` as whole words, case as written, longest first
    where two overlap; each once, in order of first occurrence."""
    words = _WORD.findall(text)
    found: list[str] = []
    i = 0
    while i < len(words):
        for n in range(min(MAX_TITLE_WORDS, len(words) - i), 0, -1):
            name = " ".join(words[i : i + n])
            if name in index:
                if name not in found:
                    found.append(name)
                i += n
                break
        else:
            i += 1
    return found


def bridge_pairs(chunks: list) -> list[Candidate]:
    """Every (A, B) where chunk A mentions the name of chunk B's title and B is another
    document's: the link of a two-hop question, found in code."""
    index = title_index(chunks)
    pairs: list[Candidate] = []
    for a in chunks:
        if not _long_enough(a):
            continue
        own = entity_name(a.title)
        for name in mentions(a.text, index):
            if name == own:
                continue
            for b in index[name]:
                if b.doc_id != a.doc_id:
                    pairs.append(Candidate("bridge", (a, b), entity=name))
    return pairs


def bridge_candidates(chunks: list, rng: random.Random) -> Iterator[Candidate]:
    pairs = bridge_pairs(chunks)
    rng.shuffle(pairs)
    yield from pairs


def _same_kind(a, b) -> bool:
    """Two chunks worth comparing: other subjects, both long enough, both stating a year (the
    attribute a small model compares most reliably: born, founded, released)."""
    return (
        a.doc_id != b.doc_id
        and entity_name(a.title) != entity_name(b.title)
        and _long_enough(b)
        and bool(_YEAR.search(a.text))
        and bool(_YEAR.search(b.text))
    )


def comparison_candidates(kb, chunks: list, rng: random.Random, k: int = 5) -> Iterator[Candidate]:
    """For each chunk stating a year (seeded order), its nearest neighbour by the KB's own
    retrieval that is another subject stating a year: neighbours share a kind (two people, two
    films) far more often than random pairs. A pair comes once, whichever chunk found it."""
    pool = [c for c in chunks if _long_enough(c) and _YEAR.search(c.text)]
    rng.shuffle(pool)
    seen: set[frozenset] = set()
    for a in pool:
        for hit in kb.search(f"{a.title}: {a.text}", k=k):
            b = kb.chunks.get(hit.chunk_id)
            if b is None or not _same_kind(a, b):
                continue
            key = frozenset((a.id, b.id))
            if key not in seen:
                seen.add(key)
                yield Candidate("comparison", (a, b))
            break


def overview_candidates(kb, rng: random.Random) -> tuple[Iterator[Candidate], str]:
    """Level-1 summary nodes over at least two chunks and "", or no candidates and the reason."""
    from hierarchy.layers.persist import load_layers

    try:
        layers = load_layers(kb)
    except (OSError, TypeError, AttributeError):  # a KB with no folder (in memory) has no layers
        layers = None
    if layers is None or not layers.levels:
        return iter(()), "the KB has no summary layers (`logicroute index --summaries extractive` builds them)"
    nodes = [nid for nid in layers.levels[0] if len(layers.chunks_under(nid)) >= 2]
    if not nodes:
        return iter(()), "no summary node covers two chunks"
    rng.shuffle(nodes)

    def gen() -> Iterator[Candidate]:
        for nid in nodes:
            under = tuple(cid for cid in layers.chunks_under(nid) if cid in kb.chunks)
            if len(under) < 2:
                continue
            chunks = tuple(kb.chunks[cid] for cid in under)
            yield Candidate("overview", chunks, node=nid, summary=layers.nodes[nid].text, extra_chunk_ids=under)

    return gen(), ""
