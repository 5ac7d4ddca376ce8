"""The index benchmark embeds exactly the chunks a KB would hold: one per distinct title + text."""

from hierarchy.documents import Document
from training.bench.bench_index import chunk_documents


def test_identical_chunks_dedupe_across_documents():
    d1 = Document("a", "T", "Same text here.")
    d2 = Document("b", "T", "Same text here.")
    d3 = Document("c", "T2", "Same text here.")
    cs = chunk_documents([d1, d2, d3])
    assert [c.doc_id for c in cs] == ["a", "c"]
