"""The routing benchmark's analysis: every routing system's per-question results, built from the
fixed routes' rows (nothing is answered twice), tables per dataset and pooled, confusion
matrices against the oracle, and the cost-quality analysis. Pure: reads rows, runs nothing.

Systems
- fixed routes (chunk, summary, logic);
- router: the trained MLP, argmax, and at P(logic) thresholds (router.policy);
- logreg: logistic regression on the router's own training labels and inputs (argmax);
- router+escalate: escalation's text rule replayed on the fixed rows;
- router+check: the text rule and the structured self-check, replayed (training/bench/bench_cascade.py);
- router+confidence: the text rule, and a cheap answer whose confidence (the model's own
  certainty, recorded in its row) is below BenchConfig.escalate_below, answered again by logic;
- oracle: per question the route with the best score (ties: fewer tokens, then the cheaper
  route);
- random: routes drawn (seeded) with the router's route shares;
- llm_router: the route the LLM chose; its call's tokens and latency are added to the answer
  it picks.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from training.bench.bench_cascade import check_system
from training.bench.bench_data import BenchConfig, Item
from training.bench.cost_quality import cost_quality
from training.common.answer_scores import METRICS
from training.fitting.route_metrics import confusion

STRONG, WEAK = "logic", "chunk"
COSTS = ("llm_calls", "prompt_tokens", "completion_tokens", "seconds", "llm_seconds_uncached")


def summarize(results: Sequence[dict], routes: Sequence[str]) -> dict:
    """Means of the per-question results of one system in one scope."""
    n = len(results)
    if n == 0:
        return {"n": 0}

    def mean(key: str) -> float:
        return sum(float(r.get(key) or 0.0) for r in results) / n

    out: dict[str, Any] = {"n": n}
    for m in METRICS:
        out[m] = mean(m)
    for c in COSTS:
        out[c] = mean(c)
    out["routes"] = {r: sum(1 for x in results if x.get("route") == r) / n for r in routes}
    out["errors"] = sum(1 for x in results if x.get("error"))
    out["cached_calls"] = sum(int(x.get("cached_calls") or 0) for x in results)
    return out


def oracle_choice(rows: dict[str, dict], metric: str, routes: Sequence[str]) -> str:
    """Best route by `metric`; ties go to fewer tokens, then the cheaper route."""
    return max(
        routes,
        key=lambda r: (
            float(rows[r].get(metric) or 0.0),
            -(int(rows[r].get("prompt_tokens") or 0) + int(rows[r].get("completion_tokens") or 0)),
            -routes.index(r),
        ),
    )


def _restricted(p: dict[str, float], routes: Sequence[str]) -> dict[str, float]:
    """Probabilities over the routes that were run, in their order (ties: cheaper)."""
    return {r: float(p.get(r, 0.0)) for r in routes}


@dataclass
class Systems:
    """Each system's route per question, and what a decision costs beyond the answer."""

    choices: dict[str, dict[str, str]]  # system -> item key -> route
    overhead: dict[str, dict[str, dict]] = field(default_factory=dict)  # system -> key -> routing cost row
    escalated: dict[str, dict[str, str]] = field(default_factory=dict)  # system -> key -> cheap route tried first


def router_choices(
    probs: dict[str, dict[str, float]], routes: Sequence[str], texts: dict[str, str] | None = None
) -> dict[str, str]:
    """The router's argmax route per item key, among the routes that were run; with the
    questions' `texts`, the form stage applies as in the product (engine.core.decide.Decider)."""
    from engine.core.decide import Decider, ListGateStage

    decider, texts = Decider(list_gate=ListGateStage(on=False)), texts or {}  # no gate probability is stored
    return {k: decider.route(_restricted(p, routes), texts.get(k)) for k, p in probs.items()}


