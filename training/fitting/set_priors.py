"""Silver router labels from the kind of data set a question comes from: a question of a
single-hop set (NQ, SQuAD) is labelled chunk, one of a multi-hop set (HotpotQA, 2Wiki, MuSiQue)
logic. This is Adaptive-RAG's "inductive bias of datasets" (Jeong et al., NAACL 2024), which
labels the questions no answer decided by the set they came from.

Why the router needs them: answer labels are a few hundred rows. Only one set (2Wiki) shows on
them that a multi-hop form gains from logic, so with that set left out a router trained on
answers alone does not learn the form. The priors teach the form on hundreds of questions per set
at no LLM cost, and the answer labels correct them. Leave-one-dataset-out, a fold's priors come
from its training sets only (docs/results/router/lodo/lodo_set_priors.md).

A set's kind says nothing about a question's form within the set, so the router can still learn
topic instead of form: with every HotpotQA-, 2Wiki- and MuSiQue-like topic labelled logic, "Who
wrote the novel Wuthering Heights?" went to logic with P = 0.97. Hop priors (`hop_rows`) answer
that with one-hop lookups on a multi-hop set's own topics: 2Wiki writes out the sub-questions of
each of its questions ("Who is the director of The Prairie King?"), labelled chunk, where one
retrieval finds the entity's own passage and the logic route would plan a single lookup anyway.
Hop pairs (`pair_rows`) take a 2Wiki question (logic) together with its own sub-questions
(chunk): the same topic and names in both forms.

A prior row is a label row with a question, its set, a preference vector (`strength` on the
set's route, the rest spread evenly) and "prior": True. It trains, never judges: the splits,
validation and every evaluation use answer rows only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.floor.base.errors import LogicRouteError
from router.list_gate import LIST_ROUTE  # the route of a question about a whole corpus (its global mode)

SET_ROUTES: dict[str, str] = {
    "nq": "chunk",
    "squad": "chunk",
    "hotpotqa": "logic",
    "2wiki": "logic",
    "musique": "logic",
}
BENCHMARK_QUESTIONS = 100  # every set's first questions are the benchmarks': never trained on


def prior_rows(
    routes: Sequence[str],
    per_set: int,
    strength: float = 0.8,
    *,
    exclude: Iterable[str] = (),
    seed: int = 0,
    sets: dict[str, str] | None = None,
) -> list[dict]:
    """Up to `per_set` prior rows from each set of `sets` (name -> route; default SET_ROUTES),
    drawn with `seed` from its questions after the benchmarks' first BENCHMARK_QUESTIONS, leaving
    out every question text in `exclude` (the answer-labelled ones). The seed is not the
    training seed: every training seed then sees the same rows."""
    from hierarchy.datasets import load_dataset
    from training.common.shared_data import resolve_data

    sets = SET_ROUTES if sets is None else sets
    _check_strength(routes, strength)
    unknown = sorted({r for r in sets.values() if r not in routes})
    if unknown:
        raise LogicRouteError(f"set priors name route(s) {unknown} the labels lack ({list(routes)})")
    skip = set(exclude)
    out: list[dict] = []
    for name, route in sets.items():
        questions = load_dataset(resolve_data(name)).questions[BENCHMARK_QUESTIONS:]
        pool = [q.text for q in questions if q.text not in skip]
        out += _drawn_rows(pool, name, route, routes, per_set, strength, seed)
    return out


def _check_strength(routes: Sequence[str], strength: float) -> None:
    if not 1.0 / len(routes) < strength <= 1.0:
        raise LogicRouteError(f"prior strength must be in (1/{len(routes)}, 1], got {strength}")


def _drawn_rows(
    pool: Sequence[str], name: str, route: str, routes: Sequence[str], per_set: int, strength: float, seed: int, **marks
) -> list[dict]:
    """Up to `per_set` of `pool`, drawn with `seed` and kept in pool order, as prior rows
    (_rows_of)."""
    rng = np.random.default_rng(seed)
    picked = sorted(rng.choice(len(pool), size=min(per_set, len(pool)), replace=False))
    return _rows_of([pool[i] for i in picked], name, route, routes, strength, **marks)


def _rows_of(questions: Sequence[str], name: str, route: str, routes: Sequence[str], strength: float, **marks):
    """Prior rows of set `name` preferring `route` with `strength` (the rest spread evenly);
    `marks` join each row."""
    other = round((1.0 - strength) / (len(routes) - 1), 6)
    pref = {r: (strength if r == route else other) for r in routes}
    return [
        {"question": q, "dataset": name, "pref": dict(pref), "oracle": route, "prior": True, **marks} for q in questions
    ]


# Multi-hop sets whose raw records spell out their one-hop sub-questions: name -> the records' field.
HOP_SETS = {"2wiki": "qa_pairs"}
HOP_ROUTE = "chunk"
STRONG_ROUTE = "logic"  # the route of a question whose sub-questions are written out


def _hop_records(name: str, key: str) -> list[dict]:
    """The raw records of a HOP_SETS set after the benchmarks' first BENCHMARK_QUESTIONS."""
    import json

    from training.common.shared_data import resolve_data

    path = resolve_data(name)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)[BENCHMARK_QUESTIONS:]
    except (OSError, ValueError) as e:
        raise LogicRouteError(f"cannot read the hop priors of {name} from {path}: {e}") from None


