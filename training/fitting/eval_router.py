"""Judging routing decisions on held-out label files.

Per split and overall: the decision metrics of training.fitting.route_metrics (accuracy against the
oracle route, macro-F1 over routes, confusion matrix, route distribution per dataset,
preference mass and label score of the routes chosen). Baselines: the majority oracle route of
the training labels, a logistic regression on the very same inputs (sklearn), each fixed
route, and optionally the LLM as router (training.fitting.llm_router), timed. Speed: one decision
(embed + MLP, embedding cache off) and batch throughput.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from engine.floor.base.errors import LogicRouteError
from training.fitting.llm_router import llm_route
from training.fitting.route_metrics import routing_metrics
from training.labels.label_arrays import inputs_for, load_label_files, routes_of
from training.labels.labels import card_label_paths


def _brief(m: dict) -> dict:
    return {k: m[k] for k in ("n", "accuracy", "macro_f1", "quality", "score", "cost", "route_share") if k in m}


def majority_route(train_rows: Sequence[dict], routes: Sequence[str]) -> str:
    counts = {r: 0 for r in routes}
    for r in train_rows:
        counts[r["oracle"]] += 1
    return max(routes, key=lambda r: counts[r])  # ties -> the earlier (cheaper) route


def logreg_fit_proba(
    x_train: np.ndarray, y_train: Sequence[str], x_test: np.ndarray, routes: Sequence[str]
) -> np.ndarray:
    """Logistic regression on the router's own inputs (standardized), the linear baseline:
    (n, routes) class probabilities (0 for a route never seen in training)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    out = np.zeros((len(x_test), len(routes)))
    if len(set(y_train)) < 2:
        out[:, list(routes).index(y_train[0])] = 1.0
        return out
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=3000, C=0.1))
    clf.fit(x_train, list(y_train))
    for j, c in enumerate(clf.classes_):
        out[:, list(routes).index(c)] = clf.predict_proba(x_test)[:, j]
    return out


def card_label_files(card: dict | None) -> list[str]:
    """The training label files a router's card lists that are still on disk."""
    return [str(p) for p in card_label_paths(card)]


def logreg_router_probs(router, questions: Sequence[str]) -> list[dict[str, float]] | None:
    """The logistic-regression baseline as a router: fitted on the oracle routes of the label
    files the router's card lists (same inputs: embedding + cheap features), scoring `questions`.
    None when the card lists no label file that is still on disk."""
    files = card_label_files(router.card)
    if not files or not questions:
        return None
    train = load_label_files(files)
    routes = list(router.routes)
    x_train = inputs_for(train, router.embedder, router.features, router.model.config.text_form)
    x = inputs_for(
        [{"question": q} for q in questions], router.embedder, router.features, router.model.config.text_form
    )
    p = logreg_fit_proba(x_train, [r["oracle"] for r in train], x, routes)
    return [{r: float(v) for r, v in zip(routes, row)} for row in p]


def decisions_at_share(probs: np.ndarray, routes: Sequence[str], share: float, gated: str = "logic") -> list[str]:
    """The threshold policy at a logic share: the top `share` by P(gated) go there, the
    rest to the likelier other route: the Decider's threshold stage alone, calibrated on these rows."""
    from engine.core.decide import Decider, FormStage, ListGateStage, ThresholdStage

    g = list(routes).index(gated)
    stage = ThresholdStage(logic_share=share, route=gated).calibrated(probs[:, g])
    decider = Decider(threshold=stage, list_gate=ListGateStage(on=False), form=FormStage(on=False))
    return [decider.route(dict(zip(routes, map(float, row)))) for row in probs]


SHARES = (0.1, 0.2, 0.3, 0.5)


def share_curve(probs: np.ndarray, rows: Sequence[dict], routes: Sequence[str], gated: str = "logic") -> dict:
    """Label score and cost when a calibrated threshold sends 10/20/30/50% to `gated`: how
    well P(gated) ranks the questions that need it (RouteLLM's quality-at-cost view)."""
    out = {}
    for s in SHARES:
        m = routing_metrics(decisions_at_share(probs, routes, s, gated), rows, routes)
        out[f"{s:.0%}"] = {"score": m["score"], "cost": m["cost"], "quality": m["quality"]}
    return out


def logic_auc(probs: np.ndarray, rows: Sequence[dict], routes: Sequence[str], gated: str = "logic") -> float | None:
    """ROC AUC of P(gated) for 'the oracle route is gated'."""
    from sklearn.metrics import roc_auc_score

    y = [r["oracle"] == gated for r in rows]
    if len(set(y)) < 2:
        return None
    return round(float(roc_auc_score(y, probs[:, list(routes).index(gated)])), 4)