def _router_systems(
    s: Systems,
    cfg: BenchConfig,
    keys: list[str],
    routes: list[str],
    probs: dict[str, dict[str, float]],
    router_seconds: float | None,
    baseline_probs: dict[str, dict[str, dict[str, float]]],
    texts: dict[str, str],
) -> None:
    from engine.core.decide import Decider, ListGateStage

    decider = Decider(list_gate=ListGateStage(on=False))
    if probs:
        s.choices["router"] = router_choices({k: probs[k] for k in keys}, routes, texts)
        s.choices["router, no form policy"] = router_choices({k: probs[k] for k in keys}, routes)
        s.overhead["router"] = {k: {"seconds": router_seconds or 0.0} for k in keys}
        s.overhead["router, no form policy"] = s.overhead["router"]
        if "logic" in routes and len(routes) > 1:
            for t in cfg.thresholds:
                swept, name = decider.with_threshold(t, "logic"), f"router@{t:.2f}"
                # the threshold is on the router's own P(logic); the rest by argmax
                s.choices[name] = {
                    k: swept.route({**_restricted(probs[k], routes), "logic": probs[k].get("logic", 0.0)}, texts.get(k))
                    for k in keys
                }
                s.overhead[name] = s.overhead["router"]
    for name, bp in baseline_probs.items():  # other scoring routers (logreg), argmax
        s.choices[name] = {k: decider.route(_restricted(bp[k], routes)) for k in keys}
        s.overhead[name] = s.overhead.get("router", {k: {"seconds": 0.0} for k in keys})


def _replay_escalation(s: Systems, name: str, keys: list[str], per_route: dict[str, dict], unsure) -> None:
    """`name`: the router's route, except that a cheap answer whose row `unsure(row)` calls
    unanswered is answered again by logic and pays for both."""
    s.choices[name], first = {}, s.escalated.setdefault(name, {})
    for k in keys:
        r = s.choices["router"][k]
        if r != STRONG and unsure(per_route[k][r]):
            first[k] = r
            r = STRONG
        s.choices[name][k] = r
    s.overhead[name] = s.overhead["router"]


def _escalation_systems(
    s: Systems, cfg: BenchConfig, keys: list[str], routes: list[str], per_route: dict[str, dict]
) -> None:
    """Escalation replayed on the fixed rows. router+escalate: the text rule (engine.core.pipeline), a
    cheap answer that says it does not know. router+confidence, when the rows carry the model's
    certainty (the local model reports one): the text rule, or a confidence below
    cfg.escalate_below."""
    from engine.core.pipeline import looks_unanswered

    if "router" not in s.choices or STRONG not in routes:
        return

    def says_unknown(row: dict) -> bool:
        return looks_unanswered(str(row.get("pred") or "")) is not None

    def unsure(row: dict) -> bool:
        conf = row.get("confidence")
        return (conf is not None and conf < cfg.escalate_below) or says_unknown(row)

    _replay_escalation(s, "router+escalate", keys, per_route, says_unknown)
    if any(row.get("confidence") is not None for k in keys for r, row in per_route[k].items() if r != STRONG):
        _replay_escalation(s, "router+confidence", keys, per_route, unsure)


def _random_system(s: Systems, cfg: BenchConfig, keys: list[str], routes: list[str], notes: list[str]) -> None:
    """Random routing with the router's shares (uniform without a router), seeded."""
    if "router" in s.choices:
        counts = [sum(1 for k in keys if s.choices["router"][k] == r) for r in routes]
    else:
        counts = [1] * len(routes)
        notes.append("random: uniform route shares (no router to copy shares from)")
    rng = random.Random(cfg.seed)
    s.choices["random"] = dict(
        zip(keys, rng.choices(routes, weights=counts, k=len(keys)) if sum(counts) else [routes[0]] * len(keys))
    )


