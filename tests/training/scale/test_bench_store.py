"""training.scale.bench_store, the measurement behind the HNSW parameters: exact top-k is the true
nearest rows, `grow` pads a corpus with noisy unit copies, and the efSearch sweep reports one
row per width whose recall rises to exact as the search widens."""

from __future__ import annotations

import numpy as np

from training.scale.bench_store import ef_sweep, exact_top, grow, truth_ids


def unit(n: int, dim: int = 16, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_exact_top_is_the_rows_of_highest_inner_product_best_first():
    v, q = unit(300), unit(5, seed=1)
    want = np.argsort(-(q @ v.T), axis=1, kind="stable")[:, :10]
    assert (exact_top(q, v, batch=2) == want).all()


def test_grow_keeps_the_real_rows_first_and_pads_with_unit_noisy_copies():
    v = unit(50)
    g = grow(v, 130)
    assert g.shape == (130, 16) and (g[:50] == v).all()
    assert np.allclose(np.linalg.norm(g, axis=1), 1, atol=1e-5)
    assert not (g[50:100] == v).all() and (g[50:100] @ v.T).argmax(1).tolist() == list(range(50))


def test_the_ef_sweep_reports_each_width_and_wide_searches_are_exact():
    v, q = unit(3000), unit(40, seed=2)
    rows = ef_sweep(v, q, truth_ids(q, v), [10, 400])
    assert [r["ef_search"] for r in rows] == [10, 400] and all(r["n"] == 3000 for r in rows)
    assert rows[1]["recall_at_10"] >= 0.99 and rows[1]["recall_at_10"] >= rows[0]["recall_at_10"]
