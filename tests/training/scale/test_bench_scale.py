"""`logicroute bench scale`: its corpus is real, deduplicated text of the shared data sets; it runs
end to end on tiny sizes and writes a report, JSON and PNG holding every figure the issue names;
bad options give one error line and write nothing. A hashed bag-of-words embedder stands in for
MiniLM (the figures' meaning, not their values, is under test)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from engine.face.cli import main
from hierarchy.datasets import load_dataset
from tests.fakes import HashedBowEmbedder
from training.common.shared_data import SHARED_FILES
from training.scale.bench_scale_corpus import SCALE_SETS, plan_sizes, scale_corpus
from training.scale.bench_scale_report import bar_checks


@pytest.fixture(scope="module")
def corpus(shared_data):
    return scale_corpus()


@pytest.mark.shared_data
def test_the_corpus_is_the_deduplicated_passages_of_every_shared_set(corpus, shared_data):
    passages = {}
    for name in SCALE_SETS:
        for p in load_dataset(shared_data / SHARED_FILES[name]).passages:
            passages.setdefault(p.id, p)
    # every passage once, each one a passage of the data files as they are (real text, never generated)
    assert sorted(d.id for d in corpus.docs) == sorted(passages)
    assert all(d.text == passages[d.id].text and d.title == passages[d.id].title for d in corpus.docs[:500])
    # distinct chunks, as the KB chunks them: no chunk text twice
    assert len(set(corpus.texts)) == corpus.chunks == sum(corpus.adds) > 15_000
    # shuffled once, so the first thousand documents already mix the sets
    first = {d.id for d in corpus.docs[:1000]}
    assert all(first & {p.id for p in load_dataset(shared_data / SHARED_FILES[n]).passages} for n in SCALE_SETS)
    assert [d.id for d in scale_corpus().docs[:50]] == [d.id for d in corpus.docs[:50]]  # the same order every run
    assert list(corpus.parts) == list(SCALE_SETS) and sum(p["chunks"] for p in corpus.parts.values()) == corpus.chunks


@pytest.mark.shared_data
def test_a_size_takes_its_chunks_and_keeps_one_percent_for_the_add(corpus):
    docs, extra = corpus.take(2000)
    have = sum(corpus.adds[: len(docs)])
    assert 2000 <= have < 2000 + max(corpus.adds) and sum(corpus.adds[: len(docs) - 1]) < 2000
    added = sum(corpus.adds[len(docs) : len(docs) + len(extra)])
    assert 20 <= added < 20 + max(corpus.adds)
    assert not {d.id for d in docs} & {d.id for d in extra}


@pytest.mark.shared_data
def test_a_size_past_the_corpus_is_cut_to_it_and_says_how_much_real_text_there_is(corpus):
    plan, notes = plan_sizes((1000, 100_000, 1_000_000), corpus)
    assert plan == [(1000, 1000), (100_000, corpus.max_kb)]  # 1M cuts to the same size: measured once
    assert corpus.max_kb * 1.01 <= corpus.chunks
    assert len(notes) == 2 and f"{corpus.chunks:,} distinct real chunks" in notes[0]
    assert "`make corpus`, then --corpus debian-docs" in notes[0]  # where 100k real chunks are


@pytest.mark.shared_data
def test_bench_scale_runs_end_to_end_and_writes_every_figure(tmp_path, shared_data):
    pytest.importorskip("milvus_lite")
    out = tmp_path / "out"
    args = ["bench", "scale", "--sizes", "200,400", "--stores", "faiss,milvus", "--index-only-size", "2000"]
    args += ["--milvus-index-max", "1000"]  # Milvus Lite's cap in the index-only part
    res = CliRunner().invoke(main, [*args, "--queries", "12", "--out", str(out)], obj={"embedder": HashedBowEmbedder()})
    assert res.exit_code == 0, res.output
    report = json.loads((out / "report.json").read_text())
    assert report["finished"] and report["corpus"]["distinct_chunks"] > 15_000
    assert report["corpus"]["name"] == "shared" and "the shared data sets (hotpotqa," in report["corpus"]["about"]
    assert [(r["chunks"], r["store"]) for r in report["kb"]] == [
        (200, "faiss"),
        (200, "milvus"),
        (400, "faiss"),
        (400, "milvus"),
    ]
    for r in report["kb"]:
        assert r["build_s"] > 0 and r["build_fresh_s"] > 0 and 0 <= r["embed_share"] <= 1
        assert r["peak_rss_mb"] > 0 and r["kb_bytes"] > 0 and r["disk_bytes"] >= r["kb_bytes"]
        assert r["retrieval"]["queries"] == 12 and 0 < r["retrieval"]["p50_ms"] <= r["retrieval"]["p95_ms"]
        assert r["retrieval"]["recall_at_10"] == 1.0  # both stores search exactly
        for change in ("add", "delete"):
            assert r[change]["chunks"] >= 1 and r[change]["bytes"] > 0 and r[change]["share_of_rebuild"] > 0
    assert [r["chunks"] for r in report["layers"]] == [200, 400]  # once per size: they read only the vectors
    for r in report["layers"]:
        assert r["build_s"] > 0 and r["nodes_per_level"] and r["layers_bytes"] > 0
        assert 0 < r["descent"]["p50_ms"] <= r["descent"]["p95_ms"]
    assert [(r["n"], r["store"]) for r in report["index_only"]] == [(2000, "faiss"), (1000, "milvus")]
    assert any("Milvus Lite holds at most 1,000 vectors" in n for n in report["notes"])
    for r in report["index_only"]:
        assert r["build_s"] >= 0 and 0 < r["p50_ms"] <= r["p95_ms"] and r["recall_at_10"] == 1.0
    assert report["embedding"]["query"]["queries"] == 12
    md = (out / "report.md").read_text()
    for heading in ("per size and store", "summary layers", "Index only", "the issue's bar", "How it was measured"):
        assert heading.lower() in md.lower()
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| 400 | `milvus` |" in res.stdout and f"report: {out / 'report.md'}" in res.stdout


def test_counts_read_k_and_m_suffixes():
    from training.scale.cmd_bench_scale import _ints

    assert _ints("1k, 10_000,0.1M,", "--sizes") == (1_000, 10_000, 100_000)


@pytest.mark.parametrize(
    "args, says",
    [
        (["--sizes", "ten"], "--sizes takes comma-separated counts"),
        (["--sizes", "0"], "--sizes must be positive"),
        (["--stores", "faiss,annoy"], "unknown --stores annoy"),
        (["--queries", "0"], "--queries must be at least 1"),
        (["--index-only-size", "5"], "--index-only-size must be 0 or at least 10"),
        (["--sizes", "", "--index-only-size", "0"], "nothing to measure"),
    ],
)
def test_bad_options_give_one_error_line_and_write_nothing(tmp_path, args, says):
    res = CliRunner().invoke(main, ["bench", "scale", *args, "--out", str(tmp_path / "out")])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [res.output.strip()] and says in res.output
    assert not (tmp_path / "out").exists()


def test_the_bar_is_checked_on_the_largest_kb_of_each_faiss_store_and_on_the_index_only_rows():
    kb = lambda store, n, p50: {"store": store, "chunks": n, "retrieval": {"p50_ms": p50}}  # noqa: E731
    report = {
        "kb": [
            kb("faiss", 1_000, 0.1),
            kb("faiss", 100_000, 12.5),
            kb("faiss-hnsw", 100_000, 0.5),
            kb("milvus", 100_000, 240),
        ],
        "index_only": [
            {"store": "faiss-hnsw", "n": 1_000_000, "p50_ms": 1.0},
            {"store": "milvus", "n": 1_000_000, "p50_ms": 400},
        ],
    }
    assert bar_checks(report) == [
        "KB of 100,000 real chunks on `faiss`: retrieval p50 12.50 ms (over the 5 ms bar)",
        "KB of 100,000 real chunks on `faiss-hnsw`: retrieval p50 0.50 ms (within the 5 ms bar)",
        "index only, 1,000,000 vectors on `faiss-hnsw`: search p50 1.00 ms (within the 5 ms bar)",
    ]