def evaluate_predictions(
    model,
    train_rows: Sequence[dict],
    x_train: np.ndarray,
    test_rows: Sequence[dict],
    x_test: np.ndarray,
    routes: Sequence[str],
) -> dict:
    """Router (argmax, eval mode) vs baselines on test rows. model: a RouterMLP."""
    routes = list(routes)
    probs = model.predict_proba(x_test) if len(x_test) else np.zeros((0, len(routes)))
    pred = [routes[i] for i in probs.argmax(1)]
    router = routing_metrics(pred, test_rows, routes)
    maj = majority_route(train_rows, routes)
    lr_probs = logreg_fit_proba(x_train, [r["oracle"] for r in train_rows], x_test, routes)
    baselines = {
        f"majority ({maj})": _brief(routing_metrics([maj] * len(test_rows), test_rows, routes)),
        "logreg": _brief(routing_metrics([routes[i] for i in lr_probs.argmax(1)], test_rows, routes)),
    }
    for r in routes:
        baselines[f"always {r}"] = _brief(routing_metrics([r] * len(test_rows), test_rows, routes))
    baselines["oracle"] = _brief(routing_metrics([r["oracle"] for r in test_rows], test_rows, routes))
    out = {"router": router, "baselines": baselines}
    if "logic" in routes and len(test_rows):
        out["logic_auc"] = {
            "router": logic_auc(probs, test_rows, routes),
            "logreg": logic_auc(lr_probs, test_rows, routes),
        }
        out["share_curve"] = {
            "router": share_curve(probs, test_rows, routes),
            "logreg": share_curve(lr_probs, test_rows, routes),
        }
    return out


# ---------------------------------------------------------------- speed


def uncached_router(router):
    """The same router over an embedder with its cache off (timing must embed for real)."""
    from engine.floor.embedder import Embedder
    from router.checkpoint import Router

    emb = router.embedder
    if isinstance(emb, Embedder):
        emb = Embedder(emb.spec, cache=False)  # shares the loaded weights (per-process model registry)
    return Router(router.model, router.card, emb, router.path, guard=router.guard, gate=router.gate)


def measure_speed(router, questions: Sequence[str], n_single: int = 50, batch: int = 256) -> dict:
    """Latency of one decision (embed + features + MLP + argmax) and batch throughput."""
    import torch

    from engine.core.decide import Decider

    r, decider = uncached_router(router), Decider()
    qs = list(questions) or ["Who wrote Hamlet?"]
    for q in qs[:3]:  # warm-up: model load, allocator, thread pools
        decider.decide_many(r, [q])
    times = []
    for i in range(n_single):
        t0 = time.perf_counter()
        decider.decide_many(r, [qs[i % len(qs)]])
        times.append(time.perf_counter() - t0)
    x = r.inputs(qs[:1])
    mlp = []
    for _ in range(200):
        t0 = time.perf_counter()
        r.model.predict_proba(x)
        mlp.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    done = 0
    for s in range(0, len(qs), batch):
        r.probs_array(qs[s : s + batch])
        done += len(qs[s : s + batch])
    total = time.perf_counter() - t0
    ts = sorted(times)
    return {
        "single_decision_ms_median": round(1000 * statistics.median(ts), 2),
        "single_decision_ms_p90": round(1000 * ts[int(0.9 * (len(ts) - 1))], 2),
        "mlp_only_ms_median": round(1000 * statistics.median(mlp), 3),
        "batch_questions": done,
        "batch_throughput_qps": round(done / total, 1) if total > 0 else None,
        "torch_threads": torch.get_num_threads(),
    }


def llm_route_baseline(llm, rows: Sequence[dict], routes: Sequence[str]) -> dict:
    """Ask the LLM to pick the route of each row's question (training.fitting.llm_router), timed; a
    failed or invalid pick counts in "failed" and falls back to the cheapest route."""
    pred, secs, failed, tokens = [], [], 0, 0
    for r in rows:
        d = llm_route(llm, r["question"], routes)
        secs.append(d.seconds)
        tokens += d.usage.total_tokens
        choice = d.route
        if d.error or choice not in routes:
            failed += 1
            choice = routes[0]
        pred.append(choice)
    m = _brief(routing_metrics(pred, rows, routes))
    m.update(
        {
            "failed": failed,
            "seconds_median": round(statistics.median(secs), 3) if secs else None,
            "tokens_per_decision": round(tokens / max(len(rows), 1), 1),
            "llm": llm.name,
        }
    )
    return m


