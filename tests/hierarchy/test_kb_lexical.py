"""Lexical (BM25) retrieval beside the dense one: the postings follow every add, delete,
compaction and repair of the KB's segments; hybrid search fuses the two rankings; a KB written
before lexical retrieval still opens and answers, dense, and gains the index on its next write.
Fake embedder: no model loads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine.floor.base.errors import KBError
from hierarchy import kb_segments, store
from hierarchy.documents import Document
from hierarchy.indexing import index_sources
from hierarchy.kb import MANIFEST, KnowledgeBase
from hierarchy.kb_check import check_kb
from hierarchy.kb_repair import repair_kb
from hierarchy.lexical import ANALYSIS, LexicalIndex, Postings, lexical_text, tokens
from hierarchy.retrieval import RetrievalConfig, convex, fuse
from tests.fakes import HashedBowEmbedder
from tests.samples import make_docs

DIM = 128


def _emb() -> HashedBowEmbedder:
    return HashedBowEmbedder(dim=DIM)


def _kb(path: Path, per_topic: int = 3) -> KnowledgeBase:
    kb = KnowledgeBase.create(path, _emb(), chunk_words=200, overlap_words=0)
    kb.add(make_docs(per_topic), show_progress=False)  # one chunk a document
    return kb


def _lexical_docs(kb: KnowledgeBase, query: str, k: int = 5) -> list[str]:
    return [h.doc_id for h in kb.search(query, k=k, retrieval="lexical")]


def _fresh_scores(kb: KnowledgeBase, query: str) -> np.ndarray:
    """BM25 scores of the same chunks indexed from scratch in one segment: what the KB's own must equal."""
    texts = [lexical_text(kb.chunks[c]) for c in kb.chunk_ids]
    return LexicalIndex([Postings.of_texts(kb.chunk_ids, texts)], kb.chunk_ids).scores(query)


def _strip_lexical(path: Path) -> None:
    """Make the KB at `path` what logicroute wrote before lexical retrieval: no postings files,
    no lexical flag on its segments, no retrieval entry."""
    manifest = json.loads((path / MANIFEST).read_text())
    for seg in manifest["segments"]:
        seg.pop("lexical", None)
    for name in [n for n in manifest["files"] if n.endswith(".lexical.npz")]:
        del manifest["files"][name]
        (path / name).unlink()
    del manifest["retrieval"]
    (path / MANIFEST).write_text(json.dumps(manifest))


# -- the text BM25 sees ----------------------------------------------------------------------


def test_tokens_are_lowercased_words_without_stop_words_and_plural_s():
    assert tokens("What does npm audit do, and how do I fix the Vulnerabilities?") == [
        "npm",
        "audit",
        "fix",
        "vulnerability",
    ]
    assert tokens("classes glasses buses status") == ["class", "glass", "buse", "status"]


def test_a_chunk_is_indexed_with_its_document_title_so_a_question_naming_it_finds_it(tmp_path):
    kb = KnowledgeBase.create(tmp_path / "kb", _emb())
    kb.add(
        [
            Document("link", "npm link", "Symlinks a package folder into the global folder."),
            Document("audit", "npm audit", "Submits the dependency tree to the registry; fix applies remediations."),
        ],
        show_progress=False,
    )
    assert _lexical_docs(kb, "what does npm audit do?") == ["audit", "link"]  # "audit" is in its title alone


# -- the postings follow the segments -------------------------------------------------------


def test_an_add_writes_the_postings_of_its_chunks_alone_and_a_delete_drops_them(tmp_path):
    kb = _kb(tmp_path / "kb")
    kb.add([Document("zephyr", "Zephyr", "The zephyr wind crossed the quiet valley.")], show_progress=False)
    seg = kb_segments.Segment(2, 1, lexical=ANALYSIS)
    written = Postings.decode((kb.path / seg.lexical_file).read_bytes(), 1)
    assert written.ids.tolist() == [kb.chunks_of("zephyr")[0].id]  # the added chunk's postings, no other
    assert _lexical_docs(kb, "zephyr wind", k=1) == ["zephyr"]
    kb.delete("zephyr")
    assert "zephyr" not in _lexical_docs(kb, "zephyr wind")
    again = KnowledgeBase.open(kb.path, _emb())
    assert "zephyr" not in _lexical_docs(again, "zephyr wind") and check_kb(kb.path).lexical == len(again)


