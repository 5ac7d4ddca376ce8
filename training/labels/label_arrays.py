"""Label rows as arrays: what router training and evaluation read from label files.

- inputs: [MiniLM embedding ‖ cheap features] (router.features.build_inputs), each distinct
  question text embedded once (the embedder's SQLite cache keeps them across runs);
- targets: each row's preference vector; rows where every route scored 0 target the cheapest
  route (all_zero="cheapest"), keep their computed vector ("pref") or are dropped by the caller;
- a stratified split by dataset x oracle route.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from engine.floor.base.errors import LogicRouteError
from router.features import build_inputs, embedded_text
from training.labels.labels import read_labels, route_cost, with_cost_weight


def load_label_files(paths: Sequence[str | Path]) -> list[dict]:
    """The rows of every file, each marked with its file ("_file"); the files must agree on routes."""
    rows = []
    for p in paths:
        got = read_labels(p)
        if not got:
            raise LogicRouteError(f"{p}: no label rows")
        for r in got:
            r["_file"] = str(p)
        rows.extend(got)
    routes_of(rows)
    return rows


def routes_of(rows: Sequence[dict]) -> tuple[str, ...]:
    """The route names of the rows (the same in every row, or an error)."""
    routes = tuple(rows[0]["pref"]) if rows else ()
    for r in rows:
        if tuple(r["pref"]) != routes:
            raise LogicRouteError(
                f"label rows disagree on routes: {list(routes)} vs {list(r['pref'])} "
                f"({r.get('_file', '?')}, id {r.get('id')}): label every file with the same --routes"
            )
    return routes


def cheapest_index(row: dict, routes: Sequence[str]) -> int:
    costs = [route_cost(row["costs"][r]) for r in routes]
    return int(min(range(len(routes)), key=lambda i: (costs[i], i)))


def target_matrix(rows: Sequence[dict], routes: Sequence[str], all_zero: str = "cheapest") -> np.ndarray:
    """Each row's training target over `routes`: its preference vector, where routes the label
    cascade skipped (row["skipped"]) carry no mass. Their preference rests on an imputed score
    and cost (the cheaper route's), which would tie a skipped summary with a perfect chunk; the
    cascade skipped them because a cheaper route was already perfect, so the measured routes
    alone decide. Rows where no route scored: see `all_zero`."""
    t = np.array([[r["pref"][x] for x in routes] for r in rows], dtype=np.float32).reshape(len(rows), len(routes))
    for i, r in enumerate(rows):
        skipped = [list(routes).index(x) for x in r.get("skipped", ()) if x in routes]
        if skipped and len(skipped) < len(routes):
            t[i, skipped] = 0.0
            t[i] /= t[i].sum()
    if all_zero == "cheapest":
        for i, r in enumerate(rows):
            if r.get("all_zero"):
                t[i] = 0.0
                t[i, cheapest_index(r, routes)] = 1.0
    elif all_zero not in ("pref", "drop"):
        raise LogicRouteError(f"all_zero must be cheapest, pref or drop, got {all_zero!r}")
    return t


def training_targets(
    rows: Sequence[dict], routes: Sequence[str], all_zero: str, cost_weight: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(targets, oracle indices) of answer rows, their preferences first recomputed at
    `cost_weight` when one is given (TrainConfig.cost_weight)."""
    if cost_weight is not None:
        rows = [with_cost_weight(r, cost_weight) for r in rows]
    return target_matrix(rows, routes, all_zero), oracle_indices(rows, routes)


def oracle_indices(rows: Sequence[dict], routes: Sequence[str]) -> np.ndarray:
    return np.array([list(routes).index(r["oracle"]) for r in rows], dtype=np.int64)


def embed_unique(texts: Sequence[str], embedder, text_form: str = "question") -> np.ndarray:
    """Embeddings of the texts the router embeds (router.features.embedded_text), each distinct
    one encoded once."""
    norm = [embedded_text(t, text_form) for t in texts]
    uniq = list(dict.fromkeys(norm))
    if not uniq:
        return np.zeros((0, embedder.dim), np.float32)
    vecs = np.asarray(embedder.encode(uniq), dtype=np.float32)
    pos = {t: i for i, t in enumerate(uniq)}
    return vecs[[pos[t] for t in norm]]


def inputs_for(rows: Sequence[dict], embedder, features: Sequence[str], text_form: str = "question") -> np.ndarray:
    texts = [r["question"] for r in rows]
    embeddings = embed_unique(texts, embedder, text_form)
    return build_inputs(texts, embedder, features, embeddings=embeddings, text_form=text_form)


def stratified_split(keys: Sequence[str], frac: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(keep, held) index arrays: `frac` of each stratum held, at least one row of every
    stratum with >= 3 rows, deterministic for a seed."""
    rng = np.random.default_rng(seed)
    groups: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(k, []).append(i)
    held: list[int] = []
    for k in sorted(groups):
        idx = np.array(groups[k])
        rng.shuffle(idx)
        m = int(round(len(idx) * frac))
        if m == 0 and len(idx) >= 3 and frac > 0:
            m = 1
        held.extend(idx[:m].tolist())
    held_set = set(held)
    keep = [i for i in range(len(keys)) if i not in held_set]
    return np.array(keep, dtype=np.int64), np.array(sorted(held), dtype=np.int64)


def split_keys(rows: Sequence[dict]) -> list[str]:
    return [f"{r.get('dataset')}|{r['oracle']}" for r in rows]
