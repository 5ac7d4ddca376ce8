"""Does fine-tuning on one set cost the others? `bench specialist`'s step 4.

The cheap check made here: the generalist and the specialist, each through the Decider, on the
label rows of every other set that the generalist was trained on (its card's label files). Those
rows are the generalist's own training rows, so this measures forgetting of what it learned, not
a leave-one-dataset-out score: a drop here is a drop LODO would also have to explain, but no drop
here does not prove there is none there.

The LODO form of the check (issue 67's "lowers no other set's LODO score by more than 1 point")
would, for each other set d, train the LODO fold's generalist with the shipped recipe without d
(training.fitting.lodo: `eval-router --lodo --recipe checkpoints/generalist.ckpt`), fine-tune it
with the chosen variant on the same training rows, and judge both on d's rows: one generalist
training per set (minutes each on this CPU), so it is not run by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

MAX_DROP = 1.0  # points: the bar of issue 67


def compared(n: int, g: dict, s: dict) -> dict:
    """One set's generalist against specialist (judge tables): scores, the difference, tokens, and
    whether the difference stays within MAX_DROP."""
    diff = round(s["score"] - g["score"], 1)
    return {
        "n": n,
        "generalist": g["score"],
        "specialist": s["score"],
        "diff": diff,
        "generalist_tokens": g["tokens"],
        "specialist_tokens": s["tokens"],
        "within_bar": diff >= -MAX_DROP,
    }


def other_sets(
    base, specialist, gate, card: dict, set_name: str, embedder, label_files: Sequence[str | Path] | None = None
) -> dict:
    """Per other set: n, the generalist's and the specialist's score (Decider), the difference and
    whether it stays within MAX_DROP; label_files None: the generalist's card's files."""
    from training.adapt.specialist_fit import decisions
    from training.fitting.lodo import judge
    from training.labels.label_arrays import inputs_for
    from training.labels.labels import card_label_paths, read_labels

    files = [Path(f) for f in label_files] if label_files is not None else card_label_paths(card)
    routes = tuple(base.config.routes)
    by_set: dict[str, list[dict]] = {}
    for f in files:
        for r in read_labels(f):
            if str(r.get("dataset")) != set_name and tuple(r["pref"]) == routes:
                by_set.setdefault(str(r.get("dataset")), []).append(r)
    out: dict = {
        "kind": "the generalist's own label rows of the other sets (in-sample for it: a forgetting check, not LODO)",
        "files": [str(f) for f in files],
        "sets": {},
    }
    for d in sorted(by_set):
        rows = by_set[d]
        x = inputs_for(rows, embedder, base.config.features, base.config.text_form)
        g = judge(rows, decisions(base, gate, x, rows, routes)["decider"], routes)
        s = judge(rows, decisions(specialist, gate, x, rows, routes)["decider"], routes)
        out["sets"][d] = compared(len(rows), g, s)
    out["all_within_bar"] = all(v["within_bar"] for v in out["sets"].values())
    return out