def _sub_questions(record: dict, key: str) -> list[str]:
    return [p["question"].strip() for p in (record.get(key) or []) if (p.get("question") or "").strip()]


def _check_hop_routes(routes: Sequence[str], strength: float, *needed: str) -> None:
    _check_strength(routes, strength)
    missing = [r for r in needed if r not in routes]
    if missing:
        names = " and ".join(repr(r) for r in missing)
        raise LogicRouteError(f"hop priors name route {names}, which the labels lack ({list(routes)})")


def hop_rows(
    routes: Sequence[str], per_set: int, strength: float = 0.8, *, exclude: Iterable[str] = (), seed: int = 0
) -> list[dict]:
    """Up to `per_set` one-hop sub-questions from each set of HOP_SETS, taken from its questions
    after the benchmarks' first BENCHMARK_QUESTIONS, labelled HOP_ROUTE with `strength`. They keep
    the set's name: a leave-one-dataset-out fold that leaves the set out never sees them."""
    _check_hop_routes(routes, strength, HOP_ROUTE)
    skip = set(exclude)
    out: list[dict] = []
    for name, key in HOP_SETS.items():
        hops = [h for r in _hop_records(name, key) for h in _sub_questions(r, key)]
        pool = [q for q in dict.fromkeys(hops) if q not in skip]
        out += _drawn_rows(pool, name, HOP_ROUTE, routes, per_set, strength, seed, hop=True)
    return out


def pair_rows(
    routes: Sequence[str], per_set: int, strength: float = 0.8, *, exclude: Iterable[str] = (), seed: int = 0
) -> list[dict]:
    """Up to `per_set` questions of each set of HOP_SETS together with their own one-hop
    sub-questions: the question labelled STRONG_ROUTE, each sub-question HOP_ROUTE. Within a pair
    topic and names are the same and only the form differs ("Where was the director of The
    Prairie King born?" against "Who is the director of The Prairie King?"), which is what the
    router should learn. Marked "pair" (the sub-questions also "hop"); the seed draws questions."""
    _check_hop_routes(routes, strength, HOP_ROUTE, STRONG_ROUTE)
    skip = set(exclude)
    out: list[dict] = []
    for name, key in HOP_SETS.items():
        subs = {r["question"]: _sub_questions(r, key) for r in _hop_records(name, key) if r.get("question")}
        pool = [q for q, hops in subs.items() if hops and q not in skip]
        for row in _drawn_rows(pool, name, STRONG_ROUTE, routes, per_set, strength, seed):
            out.append({**row, "pair": True})
            hops = [h for h in dict.fromkeys(subs[row["question"]]) if h not in skip]
            out += _rows_of(hops, name, HOP_ROUTE, routes, strength, hop=True, pair=True)
    return out


LIST_SET_PREFIX = "lists_"  # the set of a corpus's list labels and list priors: lists_<corpus>
LOOKUP_ROUTE = "chunk"  # the route of a question about one value of the same corpus
_DATA = Path(__file__).resolve().parents[1] / "data"


def list_files() -> list[Path]:
    """The list-question files (training/data/global_lists/*.jsonl), one a corpus."""
    return sorted((_DATA / "global_lists").glob("*.jsonl"))


