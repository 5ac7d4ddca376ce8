"""How `bench specialist` divides one set's label rows, and the paired interval it reports.

- Seen rows: a question the generalist trained on (its set priors draw silver rows from the same
  shared files the specialist labels come from) can never be judged; it may only train.
- Held-out (judge) rows: an unseen question is held out when a salted hash of its id falls under
  the held-out share. A hash, not a seeded shuffle: a question's side depends on its own id alone, so
  while the label file grows (rows are appended as they are answered) no question ever changes
  sides, and a held-out question stays unseen by every specialist chosen on a later, larger file.
- Validation folds: the training rows only, by a second salt, so the folds are independent of
  the held-out draw.
- The paired bootstrap: the same held-out questions under two routers, the questions resampled
  with a fixed seed (the report is the same on every rerun).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence

import numpy as np

JUDGE_SALT = "specialist-judge-v1"
FOLD_SALT = "specialist-validation-v1"
TIE = 1e-9


def row_key(row: dict) -> str:
    """What identifies a question across reruns: its set and id (ids are unique within a set)."""
    return f"{row.get('dataset')}:{row['id']}"


def unit_hash(salt: str, key: str) -> float:
    """A number in [0, 1) fixed by (salt, key) alone."""
    digest = hashlib.sha256(f"{salt}:{key}".encode()).hexdigest()
    return int(digest[:15], 16) / 16**15


def is_held_out(row: dict, held_share: float) -> bool:
    return unit_hash(JUDGE_SALT, row_key(row)) < held_share


def split_rows(
    rows: Sequence[dict], held_share: float, seen: Collection[str] = frozenset()
) -> tuple[list[dict], list[dict]]:
    """(training rows, held-out rows), each in file order; a row whose row_key is in `seen` (the
    generalist trained on it) is a training row. Raises on a repeated question: a question on both
    sides, or counted twice, would make the judgement unfair."""
    keys = [row_key(r) for r in rows]
    if len(set(keys)) != len(keys):
        counted: set[str] = set()
        twice = next(k for k in keys if k in counted or counted.add(k))
        raise ValueError(f"question {twice} appears twice in the label rows")
    held_keys = {k for k, r in zip(keys, rows) if k not in seen and is_held_out(r, held_share)}
    train = [r for k, r in zip(keys, rows) if k not in held_keys]
    held = [r for k, r in zip(keys, rows) if k in held_keys]
    return train, held


def validation_folds(rows: Sequence[dict], k: int) -> list[list[int]]:
    """k disjoint folds of row indices covering every row; a row's fold is fixed by its id."""
    folds: list[list[int]] = [[] for _ in range(k)]
    for i, r in enumerate(rows):
        folds[min(int(unit_hash(FOLD_SALT, row_key(r)) * k), k - 1)].append(i)
    return folds


def paired_bootstrap(a: Sequence[float], b: Sequence[float], *, resamples: int = 10_000, seed: int = 0) -> dict:
    """a - b over the same questions, in points (x100): the mean difference, the 2.5 / 97.5
    percentiles of the means of `resamples` bootstrap draws of the questions, and the interval's
    half-width: the power statement (a true gain smaller than it could not have shown as above 0).
    Wins, losses and ties count the questions."""
    d = 100 * (np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
    n = len(d)
    if n == 0:
        return {"n": 0}
    rng = np.random.default_rng(seed)
    means = np.concatenate(  # in blocks: resamples x n indices never sit in memory at once
        [d[rng.integers(0, n, size=(min(1000, resamples - i), n))].mean(axis=1) for i in range(0, resamples, 1000)]
    )
    lo, hi = np.percentile(means, [2.5, 97.5])
    return {
        "n": n,
        "mean_diff": round(float(d.mean()), 2),
        "ci95": [round(float(lo), 2), round(float(hi), 2)],
        "half_width": round(float(hi - lo) / 2, 2),
        "above_zero": bool(lo > 0),
        "wins": int((d > TIE).sum()),
        "losses": int((d < -TIE).sum()),
        "ties": int((np.abs(d) <= TIE).sum()),
        "resamples": resamples,
        "seed": seed,
    }