def test_scores_over_many_segments_equal_those_of_the_same_chunks_indexed_at_once(tmp_path):
    kb = _kb(tmp_path / "kb", per_topic=4)
    kb.add(make_docs(2, prefix="new "), show_progress=False)
    kb.delete(["river-0", "new volcano-1", "opera-2"])
    # a replaced document: its new text is a new chunk, its old chunk is gone
    kb.add([Document("ship-1", "Ship 1", "The ship sailed past the lava crater at dawn.")], show_progress=False)
    again = KnowledgeBase.open(kb.path, _emb())
    assert len(again.manifest["segments"]) == 4
    for query in ("lava crater ship", "river delta flood", "opera aria soprano"):
        assert np.allclose(again.lexical_index().scores(query), _fresh_scores(again, query))


def test_compaction_carries_the_postings_over_without_changing_a_score(tmp_path, monkeypatch):
    monkeypatch.setattr(kb_segments, "COMPACT_SEGMENTS", 3)
    kb = _kb(tmp_path / "kb")
    for i in range(3):
        kb.add(make_docs(1, prefix=f"batch{i} "), show_progress=False)
    kb.delete(["batch0 river-0"])
    manifest = json.loads((kb.path / MANIFEST).read_text())
    assert len(manifest["segments"]) < 4 and all(s.get("lexical") for s in manifest["segments"] if s["rows"])
    again = KnowledgeBase.open(kb.path, _emb())
    assert np.allclose(again.lexical_index().scores("river water flood"), _fresh_scores(again, "river water flood"))
    assert check_kb(kb.path).ok


def test_check_names_a_damaged_postings_file_and_repair_rebuilds_it_without_embedding_again(tmp_path):
    kb = _kb(tmp_path / "kb")
    name = kb_segments.Segment(1, len(kb), lexical=ANALYSIS).lexical_file
    (kb.path / name).write_bytes(b"garbage")
    report = check_kb(kb.path)
    assert not report.ok and report.files[name] == "mismatch"
    emb = _emb()
    repaired = repair_kb(kb.path, embedder=emb, show_progress=False)
    assert repaired.rebuilt and repaired.embedded == 0 and emb.calls == []
    again = KnowledgeBase.open(kb.path, _emb())
    assert check_kb(kb.path).ok and _lexical_docs(again, "volcano lava magma", k=1)[0].startswith("volcano")


def test_postings_that_miss_a_chunk_are_damage_check_reports_and_repair_mends(tmp_path):
    kb = _kb(tmp_path / "kb")
    manifest = json.loads((kb.path / MANIFEST).read_text())
    seg = kb_segments.Segment(1, len(kb), lexical=ANALYSIS)
    short = Postings.of_texts(["not-a-chunk"] * len(kb), ["nothing"] * len(kb)).encode()  # right rows, wrong ids
    (kb.path / seg.lexical_file).write_bytes(short)
    manifest["files"][seg.lexical_file] = store.fingerprint(short)
    (kb.path / MANIFEST).write_text(json.dumps(manifest))
    assert any("lexical index" in p for p in check_kb(kb.path).problems)
    assert repair_kb(kb.path, embedder=_emb(), show_progress=False).rebuilt
    assert check_kb(kb.path).ok


# -- hybrid search ---------------------------------------------------------------------------


def test_fusion_adds_each_rankings_weighted_reciprocal_ranks():
    # a: 1/(1+1) + 1/(1+3) = 0.75; b: 1/(1+2) + 1/(1+1) = 0.83; c: 1/(1+3) = 0.25; d: 1/(1+2) = 0.33
    assert fuse([(["a", "b", "c"], 1.0), (["b", "d", "a"], 1.0)], c=1) == ["b", "a", "d", "c"]
    assert fuse([(["a", "b"], 1.0), (["b", "a"], 3.0)], c=1) == ["b", "a"]  # the weighted ranking wins
    assert fuse([(["a"], 1.0), (["b"], 1.0)], c=60) == ["a", "b"]  # a tie: the first ranking's order


def test_convex_fusion_adds_each_sides_scores_normalized_over_its_own_top_list():
    cos, bm25 = np.array([0.9, 0.5, 0.1]), np.array([0.0, 8.0, 4.0])
    # cosine over its list [0.9, 0.5]: 1, 0, 0 (0.1 is clipped); BM25 over [8, 4]: 0, 1, 0
    fused = convex([(cos, cos[:2], 1.0), (bm25, bm25[1:], 1.0)])
    assert fused.tolist() == [1.0, 1.0, 0.0]
    assert convex([(cos, cos[:2], 0.3), (bm25, bm25[1:], 0.7)]).argmax() == 1  # the weights decide