# ---------------------------------------------------------------- the whole report


def evaluate_checkpoint(
    checkpoint: str | Path | None,
    label_files: Sequence[str | Path],
    *,
    train_files: Sequence[str | Path] = (),
    embedder=None,
    llm=None,
    n_single: int = 50,
    speed: bool = True,
) -> dict:
    """Report for a checkpoint on held-out label files, split by file and overall."""
    from router.checkpoint import load_router

    router = load_router(checkpoint, embedder=embedder)
    routes = list(router.routes)
    test_rows = load_label_files(label_files)
    if list(routes_of(test_rows)) != routes:
        raise LogicRouteError(f"labels have routes {list(routes_of(test_rows))}, the router {routes}")
    if not train_files:  # the card remembers its training labels: reuse them when still there
        train_files = card_label_files(router.card)
    train_rows = load_label_files(train_files) if train_files else []
    feats = router.features
    x_test = inputs_for(test_rows, router.embedder, feats, router.model.config.text_form)
    x_train = (
        inputs_for(train_rows, router.embedder, feats, router.model.config.text_form)
        if train_rows
        else np.zeros((0, x_test.shape[1]))
    )
    report: dict = {
        "checkpoint": str(router.path),
        "routes": routes,
        "train_files": [str(p) for p in train_files],
        "splits": {},
    }
    groups = {"overall": list(range(len(test_rows)))}
    for f in label_files:
        groups[Path(f).name] = [i for i, r in enumerate(test_rows) if r["_file"] == str(f)]
    for name, idx in groups.items():
        rows = [test_rows[i] for i in idx]
        if train_rows:
            report["splits"][name] = evaluate_predictions(router.model, train_rows, x_train, rows, x_test[idx], routes)
        else:
            probs = router.model.predict_proba(x_test[idx])
            report["splits"][name] = {"router": routing_metrics([routes[i] for i in probs.argmax(1)], rows, routes)}
    if llm is not None:
        report["llm_baseline"] = llm_route_baseline(llm, test_rows, routes)
    if speed:
        report["speed"] = measure_speed(router, [r["question"] for r in test_rows], n_single=n_single)
    return report


def format_report(rep: dict) -> str:
    lines = [f"checkpoint {rep['checkpoint']}  routes {rep['routes']}"]
    for name, s in rep["splits"].items():
        m = s["router"]
        lines.append(
            f"\n[{name}] n={m['n']}  router: acc {m['accuracy']:.3f}  macro-F1 {m['macro_f1']:.3f}  "
            f"quality {m['quality']:.3f}  score {m['score']:.3f} (oracle {m['oracle_score']:.3f})  "
            f"share {m['route_share']}"
        )
        for b, bm in s.get("baselines", {}).items():
            lines.append(
                f"    {b:<22} acc {bm['accuracy']:.3f}  macro-F1 {bm['macro_f1']:.3f}  "
                f"quality {bm['quality']:.3f}  score {bm['score']:.3f}"
            )
        if "logic_auc" in s:
            a = s["logic_auc"]
            lines.append(f"    AUC of P(logic) for 'oracle = logic': router {a['router']}  logreg {a['logreg']}")
            for who, curve in s["share_curve"].items():
                lines.append(
                    f"    {who:<7} score/cost at logic share "
                    + "  ".join(f"{k}: {v['score']:.3f}/{v['cost']:.0f}" for k, v in curve.items())
                )
        if name == "overall":
            cm = m["confusion"]
            lines.append(f"    confusion (rows decision, cols oracle) {cm['labels']}: {cm['matrix']}")
            for ds, d in m.get("per_dataset", {}).items():
                lines.append(
                    f"    {ds:<10} n={d['n']:<4} acc {d['accuracy']:.3f}  decisions {d['route_share']}  "
                    f"oracle {d['oracle_share']}"
                )
    if "llm_baseline" in rep:
        b = rep["llm_baseline"]
        lines.append(
            f"\nLLM as router ({b['llm']}): acc {b['accuracy']:.3f}  macro-F1 {b['macro_f1']:.3f}  "
            f"{b['seconds_median']} s/decision (median), {b['failed']} failed, share {b['route_share']}"
        )
    if "speed" in rep:
        s = rep["speed"]
        lines.append(
            f"\nspeed: one decision {s['single_decision_ms_median']} ms median "
            f"(p90 {s['single_decision_ms_p90']} ms; MLP alone {s['mlp_only_ms_median']} ms), "
            f"batch {s['batch_throughput_qps']} q/s over {s['batch_questions']} questions, "
            f"{s['torch_threads']} torch threads"
        )
    return "\n".join(lines)
