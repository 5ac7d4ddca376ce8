"""Chunking: short documents stay whole, long ones split at sentences with overlap, ids are
stable content hashes, identical chunks dedupe."""

from __future__ import annotations

import re

import pytest

from engine.floor.base.errors import LogicRouteError
from hierarchy.chunking import chunk_document, chunk_embed_text, chunk_id, split_text
from hierarchy.documents import Chunk, Document


def _long_text(n_sent: int = 40, para_every: int = 10) -> str:
    paras, cur = [], []
    for i in range(n_sent):
        cur.append(" ".join(f"s{i}w{j}" for j in range(5 + i % 9)) + ".")
        if (i + 1) % para_every == 0:
            paras.append(" ".join(cur))
            cur = []
    if cur:
        paras.append(" ".join(cur))
    return "\n\n".join(paras)


def test_short_document_stays_whole():
    doc = Document("d1", "Paris", "  Paris is the capital of France. It is big.  ")
    cs = chunk_document(doc, chunk_words=20, overlap_words=5)
    assert len(cs) == 1
    assert cs[0].text == "Paris is the capital of France. It is big."
    assert (cs[0].doc_id, cs[0].title, cs[0].position) == ("d1", "Paris", 0)


def test_exactly_chunk_words_stays_whole():
    text = " ".join(f"w{i}" for i in range(50))
    assert split_text(text, 50, 10) == [text]


def test_blank_document_has_no_chunks():
    assert chunk_document(Document("d", "t", "  \n ")) == []


def test_long_document_splits_at_sentences_with_overlap():
    text = _long_text()
    total = len(text.split())
    chunks = split_text(text, chunk_words=60, overlap_words=15)
    assert len(chunks) > 2
    for c in chunks:
        n = len(c.split())
        assert n <= 60
        assert c.rstrip().endswith(".")  # cut at a sentence end
    # consecutive chunks share words (the overlap) and every word is covered, in order
    for a, b in zip(chunks, chunks[1:]):
        shared = set(a.split()) & set(b.split())
        assert 0 < len(shared) <= 15
    seen = []
    for c in chunks:
        for w in c.split():
            if not seen or w not in seen:
                seen.append(w)
    assert seen == text.split()
    assert sum(len(c.split()) for c in chunks) < total * 1.5


def test_paragraph_boundary_kept_inside_chunk():
    text = _long_text(n_sent=12, para_every=3)
    chunks = split_text(text, chunk_words=40, overlap_words=5)
    assert any("\n\n" in c for c in chunks)


def test_overlong_sentence_is_cut_with_overlap():
    words = [f"x{i}" for i in range(100)]
    chunks = split_text(" ".join(words), chunk_words=30, overlap_words=10)
    assert all(len(c.split()) <= 30 for c in chunks)
    assert chunks[-1].split()[-1] == "x99"
    for a, b in zip(chunks, chunks[1:]):
        assert a.split()[-1] in b.split()  # overlap carried


def test_zero_overlap():
    chunks = split_text(_long_text(), chunk_words=50, overlap_words=0)
    flat = " ".join(chunks).split()
    assert flat == _long_text().split()


def test_ids_are_stable_content_hashes():
    doc = Document("d1", "Title", _long_text())
    a = chunk_document(doc, 60, 15)
    b = chunk_document(Document("other-id", "Title", _long_text()), 60, 15)
    assert [c.id for c in a] == [c.id for c in b]  # id depends on title + text only
    assert all(re.fullmatch(r"[0-9a-f]{16}", c.id) for c in a)
    assert [c.position for c in a] == list(range(len(a)))
    assert a[0].id == chunk_id("Title", a[0].text)
    assert chunk_id("Other", a[0].text) != a[0].id  # title is part of the id
    # Persisted in every KB: the id of a given chunk never changes.
    assert chunk_id("Paris", "Paris is the capital.") == "9bdf391fed11d947"


def test_bad_params():
    with pytest.raises(LogicRouteError):
        split_text("x y", chunk_words=10, overlap_words=10)
    with pytest.raises(LogicRouteError):
        split_text("x y", chunk_words=0, overlap_words=0)


def test_embed_text_puts_title_in_front_once():
    c = Chunk("i", "d", "Paris", "The capital of France.", 0)
    assert chunk_embed_text(c) == "Paris\nThe capital of France."
    c2 = Chunk("i", "d", "Paris", "Paris is the capital.", 0)
    assert chunk_embed_text(c2) == "Paris is the capital."
    assert chunk_embed_text(Chunk("i", "d", "", "x", 0)) == "x"