def _tune_questions(path: Path, skip: set[str]) -> list[str]:
    """The tune half's questions of a question file ([] when there is none), less `skip`."""
    from training.common.jsonl_store import read_jsonl

    rows = read_jsonl(path, strict=True)
    return [r["question"] for r in rows if r.get("half") == "tune" and r["question"] not in skip]


def list_rows(
    routes: Sequence[str],
    per_corpus: int,
    strength: float = 0.8,
    *,
    exclude: Iterable[str] = (),
    seed: int = 0,
    files: Sequence[Path] | None = None,
) -> list[dict]:
    """Up to `per_corpus` prior rows from the tune half of each list-question file, preferring
    summary (questions about a whole corpus: "Which modules document a 'close' event?"), and as
    many of the same corpus's questions about one value (training/data/docs_questions/<corpus>.jsonl,
    tune half, engine.floor.question.structure.answer_shape "value"), preferring chunk: within a
    corpus only the form differs, so the router learns the form, not the corpus's topic. The judge
    halves never train. A row's set is "lists_<corpus>", the set of that corpus's answer labels, so
    a leave-one-dataset-out fold that leaves a corpus out trains on none of its priors either."""
    from engine.floor.question.structure import answer_shape

    _check_strength(routes, strength)
    missing = sorted({LIST_ROUTE, LOOKUP_ROUTE} - set(routes))
    if missing:
        raise LogicRouteError(f"list priors need the {', '.join(missing)} route(s); the labels have {list(routes)}")
    skip = set(exclude)
    out: list[dict] = []
    for path in list_files() if files is None else files:
        name = f"{LIST_SET_PREFIX}{path.stem}"
        out += _drawn_rows(
            _tune_questions(path, skip), name, LIST_ROUTE, routes, per_corpus, strength, seed, listed=True
        )
        lookups = [q for q in _tune_questions(path.parent.parent / "docs_questions" / path.name, skip)
                   if answer_shape(q) == "value"]  # fmt: skip
        out += _drawn_rows(lookups, name, LOOKUP_ROUTE, routes, per_corpus, strength, seed, listed=True)
    return out


@dataclass
class Priors:
    """Prior rows and their router inputs, handed to the training of a router or of every
    leave-one-dataset-out fold."""

    rows: list[dict]
    x: np.ndarray

    def without(self, dataset: str) -> "Priors":
        """The priors a fold that leaves `dataset` out may train on."""
        return self.where(lambda r: r["dataset"] != dataset)

    def where(self, keep: Callable[[dict], bool]) -> "Priors":
        """The rows `keep` accepts, with their inputs."""
        kept = [i for i, r in enumerate(self.rows) if keep(r)]
        return Priors([self.rows[i] for i in kept], self.x[kept])

    def counts(self) -> dict[str, int]:
        """Rows per set; a set's hop priors apart, as '<set> hops', and its pairs as '<set> pairs'
        (list priors are the set of their corpus, lists_<corpus>)."""
        return dict(
            Counter(r["dataset"] + (" pairs" if r.get("pair") else " hops" if r.get("hop") else "") for r in self.rows)
        )


def build_priors(answer_rows: Sequence[dict], routes: Sequence[str], cfg, embedder) -> Priors | None:
    """The priors a TrainConfig asks for (cfg.prior_per_set set priors, cfg.hop_priors hop priors,
    cfg.hop_pairs pairs, cfg.list_priors list priors, all at cfg.prior_strength; None for none),
    with inputs in the config's feature set and text form."""
    from training.labels.label_arrays import inputs_for

    if not cfg.prior_per_set and not cfg.hop_priors and not cfg.hop_pairs and not cfg.list_priors:
        return None
    asked = {r["question"] for r in answer_rows}
    rows = prior_rows(routes, cfg.prior_per_set, cfg.prior_strength, exclude=asked) if cfg.prior_per_set else []
    if cfg.hop_priors:
        rows += hop_rows(routes, cfg.hop_priors, cfg.prior_strength, exclude=asked)
    if cfg.hop_pairs:
        rows += pair_rows(routes, cfg.hop_pairs, cfg.prior_strength, exclude=asked)
    if cfg.list_priors:
        rows += list_rows(routes, cfg.list_priors, cfg.prior_strength, exclude=asked)
    return Priors(rows, inputs_for(rows, embedder, cfg.features, cfg.text_form))
