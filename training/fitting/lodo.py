"""Leave-one-dataset-out: the router is trained on every data set but one and judged on the one
left out, for each data set in turn. A held-out row from a training set proves little (topic
predicts the set, and the set predicts the label); a set the router never saw does not.

Every system is judged on the same left-out rows with the label files' own per-route scores
and costs: the router (the MLP's argmax, and summary where its list gate fires on a question the
summary route's global mode answered), a logistic regression on the same inputs and labels, the
majority route of the training sets, each fixed route, and the oracle. On rows labelled with
the cascade schedule (label --stop-score), a route that was not run carries the upper bound of
its score, so "always <costlier route>" is an upper bound there.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from engine.core.routes.summary_config import GLOBAL_MODE
from engine.floor.base.errors import LogicRouteError
from training.fitting.eval_router import logreg_fit_proba, majority_route
from training.fitting.fit import TrainConfig, fit, specialist_config
from training.fitting.list_gate_fit import is_list_row, split_off_lists
from training.fitting.lodo_cascade import (
    CHUNK_CASCADE,
    ESCALATING,
    RETRY_CASCADE,
    ROUTER_CASCADE,
    ROUTER_FORMS,
    ROUTER_RETRY,
    ROUTER_RETRY_LOGIC,
    STRONG,
    confidence_of,
    escalation_systems,
    logic_gain_ranking,
)
from training.fitting.retrieval_signals import row_signals
from training.fitting.set_priors import Priors, build_priors
from training.fitting.train import fit_router, trained_on
from training.labels.label_arrays import (
    inputs_for,
    load_label_files,
    routes_of,
    split_keys,
    stratified_split,
    training_targets,
)
from training.labels.labels import route_cost

FIXED = "always {}"
LLM_ROUTER = "LLM router"


def _systems(routes: Sequence[str], with_llm: bool = False, with_confidence: bool = False) -> list[str]:
    return [
        "router",
        *([ROUTER_FORMS, ROUTER_RETRY, ROUTER_RETRY_LOGIC] if STRONG in routes else []),
        *([ROUTER_CASCADE, CHUNK_CASCADE, RETRY_CASCADE] if with_confidence else []),
        "logreg",
        "majority",
        *([LLM_ROUTER] if with_llm else []),
        *(FIXED.format(r) for r in routes),
        "oracle",
    ]


def _fold_decisions(
    x: np.ndarray, rows: list[dict], test: list[int], routes: Sequence[str], cfg, dim: int, priors: Priors | None
):
    """(each system's route for every test row, the router, its probabilities on the test rows),
    trained on the other rows (the router also on the priors of the other sets). The list
    questions' rows train the fold's list gate, not its MLP, as in train_generalist; the router
    is both: the MLP's argmax, or summary where the gate fires."""
    held = set(test)
    train = [i for i in range(len(rows)) if i not in held and trained_on(rows[i], cfg)]
    fold_priors = priors.without(str(rows[test[0]]["dataset"])) if priors is not None else None
    gate, mlp, mlp_priors = split_off_lists(x[train], [rows[i] for i in train], fold_priors, dim, cfg.seed)
    train = [train[i] for i in mlp]
    train_rows = [rows[i] for i in train]
    model = fit_router(x[train], train_rows, routes, cfg, dim, priors=mlp_priors)[0]
    probs = model.predict_proba(x[test])
    lr = logreg_fit_proba(x[train], [r["oracle"] for r in train_rows], x[test], routes)
    maj = majority_route(train_rows, routes)
    questions = [rows[i]["question"] for i in test]
    fired = gate.fires(x[test, :dim], questions) if gate is not None else [None] * len(test)
    # as router.kb_router keeps it: only where the summary route answers in its global mode (a KB of
    # documents); every other label set's KB is one of single passages
    on = [rows[i].get("summary_mode") == GLOBAL_MODE for i in test]
    systems = router_systems(probs, routes, questions, fired, on)
    out = {
        "router": systems.pop("router"),
        "logreg": [routes[i] for i in lr.argmax(1)],
        "majority": [maj] * len(test),
        "oracle": [rows[i]["oracle"] for i in test],
    }
    out |= systems
    for r in routes:
        out[FIXED.format(r)] = [r] * len(test)
    return out, model, probs


def router_systems(
    probs: np.ndarray, routes: Sequence[str], questions: Sequence[str], fired: Sequence, on: Sequence[bool]
) -> dict[str, list[str]]:
    """The fold's router as the product decides (engine.core.decide.Decider, no guard): "router", the
    MLP's argmax and the list gate (`fired`: its probability where it fires; `on`: where the
    label set's KB keeps it); ROUTER_FORMS, the form stage on top where logic is a route."""
    from engine.core.decide import Decider, FormStage, Learned

    out = {}
    for name, forms in (("router", False), (ROUTER_FORMS, True)):
        if forms and STRONG not in routes:
            continue
        decider = Decider(form=FormStage(on=forms))
        out[name] = [
            decider.decide(Learned(dict(zip(routes, map(float, p))), None, g if o else None), q).route
            for p, q, g, o in zip(probs, questions, fired, on)
        ]
    return out


def _specialist(
    model, x: np.ndarray, rows: list[dict], test: list[int], routes: Sequence[str], n_tune: int, recipe: TrainConfig
) -> dict:
    """The fold's generalist fine-tuned (specialist_config) on the first `n_tune` left-out rows,
    both judged on the left-out rows after them."""
    tune, rest = test[:n_tune], test[n_tune:]
    cfg = specialist_config()
    tune = [i for i in tune if trained_on(rows[i], recipe) and not is_list_row(rows[i])]  # as train_specialist
    tune_rows, rest_rows = [rows[i] for i in tune], [rows[i] for i in rest]
    t, o = training_targets(tune_rows, routes, cfg.all_zero, recipe.cost_weight)
    tr, va = stratified_split(split_keys(tune_rows), cfg.val_frac, cfg.seed)
    spec = copy.deepcopy(model)  # the generalist's input normalization: same input space
    xt = x[tune]
    fit(spec, xt[tr], t[tr], xt[va], t[va], o[va], cfg, keep_initial=True)
    out = {"n_tune": len(tune)}
    for name, m in (("generalist", model), ("specialist", spec)):
        out[name] = judge(rest_rows, [routes[i] for i in m.predict_proba(x[rest]).argmax(1)], routes)
    for r in routes:
        out[FIXED.format(r)] = judge(rest_rows, [r] * len(rest), routes)
    out["oracle"] = judge(rest_rows, [row["oracle"] for row in rest_rows], routes)
    return out


def judge(
    rows: Sequence[dict], decisions: Sequence[str], routes: Sequence[str], overhead: Sequence[dict] | None = None
) -> dict:
    """Mean label score (the answer metric), mean tokens, LLM calls and route shares of `decisions`;
    `overhead` (per row: tokens, llm_calls) is what deciding cost on top of the answer."""
    n = max(len(rows), 1)
    cost = [row["costs"][d] for row, d in zip(rows, decisions)]
    extra = overhead or [{}] * len(cost)
    return {
        "n": len(rows),
        "score": round(100 * sum(row["scores"][d] for row, d in zip(rows, decisions)) / n, 1),
        "tokens": round(sum(route_cost(c) + e.get("tokens", 0) for c, e in zip(cost, extra)) / n, 1),
        "llm_calls": round(
            sum(
                float(c.get("llm_calls", c.get("llm_calls_est", 1))) + e.get("llm_calls", 0)
                for c, e in zip(cost, extra)
            )
            / n,
            2,
        ),
        "agreement": round(sum(d == row["oracle"] for row, d in zip(rows, decisions)) / n, 3),
        "shares": {r: round(sum(d == r for d in decisions) / n, 3) for r in routes},
    }


def lodo_report(
    label_files: Sequence[str | Path],
    cfg: TrainConfig | None = None,
    *,
    embedder=None,
    specialist_n: int = 0,
    llm=None,
    seeds: Sequence[int] = (),
    kb_root: str | Path | None = None,
    progress: bool = False,
) -> dict:
    """Per left-out data set and pooled over all of them: every system's score, tokens and route
    shares on the left-out rows. specialist_n > 0: also fine-tune each fold's router on that many
    of the left-out set's rows and judge generalist and specialist on the rows after them.
    llm: also judge that LLM as router (one call per row). seeds: also retrain the router of
    every fold with each of these seeds ("seed_spread"): one seed's figure can sit far from the
    recipe's typical one. kb_root: the labels' KBs, for the retrieval signals' ranking check."""
    cfg = cfg or TrainConfig()
    rows = load_label_files(label_files)
    routes = list(routes_of(rows))
    datasets = sorted({str(r["dataset"]) for r in rows})
    if len(datasets) < 2:
        raise LogicRouteError(f"leave-one-dataset-out needs labels of 2+ data sets, got {datasets}")
    if embedder is None:
        from engine.floor.embedder import get_embedder

        embedder = get_embedder()
    signals = row_signals(rows, kb_root, embedder) if kb_root is not None else {}  # a missing KB fails first
    x = inputs_for(rows, embedder, cfg.features, cfg.text_form)
    priors = build_priors(rows, routes, cfg, embedder)
    asked = _llm_decisions(llm, rows, routes, progress) if llm is not None else None
    with_confidence = "chunk" in routes and STRONG in routes and any(confidence_of(r, "chunk") for r in rows)
    systems = _systems(routes, with_llm=asked is not None, with_confidence=with_confidence)
    run = _LodoRun(x, rows, routes, cfg, int(embedder.dim), priors, asked, systems, specialist_n, progress)
    report: dict = {"routes": routes, "label_files": [str(f) for f in label_files], "config": asdict(cfg)}
    report["held_out"] = {}
    if priors is not None:
        report["priors"] = priors.counts()  # per set; a fold trains on those of its training sets
    folds = {d: [i for i, r in enumerate(rows) if str(r["dataset"]) == d] for d in datasets}
    pooled = _run_folds(run, folds, report)
    report["pooled"] = {
        s: _judge_system(s, rows, pooled.index, pooled.decided[s], routes, asked, pooled.paid.get(s) or None)
        for s in systems
    }
    if run.rank_logic:
        sets = [*((d, folds[d]) for d in folds), ("pooled", pooled.index)]
        report["logic_gain_ranking"] = _ranking(rows, sets, pooled.p_strong, signals)
    if asked is not None:
        report["llm_router_errors"] = sum(a["error"] is not None for a in asked)
    if seeds:
        known = {cfg.seed: pooled.routed}
        report["seed_spread"] = seed_spread(x, rows, folds, routes, cfg, run.dim, seeds, progress, known, priors)
    return report


@dataclass(frozen=True)
class _LodoRun:
    """What every fold of lodo_report shares: the rows and their inputs, the recipe, the systems judged."""

    x: np.ndarray
    rows: list[dict]
    routes: list[str]
    cfg: TrainConfig
    dim: int
    priors: Priors | None
    asked: list[dict] | None  # the LLM router's decisions, one per row
    systems: list[str]
    specialist_n: int
    progress: bool

    @property
    def rank_logic(self) -> bool:
        return STRONG in self.routes and "chunk" in self.routes


@dataclass
class _Pooled:
    """The folds' left-out decisions, pooled fold after fold."""

    decided: dict[str, list]
    paid: dict[str, list]  # cheap attempts redone
    index: list[int] = field(default_factory=list)  # the left-out rows, fold after fold
    routed: dict[str, list[str]] = field(default_factory=dict)  # the router's decisions per fold at the recipe's seed
    p_strong: np.ndarray | None = None  # the router's left-out P(logic), for the ranking check


def _run_folds(run: _LodoRun, folds: dict[str, list[int]], report: dict) -> _Pooled:
    """Each fold in turn: its systems judged into `report` (held_out, confidence_thresholds,
    specialist), its decisions pooled."""
    pooled = _Pooled({s: [] for s in run.systems}, {s: [] for s in ESCALATING}, p_strong=np.zeros(len(run.rows)))
    for d, test in folds.items():
        decided, fold_paid = _one_fold(run, d, test, report, pooled)
        for s in run.systems:
            pooled.decided[s].extend(decided[s])
        for s, o in fold_paid.items():
            pooled.paid[s].extend(o)
        pooled.index.extend(test)
    return pooled


def _one_fold(run: _LodoRun, d: str, test: list[int], report: dict, pooled: _Pooled) -> tuple[dict, dict]:
    """Train without `d`, judge every system on its rows into `report`; (the decisions, the cheap attempts redone)."""
    rows, routes, asked = run.rows, run.routes, run.asked
    if run.progress:
        print(f"leaving out {d}: {len(test)} rows, training on {len(rows) - len(test)}", flush=True)
    decided, model, probs = _fold_decisions(run.x, rows, test, routes, run.cfg, run.dim, run.priors)
    pooled.routed[d] = decided["router"]
    if run.rank_logic:
        pooled.p_strong[test] = probs[:, routes.index(STRONG)]
    if asked is not None:
        decided[LLM_ROUTER] = [asked[i]["route"] for i in test]
    fold_paid: dict[str, list] = {}
    t = escalation_systems(rows, test, decided, fold_paid, run.systems)
    if t is not None:
        report.setdefault("confidence_thresholds", {})[d] = t
    if 0 < run.specialist_n < len(test) - 1:
        specialist = _specialist(model, run.x, rows, test, routes, run.specialist_n, run.cfg)
        report.setdefault("specialist", {})[d] = specialist
    report["held_out"][d] = {
        s: _judge_system(s, rows, test, decided[s], routes, asked, fold_paid.get(s)) for s in run.systems
    }
    return decided, fold_paid


def seed_spread(
    x: np.ndarray,
    rows: list[dict],
    folds: dict[str, list[int]],
    routes: Sequence[str],
    cfg,
    dim: int,
    seeds,
    progress,
    known: dict[int, dict[str, list[str]]] | None = None,
    priors: Priors | None = None,
) -> dict:
    """The router's LODO judgement (pooled: every figure; per left-out set: the score) for each
    seed. known: per seed, per fold, router decisions already made (training is deterministic,
    so a seed is not trained twice)."""
    known = known or {}
    out: dict = {"seeds": [int(s) for s in seeds], "pooled": [], "held_out": {d: [] for d in folds}}
    for seed in out["seeds"]:
        decided, index = [], []
        for d, test in folds.items():
            got = known.get(seed, {}).get(d)
            if got is None:
                if progress:
                    print(f"seed {seed}: leaving out {d}", flush=True)
                got = _fold_decisions(x, rows, test, routes, replace(cfg, seed=seed), dim, priors)[0]["router"]
            out["held_out"][d].append(judge([rows[i] for i in test], got, routes)["score"])
            decided.extend(got)
            index.extend(test)
        out["pooled"].append(judge([rows[i] for i in index], decided, routes))
    out["scores"] = [p["score"] for p in out["pooled"]]
    scores = np.array(out["scores"])
    out["mean"], out["std"] = round(float(scores.mean()), 1), round(float(scores.std()), 1)
    out["min"], out["max"] = float(scores.min()), float(scores.max())
    return out


def _ranking(rows, sets, p_strong: np.ndarray, signals: dict) -> dict:
    """The ranking check per left-out set and pooled, of P(logic) and of every signal given."""
    return {
        d: logic_gain_ranking([rows[i] for i in ix], p_strong[ix], {s: v[ix] for s, v in signals.items()})
        for d, ix in sets
    }


def _judge_system(system: str, rows, index, decisions, routes, asked, paid=None) -> dict:
    """`system`'s `decisions` on rows[index]; the LLM router also pays for its calls, an
    escalation system for its cheap attempts (`paid`)."""
    overhead = [asked[i] for i in index] if system == LLM_ROUTER else paid
    return judge([rows[i] for i in index], decisions, routes, overhead)


def _llm_decisions(llm, rows: Sequence[dict], routes: Sequence[str], progress: bool) -> list[dict]:
    """The LLM router's route for every row, with its call's cost (a failed call: the cheapest route)."""
    from engine.floor.base.progress import progress_bar
    from training.fitting.llm_router import llm_route

    out = []
    with progress_bar(len(rows), "LLM router", "q", requested=progress) as shown:
        for row in rows:
            d = llm_route(llm, row["question"], routes)
            out.append(
                {"route": d.route, "error": d.error, "tokens": d.usage.total_tokens, "llm_calls": d.usage.llm_calls}
            )
            shown.update(1)
    return out
