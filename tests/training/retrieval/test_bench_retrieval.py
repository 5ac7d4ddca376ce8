"""`logicroute bench retrieval`: what it counts as a found passage, a found heading and an
answer in context, and the report it writes. A small KB on the fake embedder: no model loads."""

from __future__ import annotations

import numpy as np

from engine.floor.base.types import RetrievedChunk
from hierarchy.datasets import Question
from hierarchy.documents import Document
from hierarchy.kb import KnowledgeBase
from hierarchy.retrieval import DENSE, HYBRID, LEXICAL, RetrievalConfig
from tests.fakes import HashedBowEmbedder
from training.retrieval.bench_retrieval import QASet, heading_hit, means, pooled, qa_scores
from training.retrieval.bench_retrieval_report import write_report


def _hit(doc_id: str, heading_path: str) -> RetrievedChunk:
    return RetrievedChunk("c", doc_id, "t", "text", 0.5, heading_path=heading_path)


def test_a_heading_is_found_when_a_top3_chunk_of_its_file_lies_under_it():
    hits = [_hit("api/fs.md", "File system > Callback API > fs.mkdir(path)"), _hit("api/path.md", "Path > path.sep")]
    assert heading_hit(hits, "fs.md", "Callback API")
    assert heading_hit(hits, "path.md", "path.sep")
    assert not heading_hit(hits, "path.md", "Callback API")  # the heading, but in another file
    assert not heading_hit(hits, "fs.md", "fs.mkdir")  # a heading is matched whole, not as a prefix
    assert not heading_hit([_hit("x.md", "X")] * 3 + hits, "fs.md", "Callback API")  # fourth: past k=3


def test_recall_counts_each_gold_passage_among_the_top_documents_and_context_holds_an_answer(tmp_path):
    kb = KnowledgeBase.create(tmp_path / "kb", HashedBowEmbedder(dim=64))
    kb.add(
        [
            Document("p1", "Curie", "Marie Curie was born in Warsaw."),
            Document("p2", "Warsaw", "Warsaw is the capital of Poland."),
            Document("p3", "Nile", "The Nile is a river in Africa."),
        ],
        show_progress=False,
    )
    questions = [
        Question("q1", "Where was Marie Curie born, in which country's capital?", ["Warsaw"], None, ["p1", "p2"], "t"),
        Question("q2", "Which river flows in Africa?", ["Nile"], None, [], "t"),  # no gold: recall skips it
    ]
    qa = QASet("t", kb, questions, np.asarray(kb.embedder.encode([q.text for q in questions])))
    scores = qa_scores(qa, RetrievalConfig(mode=HYBRID))
    assert scores["recall@3"] == [1.0] and scores["recall@10"] == [1.0]  # both passages, 3 of 3 chunks shown
    assert scores["answer_in_context@3"] == [1.0, 1.0]
    assert means(scores) == {"recall@3": 100.0, "recall@10": 100.0, "answer_in_context@3": 100.0, "questions": 2}
    half = {"recall@3": [0.5], "recall@10": [1.0], "answer_in_context@3": [0.0]}
    assert pooled([scores, half])["recall@3"] == 75.0  # every question counts once


def test_the_report_shows_every_set_the_pooled_row_and_the_gain_of_hybrid(tmp_path):
    row = {"recall@3": 50.0, "recall@10": 80.0, "answer_in_context@3": 60.0, "questions": 200}
    better = {**row, "recall@3": 56.0}
    labels = {DENSE: row, LEXICAL: row, HYBRID: better, "hybrid rrf": row}
    grid = [{"title_weight": 3, "b": 0.4, "fusion": "convex", "dense_weight": 0.5, "rrf_k": 60, **better, "sets": {}}]
    qa = {
        "dev": {"sets": ["nq"], "offset": 200, "dense": row, "grid": grid},
        "shipped": {"fusion": "convex"},
        "analysis": {"title_weight": 3},
        "sets": {"nq": {"chunks": 203, **labels}},
        "pooled": labels,
    }
    runs = {"qa": {"command": "logicroute bench retrieval --parts qa", "machine": "2 CPUs"}}
    path = write_report({"runs": runs, "qa": qa}, tmp_path / "r.md")
    text = path.read_text()
    assert "- qa: `logicroute bench retrieval --parts qa` (2 CPUs)" in text
    assert "| nq | 203 |" in text and "| **pooled** |" in text
    assert "- pooled: recall@3 50.0 -> 56.0 (+6.0)" in text