def build_systems(
    cfg: BenchConfig,
    keys: list[str],
    routes: list[str],
    per_route: dict[str, dict],
    oracle: dict[str, str],
    probs: dict[str, dict[str, float]],
    router_seconds: float | None,
    llm_routes: dict[str, dict],
    baseline_probs: dict[str, dict[str, dict[str, float]]],
    notes: list[str],
    checks: dict[str, dict] | None = None,
    texts: dict[str, str] | None = None,
) -> Systems:
    """Every system's choices, in report order. `checks`: the replayed self-checks per item
    key (training.bench.bench_cascade); None = no router+check system."""
    s = Systems(choices={r: {k: r for k in keys} for r in routes})
    _router_systems(s, cfg, keys, routes, probs, router_seconds, baseline_probs, texts or {})
    _escalation_systems(s, cfg, keys, routes, per_route)
    if checks is not None and "router+escalate" in s.choices:
        check_system(s, keys, per_route, checks, cfg.metric, notes)
    s.choices["oracle"] = oracle
    _random_system(s, cfg, keys, routes, notes)
    if llm_routes:
        s.choices["llm_router"] = {
            k: llm_routes[k]["route"] if llm_routes[k]["route"] in routes else routes[0] for k in keys
        }
        s.overhead["llm_router"] = {k: llm_routes[k] for k in keys}
    return s


def system_result(s: Systems, per_route: dict[str, dict], system: str, k: str) -> dict:
    """One system's result on one question: the chosen route's row plus the routing cost (the
    LLM router's call, the MLP's seconds, router+check's self-check) and, after an escalation,
    the first attempt's cost."""
    r = s.choices[system][k]
    row = per_route[k][r]
    res = {m: float(row.get(m) or 0.0) for m in METRICS}
    for c in ("llm_calls", "prompt_tokens", "completion_tokens", "seconds", "cached_calls", "llm_seconds_uncached"):
        res[c] = float(row.get(c) or 0.0)
    res["route"], res["error"] = r, row.get("error")
    extras = [s.overhead.get(system, {}).get(k)]
    first = s.escalated.get(system, {}).get(k)
    if first is not None:
        extras.append(per_route[k][first])
    for extra in filter(None, extras):
        for c in COSTS:
            res[c] += float(extra.get(c) or 0.0)
    return res


def _scopes(items: dict[str, Item], keys: list[str]) -> dict[str, list[str]]:
    scopes: dict[str, list[str]] = {}
    for k in keys:
        scopes.setdefault(items[k].dataset, []).append(k)
    if len(scopes) > 1:
        scopes["pooled"] = keys
    else:  # one dataset: its table is the pooled one
        scopes = {"pooled": keys, **scopes}
    return scopes


def _cost_quality(
    cfg: BenchConfig,
    scopes: dict[str, list[str]],
    routes: list[str],
    per_route: dict[str, dict],
    probs: dict[str, dict[str, float]],
    s: Systems,
    systems: dict,
    notes: list[str],
) -> dict:
    if not (STRONG in routes and WEAK in routes):
        notes.append("cost-quality analysis needs the chunk and logic routes")
        return {}
    cq = {}
    for scope, ks in scopes.items():
        strong = [float(per_route[k][STRONG].get(cfg.metric) or 0.0) for k in ks]
        weak = [float(per_route[k][WEAK].get(cfg.metric) or 0.0) for k in ks]
        p = [probs[k].get("logic", 0.0) for k in ks] if probs else None
        a = cost_quality(p if p is not None else [0.0] * len(ks), strong, weak)
        if p is None:
            del a["router"]
        # the 3-route systems as points: share of logic calls, quality on the metric
        a["points"] = {
            name: {
                "share": systems[scope][name]["routes"].get(STRONG, 0.0),
                "quality": systems[scope][name][cfg.metric],
            }
            for name in s.choices
            if name not in (STRONG, WEAK)
        }
        cq[scope] = a
    return cq