def test_the_summary_descent_ranks_the_chunks_under_its_nodes_as_search_ranks_the_kb(tmp_path):
    kb = _kb(tmp_path / "kb")  # 24 chunks: fewer than a fusion's depth, so search sees them all
    query = "volcano ash crater"
    qv = kb.embedder.encode([query])[0]
    for mode in ("dense", "lexical", "hybrid"):
        whole = [h.chunk_id for h in kb.search(qv, k=5, text=query, retrieval=mode)]
        ranked = [h.chunk_id for h in kb.rank_within(qv, kb.chunk_ids, 5, text=query, retrieval=mode)]
        assert ranked[: len(whole)] == whole and len(ranked) == 5  # lexical search stops at the last match
    some = kb.chunk_ids[::2]
    ranked = kb.rank_within(qv, some, 3, text=query)
    assert len(ranked) == 3 and {h.chunk_id for h in ranked} <= set(some)


def test_hybrid_search_excludes_what_it_is_told_and_still_returns_k(tmp_path):
    kb = _kb(tmp_path / "kb")
    first = kb.search("volcano lava eruption", k=3, retrieval="hybrid")
    seen = {h.chunk_id for h in first}
    second = kb.search("volcano lava eruption", k=3, exclude=seen, retrieval="hybrid")
    assert len(second) == 3 and not seen & {h.chunk_id for h in second}


def test_every_hit_scores_its_cosine_whichever_side_found_it(tmp_path):
    kb = _kb(tmp_path / "kb")
    q = kb.embedder.encode(["magma crater"])[0]
    for hit in kb.search("magma crater", k=6, retrieval="hybrid"):
        assert hit.score == pytest.approx(float(kb.vectors[kb.row_of(hit.chunk_id)] @ q), abs=1e-5)


def test_a_query_vector_with_its_text_searches_as_the_text_does(tmp_path):
    kb = _kb(tmp_path / "kb")
    query = "opera soprano aria"
    qv = kb.embedder.encode([query])
    by_text = [h.chunk_id for h in kb.search(query, k=4, retrieval="hybrid")]
    assert [h.chunk_id for h in kb.search(qv, k=4, text=query, retrieval="hybrid")] == by_text
    batch = kb.search_batch(qv, k=4, texts=[query], retrieval="hybrid")
    assert [h.chunk_id for h in batch[0]] == by_text
    assert kb.search(qv, k=4, retrieval="hybrid") == kb.search(query, k=4, retrieval="dense")  # no text: dense


def test_a_reranker_sees_the_fused_candidates_and_its_order_is_kept(tmp_path):
    class Reverse:
        depth = 6

        def __init__(self):
            self.seen: list[int] = []

        def rerank(self, query, hits):
            self.seen.append(len(hits))
            return hits[::-1]

    kb = _kb(tmp_path / "kb")
    fused = kb.search("ship harbour navy", k=6, retrieval="hybrid")
    kb.reranker = Reverse()
    assert kb.search("ship harbour navy", k=2, retrieval="hybrid") == fused[::-1][:2] and kb.reranker.seen == [6]


# -- the KB's retrieval setting ----------------------------------------------------------------


def test_a_new_kb_searches_hybrid_and_index_retrieval_dense_records_the_choice(tmp_path):
    kb = _kb(tmp_path / "kb")
    assert kb.retrieval == "hybrid"
    index_sources(kb.path, [], embedder=_emb(), summaries="none", retrieval="dense")
    again = KnowledgeBase.open(kb.path, _emb())
    assert again.retrieval == "dense" and again.manifest["retrieval"]["mode"] == "dense"
    assert again.search("lava", k=3) == again.search("lava", k=3, retrieval="dense")
    again.use_retrieval(RetrievalConfig(mode="hybrid", rrf_k=10, lexical_weight=2.0))
    assert again.retrieval == "hybrid" and again.retrieval_config.rrf_k == 10


