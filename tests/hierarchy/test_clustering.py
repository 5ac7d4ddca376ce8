"""Clustering for the summary layers (hierarchy.layers.clustering): k groups covering every row
once, the same groups for the same seed, balanced groups on real text, and the large-size path
(two stages) at a small threshold: Ward never sees more than WARD_MAX rows, a build over it
gives a valid tree and the incremental update stays local."""

from __future__ import annotations

import numpy as np
import pytest

from hierarchy.indexing import add_documents
from hierarchy.kb import KnowledgeBase
from hierarchy.layers import clustering
from hierarchy.layers.clustering import apportion, cluster, cluster_method
from hierarchy.layers.persist import load_layers
from hierarchy.layers.update import build_layers
from tests.fakes import HashedBowEmbedder
from tests.hierarchy.test_layers import check_tree
from tests.samples import TOPICS, make_docs


def unit_rows(m: int, d: int = 32, seed: int = 0, topics: int = 12) -> np.ndarray:
    """m distinct unit vectors around `topics` random directions (clusterable, like text)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(topics, d))
    x = centres[rng.integers(topics, size=m)] + 0.5 * rng.normal(size=(m, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def assert_partition(groups: list[list[int]], m: int, k: int) -> None:
    assert len(groups) == k
    assert sorted(i for g in groups for i in g) == list(range(m))  # every row, once
    assert all(g == sorted(g) for g in groups)
    assert [g[0] for g in groups] == sorted(g[0] for g in groups)


@pytest.fixture
def small_threshold(monkeypatch):
    """Two stages from 50 rows on, coarse groups of ~40 rows; records the rows each Ward call gets."""
    monkeypatch.setattr(clustering, "WARD_MAX", 50)
    monkeypatch.setattr(clustering, "COARSE_GROUP", 40)
    seen: list[int] = []
    ward = clustering.ward_labels

    def spy(x, k):
        seen.append(len(x))
        return ward(x, k)

    monkeypatch.setattr(clustering, "ward_labels", spy)
    return seen


@pytest.mark.parametrize("m", [9, 40, 230])
def test_ward_path_gives_k_groups_covering_every_row_once(m):
    x = unit_rows(m)
    assert cluster_method(m) == "ward"
    assert_partition(cluster(x, 10), m, max(1, round(m / 10)))


def test_large_path_at_a_small_threshold_covers_every_row_and_keeps_ward_small(small_threshold):
    m = 500
    x = unit_rows(m)
    assert cluster_method(m) == "two-stage"
    groups = cluster(x, 10, seed=3)
    assert_partition(groups, m, 50)
    assert small_threshold and max(small_threshold) <= 50  # Ward's memory stays bounded


def test_a_coarse_group_over_the_ward_limit_is_split_again(monkeypatch, small_threshold):
    monkeypatch.setattr(clustering, "COARSE_GROUP", 400)  # two coarse groups of ~250 rows each
    x = unit_rows(500)
    assert_partition(cluster(x, 10), 500, 50)
    assert max(small_threshold) <= 50


def test_same_seed_same_groups(small_threshold):
    x = unit_rows(400, seed=1)
    assert cluster(x, 10, seed=7) == cluster(x, 10, seed=7)
    assert cluster(x[:45], 10, seed=7) == cluster(x[:45], 10, seed=7)  # the Ward path too


def test_identical_rows_are_not_split_and_tiny_sets_are_one_group(small_threshold):
    x = np.repeat(unit_rows(3), 40, axis=0)  # 120 rows, 3 distinct
    groups = cluster(x, 10)
    assert len(groups) <= 3 and sorted(i for g in groups for i in g) == list(range(120))
    assert cluster(unit_rows(30), 10, min_items=30) == [list(range(30))]
    assert cluster(np.zeros((0, 4), np.float32), 10) == []


def test_apportion_shares_k_by_size_at_least_one_each():
    assert apportion([500, 300, 200], 100) == [50, 30, 20]
    shares = apportion([333, 333, 334, 5], 101)
    assert sum(shares) == 101 and all(1 <= s <= c for s, c in zip(shares, [333, 333, 334, 5]))
    assert apportion([3, 1], 4) == [3, 1]  # never more than a group's rows


@pytest.mark.shared_data
@pytest.mark.embedder
def test_balanced_on_real_passages(shared_data, real_embedder, small_threshold):
    from hierarchy.datasets import load_dataset
    from training.common.shared_data import SHARED_FILES

    ds = load_dataset(shared_data / SHARED_FILES["hotpotqa"], n=20)
    # each passage's title and first 30 words: real text, a quarter of the encoding time
    x = real_embedder.encode([f"{p.title}\n{' '.join(p.text.split()[:30])}" for p in ds.passages])
    m = len(x)
    assert m > 150 and cluster_method(m) == "two-stage"
    sizes = sorted(len(g) for g in cluster(x, 10))
    assert len(sizes) == round(m / 10)
    assert 5 <= sizes[len(sizes) // 2] <= 15  # median near the target of 10
    assert sizes[-1] <= 30  # no cluster a 100-word summary cannot cover (Ward's largest here: 21)
    assert sum(s == 1 for s in sizes) <= len(sizes) // 10


def test_a_build_over_the_two_stage_path_is_a_valid_tree_and_updates_stay_local(tmp_path, small_threshold):
    kb = KnowledgeBase.create(tmp_path / "kb", HashedBowEmbedder(dim=128), chunk_words=200, overlap_words=0)
    kb.add(make_docs(12), show_progress=False)  # 96 chunks: over the 50-row threshold
    build_layers(kb, show_progress=False, cluster_size=4)
    layers = load_layers(kb)
    check_tree(kb, layers)
    assert layers.meta["cluster_method"] == "two-stage" and len(layers.levels[0]) == 24
    total = sum(len(ids) for ids in layers.levels)
    add_documents(kb, make_docs(1, {"river": TOPICS["river"]}, seed=9, prefix="Extra "), show_progress=False)
    after = load_layers(kb)
    check_tree(kb, after)
    upd = after.meta["updates"][-1]
    # one chunk joins one cluster: that node and its ancestors are re-summarized, nothing else
    assert upd["mode"] == "incremental" and upd["resummarized_nodes"] <= after.top < total