def llm_router_latency(llm_routes: dict[str, dict]) -> dict | None:
    """Decision count, failures and latency of the LLM router."""
    if not llm_routes:
        return None
    secs = [float(r["seconds"]) for r in llm_routes.values() if not r.get("cached")]
    # a cached decision still knows what its call took when it was made
    original = [
        float(r["llm_seconds_uncached"])
        for r in llm_routes.values()
        if r.get("cached") and r.get("llm_seconds_uncached")
    ]
    all_secs = [float(r["seconds"]) for r in llm_routes.values()]
    use = secs + original or all_secs
    note = None
    if not secs:
        note = (
            "every decision came from the LLM cache: latencies are those of the original calls"
            if original
            else "every decision came from the LLM cache: latencies are cache reads"
        )
    return {
        "decisions": len(llm_routes),
        "uncached": len(secs),
        "errors": sum(1 for r in llm_routes.values() if r.get("error")),
        "median_seconds": statistics.median(use),
        "mean_seconds": sum(use) / len(use),
        "note": note,
    }


def _per_question(
    items: dict[str, Item],
    keys: list[str],
    routes: list[str],
    per_route: dict[str, dict],
    oracle: dict[str, str],
    probs: dict[str, dict[str, float]],
    s: Systems,
) -> list[dict]:
    fields = ("pred", *METRICS, "llm_calls", "prompt_tokens", "completion_tokens", "seconds", "error")
    out = []
    for k in keys:
        it = items[k]
        out.append(
            {
                "key": k,
                "dataset": it.dataset,
                "id": it.id,
                "question": it.text,
                "answers": it.answers,
                "type": it.type,
                "probs": probs.get(k),
                "oracle": oracle[k],
                "choices": {name: s.choices[name][k] for name in s.choices if name not in routes},
                "results": {r: {x: per_route[k][r].get(x) for x in fields} for r in routes},
            }
        )
    return out


def build_report(
    cfg: BenchConfig,
    items: dict[str, Item],
    fixed: dict[tuple[str, str], dict],
    probs: dict[str, dict[str, float]],
    router_seconds: float | None,
    llm_routes: dict[str, dict],
    notes: list[str],
    baseline_probs: dict[str, dict[str, dict[str, float]]] | None = None,
    checks: dict[str, dict] | None = None,
) -> dict:
    """Every system's per-question results, tables per dataset and pooled, confusion
    matrices and the cost-quality analysis. `checks`: see build_systems."""
    routes = list(cfg.routes)
    keys = list(items)
    per_route = {k: {r: fixed[(r, k)] for r in routes} for k in keys}
    oracle = {k: oracle_choice(per_route[k], cfg.metric, routes) for k in keys}
    texts = {k: items[k].text for k in keys}
    s = build_systems(
        cfg,
        keys,
        routes,
        per_route,
        oracle,
        probs,
        router_seconds,
        llm_routes,
        baseline_probs or {},
        notes,
        checks,
        texts,
    )
    scopes = _scopes(items, keys)
    systems = {
        scope: {name: summarize([system_result(s, per_route, name, k) for k in ks], routes) for name in s.choices}
        for scope, ks in scopes.items()
    }
    conf = {
        scope: {
            f"{name}_vs_oracle": confusion([s.choices[name][k] for k in ks], [oracle[k] for k in ks], routes)
            for name in ("router", "llm_router")
            if name in s.choices
        }
        for scope, ks in scopes.items()
    }
    cq = _cost_quality(cfg, scopes, routes, per_route, probs, s, systems, notes)
    lr = llm_router_latency(llm_routes)
    per_question = _per_question(items, keys, routes, per_route, oracle, probs, s)
    if s.escalated.get("router+escalate"):
        notes.append(
            f"router+escalate: {len(s.escalated['router+escalate'])} of {len(keys)} router answers said they did "
            "not know and were answered again by logic (text rule only; router+check adds the self-check)"
        )
    return {
        "config": asdict(cfg),
        "routes": routes,
        "systems_order": list(s.choices),
        "systems": systems,
        "confusion": conf,
        "cost_quality": cq,
        "llm_router": lr,
        "router": {"checkpoint": cfg.checkpoint or "shipped generalist", "seconds_per_question": router_seconds}
        if probs
        else None,
        "notes": notes,
        "per_question": per_question,
    }