def test_a_kb_without_a_lexical_index_opens_and_answers_dense_and_gains_it_on_its_next_write(tmp_path):
    kb = _kb(tmp_path / "kb")
    dense = [h.chunk_id for h in kb.search("flood basin", k=3, retrieval="dense")]
    _strip_lexical(kb.path)
    old = KnowledgeBase.open(kb.path, _emb())
    assert old.postings is None and old.retrieval == "dense"
    assert [h.chunk_id for h in old.search("flood basin", k=3)] == dense
    with pytest.raises(KBError, match=r"no lexical index .*logicroute index --kb"):
        old.search("flood basin", k=3, retrieval="hybrid")
    report = check_kb(kb.path)
    assert report.ok and report.lexical is None and any("no lexical index" in n for n in report.notes)
    old.add([Document("new", "New", "A new harbour opened for the navy.")], show_progress=False)
    again = KnowledgeBase.open(kb.path, _emb())
    assert again.retrieval == "hybrid" and check_kb(kb.path).lexical == len(again) == len(kb) + 1


def test_index_with_no_sources_gives_an_old_kb_its_lexical_index(tmp_path):
    kb = _kb(tmp_path / "kb")
    _strip_lexical(kb.path)
    index_sources(kb.path, [], embedder=_emb(), summaries="none")
    again = KnowledgeBase.open(kb.path, _emb())
    assert again.retrieval == "hybrid" and again.chunk_ids == kb.chunk_ids
    assert np.array_equal(again.vectors, kb.vectors) and check_kb(kb.path).lexical == len(kb)


# -- the question issue 42 opened with, on the real embedder ------------------------------------

# npm's own text (docs/content/commands/npm-audit.md, npm-link.md, ...): the description of `npm
# audit`, and the `audit` setting every installing command documents.
AUDIT_DESCRIPTION = """### Description

The audit command submits a description of the dependencies configured in your project to your default registry \
and asks for a report of known vulnerabilities.
If any vulnerabilities are found, then the impact and appropriate remediation will be calculated.
If the `fix` argument is provided, then remediations will be applied to the package tree.

The command will exit with a 0 exit code if no vulnerabilities were found.

Note that some vulnerabilities cannot be fixed automatically and will require manual intervention or review.
Also note that since `npm audit fix` runs a full-fledged `npm install` under the hood, all configs that apply to \
the installer will also apply to `npm install` -- so things like `npm audit fix --package-lock-only` will work as \
expected.

By default, the audit command will exit with a non-zero code if any vulnerability is found.
It may be useful in CI environments to include the `--audit-level` parameter to specify the minimum vulnerability \
level that will cause the command to fail.
This option does not filter the report output, it simply changes the command's failure threshold.
"""
AUDIT_SETTING = """### Configuration

#### `audit`

* Default: true
* Type: Boolean

When "true" submit audit reports alongside the current npm command to the
default registry and all registries configured for scopes. See the
documentation for [`npm audit`](/commands/npm-audit) for details on what is
submitted.
"""
DESCRIPTIONS = {
    "npm-link": "This is handy for installing your own stuff, so that you can work on it and test iteratively "
    "without having to continually rebuild.",
    "npm-update": "This command will update all the packages listed to the latest version, respecting the semver "
    "constraints of both your package and its dependencies.",
    "npm-dedupe": "Searches the local package tree and attempts to simplify the overall structure by moving "
    "dependencies further up the tree, where they can be more effectively shared by multiple dependent packages.",
}
NPM_DOCS = {
    "npm-audit": AUDIT_DESCRIPTION,
    **{name: f"### Description\n\n{text}\n\n{AUDIT_SETTING}" for name, text in DESCRIPTIONS.items()},
}


@pytest.mark.embedder
def test_a_question_naming_a_document_retrieves_it_first_where_dense_alone_does_not(tmp_path, real_embedder):
    kb = KnowledgeBase.create(tmp_path / "kb", real_embedder)
    kb.add(
        [Document(f"{n}.md", n, f"# {n}\n\n{t}", {"format": "markdown"}) for n, t in NPM_DOCS.items()],
        show_progress=False,
    )
    question = "What does npm audit do, and how do I make it fix what it finds?"
    dense = kb.search(question, k=3, retrieval="dense")
    assert "npm-audit.md" not in {h.doc_id for h in dense}  # the `audit` settings read closer to MiniLM
    hybrid = kb.search(question, k=3)  # a new KB's default
    assert hybrid[0].doc_id == "npm-audit.md" and hybrid[0].heading_path == "npm-audit > Description"
