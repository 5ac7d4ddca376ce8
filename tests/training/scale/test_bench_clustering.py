"""The clustering benchmark (training.scale.bench_clustering): the corpus it assembles, the descent
recall it scores, one tiny run of every method in-process, and the report it writes."""

from __future__ import annotations

import numpy as np
import pytest

from training.scale import bench_clustering
from training.scale.bench_clustering_eval import (
    METHODS,
    QACorpus,
    centroid_layers,
    corpus,
    descent_scores,
    distractors,
    flat_recall,
    qa_corpus,
    text_keys,
    tree_in_child,
)


def topic_rows(m: int, d: int = 24, seed: int = 0, topics: int = 8) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(topics, d))
    x = centres[np.arange(m) % topics] + 0.4 * rng.normal(size=(m, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def tiny_qa(m: int = 80, n_questions: int = 20) -> QACorpus:
    """m chunk rows; question i asks about rows 2i and 2i+1 (its two supporting passages) and
    sits between them."""
    x = topic_rows(m)
    q = np.stack([x[2 * i] + x[2 * i + 1] for i in range(n_questions)])
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    support = [[[2 * i], [2 * i + 1]] for i in range(n_questions)]
    last = [2 * i + 1 for i in range(n_questions)]
    return QACorpus(x, [f"question {i}?" for i in range(n_questions)], q, support, last)


def test_corpus_is_qa_chunks_then_distractors_then_noisy_copies():
    qa = tiny_qa()
    pool = topic_rows(30, seed=5)
    x, held, what = corpus(qa, pool, 20)
    assert x.shape == (20, 24) and held == list(range(10))  # questions with rows >= 20 do not count
    x, held, what = corpus(qa, pool, 150)
    assert what == {"qa_chunks": 80, "cached_distractors": 30, "noisy": 40}
    assert np.array_equal(x[:80], qa.vectors) and np.array_equal(x[80:110], pool)
    assert np.allclose(np.linalg.norm(x[110:], axis=1), 1, atol=1e-5) and len(held) == 20


def test_distractors_leave_out_excluded_keys_in_a_seeded_order():
    keys = [bytes([i]) for i in range(10)]
    v = np.arange(10, dtype=np.float32)[:, None].repeat(3, axis=1)
    got = distractors(keys, v, {bytes([3]), bytes([7])}, seed=1)
    assert sorted(got[:, 0].tolist()) == [0, 1, 2, 4, 5, 6, 8, 9]
    assert np.array_equal(got, distractors(keys, v, {bytes([3]), bytes([7])}, seed=1))
    assert len(text_keys(["a", "b", "a"])) == 2


def test_descent_through_the_summary_route_finds_what_the_tree_holds():
    qa = tiny_qa(8, 2)
    # question 0's passages share cluster 0; question 1's are split across clusters 0 and 1
    levels = [[[0, 1, 3], [2, 4, 5, 6, 7]]]
    scores = descent_scores(qa, qa.vectors, levels, [0, 1])
    assert scores["together"] == 0.5
    assert 0 <= scores["recall_top"] <= 1 and scores["reach_top"] >= scores["recall_top"]
    assert scores["recall_l1"] == scores["recall_top"]  # one level: the top is level 1
    layers = centroid_layers(qa.vectors, levels)
    assert layers.nodes["L1-000000"].children == ["r0", "r1", "r3"]
    assert np.allclose(np.linalg.norm(layers.vectors[0], axis=1), 1)
    assert flat_recall(qa, qa.vectors, [0, 1]) > 0


def test_a_tiny_run_of_every_method_and_its_report(monkeypatch):
    from hierarchy.layers import clustering

    monkeypatch.setattr(clustering, "WARD_MAX", 100)  # the code's own method: Ward at 60 rows, two stages at 200
    qa = tiny_qa(120, 30)
    rows = bench_clustering.run(qa, topic_rows(100, seed=3), [60, 200], list(METHODS), {"ward": 60}, isolate=False)
    by = {(r["size"], r["method"]) for r in rows}
    assert {(60, m) for m in METHODS if m != "code"} <= by and (60, "code") not in by  # it is the Ward row
    assert (200, "ward") not in by and {(200, "two-stage"), (200, "code")} <= by
    for r in rows:
        assert 0 <= r["recall_top"] <= 1 and 0 <= r["recall_l1"] <= 1
        if "clusters" in r:
            assert r["clusters"] == round(r["size"] / 10) and r["peak_mb"] >= 0
    md = bench_clustering.report(rows, _setup(), "python -m training.scale.bench_clustering --sizes 60,200")
    assert "## 60 rows" in md and "## 200 rows" in md and "| two-stage |" in md
    assert "`python -m training.scale.bench_clustering --sizes 60,200`" in md and "ward 60 rows (--ward-max)" in md


def test_main_writes_the_report_with_its_command(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_clustering, "_inputs", lambda questions, seed: (tiny_qa(), topic_rows(40, seed=2)))
    monkeypatch.setattr(bench_clustering, "_tree", lambda path, method, size, seed, isolate: _tree(path, method))
    out = tmp_path / "r.md"
    bench_clustering.main(["--sizes", "100", "--methods", "two-stage,ward", "--out", str(out)])
    text = out.read_text()
    assert f"--sizes 100 --methods two-stage,ward --out {out}" in text and "| ward |" in text
    with pytest.raises(SystemExit):
        bench_clustering.main(["--methods", "gmm"])


@pytest.mark.shared_data
def test_qa_corpus_maps_supporting_passages_to_their_chunk_rows(shared_data):
    from tests.fakes import HashedBowEmbedder

    emb = HashedBowEmbedder(dim=32)
    qa = qa_corpus(emb.encode, n_per_set=3)
    assert len(qa.questions) == 6 and qa.vectors.shape[0] == len(emb.calls[0])
    texts = emb.calls[0]
    for sup, last in zip(qa.support, qa.last_row):
        assert len(sup) >= 2 and all(r <= last for rows in sup for r in rows)
    assert max(qa.last_row) == len(texts) - 1  # every chunk belongs to some question's passages
    assert all(texts[rows[0]] for sup in qa.support for rows in sup)


def _tree(path: str, method: str) -> dict:
    return tree_in_child(path, method, 10, 0)


def _setup() -> dict:
    return {
        "date": "2026-01-01",
        "cpus": 2,
        "load": [1.0],
        "questions": 30,
        "qa_chunks": 120,
        "pool": 100,
        "caps": {"ward": 60},
        "minutes": 0.1,
    }
