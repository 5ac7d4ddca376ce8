"""The list gate's settings, chosen on tune data only (before any judge half was read): for each
candidate, a gate trained with one corpus's list rows left out, judged on that corpus's TUNE list
questions (recall) and TUNE documentation questions (false fires), and a gate trained on all rows
judged on NQ and SQuAD questions 1200-1399 (false fires). Run from the repository root:

    PYTHONPATH=. .venv/bin/python docs/results/router/list_gate/gate_tune.py
"""

import numpy as np
from sklearn.linear_model import LogisticRegression

from engine.floor.embedder import get_embedder
from router.features import build_inputs
from training.fitting.fit import TrainConfig
from training.fitting.list_gate_fit import gate_targets
from training.fitting.route_shares import read_questions
from training.fitting.set_priors import build_priors
from training.labels.label_arrays import load_label_files, routes_of

L = "training/data/labels/"
FILES = [
    *(f"{L}lean/answer_{s}.jsonl" for s in ("nq", "squad", "hotpotqa", "2wiki", "musique")),
    f"{L}answer_medical.jsonl",
    f"{L}answer_lists.jsonl",
]
FEATURES = ("shape",)
CANDIDATES = [
    ("balanced, C 1, at 0.5", {"C": 1.0, "class_weight": "balanced"}, 0.5),
    ("balanced, C 0.1, at 0.5", {"C": 0.1, "class_weight": "balanced"}, 0.5),
    ("unweighted, C 1, at 0.5", {"C": 1.0}, 0.5),
    ("unweighted, C 10, at 0.5", {"C": 10.0}, 0.5),
    ("balanced, C 1, at 0.7", {"C": 1.0, "class_weight": "balanced"}, 0.7),
    ("balanced, C 1, at 0.9", {"C": 1.0, "class_weight": "balanced"}, 0.9),
]


def main() -> None:
    emb = get_embedder()
    read = load_label_files(FILES)
    cfg = TrainConfig(prior_per_set=100, hop_priors=300, hop_pairs=200, list_priors=100, features=FEATURES)
    priors = build_priors(read, routes_of(read), cfg, emb)
    rows = list(read) + priors.rows
    x = build_inputs([r["question"] for r in rows], emb, FEATURES)
    y = gate_targets(rows)
    shared = {s: build_inputs(read_questions(f"{s}:1200:200"), emb, FEATURES) for s in ("nq", "squad")}
    corpora = ("npm", "valgrind", "node")
    tune_lists = {
        c: build_inputs(read_questions(f"training/data/global_lists/{c}.jsonl:tune"), emb, FEATURES) for c in corpora
    }
    tune_docs = {
        c: build_inputs(read_questions(f"training/data/docs_questions/{c}.jsonl:tune"), emb, FEATURES) for c in corpora
    }
    for name, settings, threshold in CANDIDATES:
        recall, false_fires = [], []
        for c in corpora:
            keep = np.array([r["dataset"] != f"lists_{c}" for r in rows])
            lr = LogisticRegression(max_iter=3000, **settings).fit(x[keep], y[keep])
            recall.append(float((lr.predict_proba(tune_lists[c])[:, 1] >= threshold).mean()))
            false_fires.append(float((lr.predict_proba(tune_docs[c])[:, 1] >= threshold).mean()))
        lr = LogisticRegression(max_iter=3000, **settings).fit(x, y)
        fires = {s: float((lr.predict_proba(v)[:, 1] >= threshold).mean()) for s, v in shared.items()}
        print(
            f"{name:26s} left-out recall npm/valgrind/node {[round(v, 2) for v in recall]}  "
            f"left-out doc false fires {[round(v, 3) for v in false_fires]}  "
            f"NQ {fires['nq']:.3f} SQuAD {fires['squad']:.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
