"""How far can one signal the router already has go? A ceiling for issue 43's bar.

For one left-out set's judged rows (answer-label rows: per-route scores, costs and the chunk
answer's confidence), a rule reads one score per question and sends to logic the questions on
the logic side of a threshold; every other question keeps a cheap base route (the router's best
non-logic route, or chunk). Every threshold is tried, in both directions (high values to logic,
low values to logic), and the best score whose mean tokens stay within TOKEN_SHARE of
always-logic's is kept.

The threshold is fitted on the judged rows themselves, so the figure is an upper bound on what
any threshold on that signal can do there, not a router: a real router has to fix its threshold
before it sees the set. If the bound misses the bar, no threshold on that signal meets it.

Beside each bound: the exact expected score of a random pick of the same number of questions
among those the rule could send (no sampling), and the bound a random signal reaches when its
threshold is fitted the same way (noise_ceiling): on 100 questions, choosing among ~200 cuts
finds a few points in pure noise, so a bound is read against that, not against the pick alone.

A signal read before answering (the router's P(logic), retrieval signals) replaces the cheap
answer: a question sent to logic pays logic's tokens instead of the base route's. A signal read
from the cheap answer (its confidence) escalates: the question pays for both answers, as
training.fitting.lodo_cascade.escalate does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from training.fitting.lodo_cascade import STRONG, TOKEN_SHARE, confidence_of, logic_cap
from training.labels.labels import route_cost

DIRECTIONS = ("high", "low")  # which end of the signal goes to logic
NOISE_DRAWS, NOISE_SEED = 1000, 0  # random signals fitted the same way: what the fit alone reaches


@dataclass(frozen=True)
class Rule:
    """One signal over the rows and the base it falls back to."""

    signal: str
    values: Sequence[float | None]  # one per row; None or NaN: the row is never sent to logic
    base: str  # the base's name, for the report
    first: Sequence[str]  # per row: the route a row keeps when not sent to logic
    after_answer: bool = False  # read from first's answer: escalating pays for both answers


def cheap_choice(probs: Sequence[Mapping[str, float]]) -> list[str]:
    """Per question, the router's most likely route other than logic (its decision where logic loses)."""
    return [max((r for r in p if r != STRONG), key=lambda r: p[r]) for p in probs]


def p_logic(probs: Sequence[Mapping[str, float]]) -> list[float]:
    return [float(p.get(STRONG, 0.0)) for p in probs]


def _defined(v: float | None) -> bool:
    return v is not None and not math.isnan(float(v))


def effects(rows: Sequence[dict], rule: Rule) -> tuple[list[int], list[float], list[float]]:
    """(the rows the rule can send to logic, each one's score gain and token change when sent)."""
    ix, gain, extra = [], [], []
    for i, (row, route, v) in enumerate(zip(rows, rule.first, rule.values)):
        if route == STRONG or not _defined(v):
            continue
        logic_tokens = route_cost(row["costs"][STRONG])
        ix.append(i)
        gain.append(row["scores"][STRONG] - row["scores"][route])
        extra.append(logic_tokens if rule.after_answer else logic_tokens - route_cost(row["costs"][route]))
    return ix, gain, extra


def base_figures(rows: Sequence[dict], first: Sequence[str]) -> tuple[float, float]:
    """(mean score, mean tokens) of the base alone."""
    n = max(len(rows), 1)
    score = sum(row["scores"][r] for row, r in zip(rows, first)) / n
    tokens = sum(route_cost(row["costs"][r]) for row, r in zip(rows, first)) / n
    return score, tokens


def random_pick(rows: Sequence[dict], rule: Rule, k: int) -> tuple[float, float]:
    """(expected mean score, expected mean tokens) of sending k of the rule's candidate rows to
    logic uniformly at random: each candidate is sent with probability k / candidates, so the
    expectation is the base plus that share of the candidates' summed gains (exact, by linearity)."""
    score, tokens = base_figures(rows, rule.first)
    _, gain, extra = effects(rows, rule)
    if not gain:
        return score, tokens
    n, p = max(len(rows), 1), k / len(gain)
    return score + p * sum(gain) / n, tokens + p * sum(extra) / n


def sweep(rows: Sequence[dict], rule: Rule, cap: float) -> dict:
    """The best (score, then fewest tokens) threshold on `rule`'s signal whose mean tokens stay
    within `cap`, in either direction. Tied values fall on the same side of any threshold, so a
    threshold sends a whole run of equal values or none of it. score: None when even the base
    alone spends more than `cap`."""
    n = max(len(rows), 1)
    score0, tokens0 = base_figures(rows, rule.first)
    ix, gain, extra = effects(rows, rule)
    best: dict = {"direction": None, "threshold": None, "sent": 0, "score": None, "tokens": None}
    if tokens0 <= cap + 1e-9:
        best.update(score=score0, tokens=tokens0)
    for direction in DIRECTIONS:
        order = sorted(range(len(ix)), key=lambda j: float(rule.values[ix[j]]), reverse=direction == "high")
        s, t = score0, tokens0
        for pos, j in enumerate(order):
            s += gain[j] / n
            t += extra[j] / n
            value = float(rule.values[ix[j]])
            if pos + 1 < len(order) and float(rule.values[ix[order[pos + 1]]]) == value:
                continue  # a threshold cannot split a tie
            if t > cap + 1e-9:
                continue
            if (
                best["score"] is None
                or s > best["score"] + 1e-12
                or (abs(s - best["score"]) <= 1e-12 and t < best["tokens"])
            ):
                best = {"direction": direction, "threshold": value, "sent": pos + 1, "score": s, "tokens": t}
    return {**best, "candidates": len(ix)}


def ceiling(rows: Sequence[dict], rule: Rule, share: float = TOKEN_SHARE) -> dict:
    """sweep's best for `rule` in the judge's units (score x 100, one decimal; tokens per question),
    with its share of always-logic's tokens, the share of questions it sends to logic, and the
    random pick of as many questions."""
    cap = logic_cap(rows, share)
    logic_tokens = cap / share if share else 0.0
    best = sweep(rows, rule, cap)
    n = max(len(rows), 1)
    out = {
        "signal": rule.signal,
        "base": rule.base,
        "after_answer": rule.after_answer,
        "direction": best["direction"],
        "threshold": None if best["threshold"] is None else round(best["threshold"], 4),
        "candidates": best["candidates"],
        "to_logic": round(best["sent"] / n, 3),
        "score": None,
        "tokens": None,
        "token_share_of_logic": None,
    }
    if best["score"] is None:
        return out
    r_score, r_tokens = random_pick(rows, rule, best["sent"])
    return {
        **out,
        "score": round(100 * best["score"], 1),
        "tokens": round(best["tokens"], 1),
        "token_share_of_logic": round(best["tokens"] / logic_tokens, 3) if logic_tokens else None,
        "random_score": round(100 * r_score, 1),
        "random_token_share_of_logic": round(r_tokens / logic_tokens, 3) if logic_tokens else None,
    }


def noise_ceiling(rows: Sequence[dict], rule: Rule, share: float = TOKEN_SHARE, draws: int = NOISE_DRAWS) -> dict:
    """What fitting a threshold on these rows gives a signal that carries nothing: `rule` with its
    values replaced by random ones (on the same rows, the same base and the same way of paying),
    swept the same way; the mean and 95th percentile of the best score over `draws` draws (fixed
    seed). A signal whose bound is not above this one gained from the fit, not from the signal."""
    import numpy as np

    rng = np.random.default_rng(NOISE_SEED)
    cap = logic_cap(rows, share)
    defined = [_defined(v) for v in rule.values]
    best = []
    for _ in range(draws):
        noise = [float(x) if d else None for x, d in zip(rng.random(len(rows)), defined)]
        found = sweep(rows, Rule(rule.signal, noise, rule.base, rule.first, rule.after_answer), cap)["score"]
        if found is not None:
            best.append(100 * found)
    if not best:
        return {"noise_mean": None, "noise_p95": None}
    return {"noise_mean": round(float(np.mean(best)), 1), "noise_p95": round(float(np.percentile(best, 95)), 1)}


def perfect_values(rows: Sequence[dict], first: Sequence[str], after_answer: bool = False) -> list[float]:
    """A rank per row by logic's score gain over `first` per token it adds, without ties: the
    signal that knows the answers (a threshold on it sends the best buys first, one at a time).
    Not a signal a router has: the reference for how far any single signal could go at the cap."""
    ix, gains, extras = effects(rows, Rule("", [0.0] * len(rows), "", first, after_answer))
    # a loss ranks below every gain
    worth = [(gain / max(extra, 1.0) if gain > 0 else gain - 1.0, i) for i, gain, extra in zip(ix, gains, extras)]
    out = [float("nan")] * len(rows)
    for rank, (_, i) in enumerate(sorted(worth)):
        out[i] = float(rank)
    return out


def set_ceilings(
    rows: Sequence[dict],
    routers: Mapping[str, Sequence[Mapping[str, float]]],
    base_router: str,
    signals: Mapping[str, Sequence[float]] | None = None,
    *,
    bar: float | None = None,
    share: float = TOKEN_SHARE,
) -> dict:
    """Every rule of issue 43's ceiling on one set's judged rows. `routers`: each router's
    probabilities per row (its P(logic) is a signal, its cheap choice that signal's base);
    `base_router`: the router whose cheap choice the other signals fall back to; `signals`: scores
    read before answering (retrieval signals). Each signal is tried over its router's cheap choice
    and over chunk; the chunk answer's confidence escalates. `bar`: the score that passes."""
    routes = list(rows[0]["scores"]) if rows else []
    n = len(rows)
    bases: dict[str, list[str]] = {f"{base_router}'s cheap choice": cheap_choice(routers[base_router])}
    if "chunk" in routes:
        bases["chunk"] = ["chunk"] * n
    rules = []
    for name, probs in routers.items():
        own = {f"{name}'s cheap choice": cheap_choice(probs), **{k: v for k, v in bases.items() if k == "chunk"}}
        rules += [Rule(f"P(logic), {name}", p_logic(probs), b, first) for b, first in own.items()]
    for b, first in bases.items():
        conf = [confidence_of(row, r) for row, r in zip(rows, first)]
        rules.append(Rule("cheap answer's confidence", conf, b, first, after_answer=True))
        for name, values in (signals or {}).items():
            rules.append(Rule(name, values, b, first))
    references = [
        Rule("perfect signal (knows the answers)", perfect_values(rows, first), b, first) for b, first in bases.items()
    ]
    entries = [{**ceiling(rows, r, share), **noise_ceiling(rows, r, share)} for r in rules]
    refs = [ceiling(rows, r, share) for r in references]
    for e in [*entries, *refs]:
        e["passes"] = None if bar is None or e["score"] is None else bool(e["score"] >= bar)
    best = max((e for e in entries if e["score"] is not None), key=lambda e: e["score"], default=None)
    return {
        "questions": n,
        "noise_draws": NOISE_DRAWS,
        "token_cap": round(logic_cap(rows, share), 1),
        "bar": bar,
        "rules": entries,
        "reference": refs,
        "best": best,
        "any_passes": any(e["passes"] for e in entries),
    }


def seed_groups(by_seed: Mapping[int, Sequence[Mapping[str, float]]], name: str) -> dict[str, list]:
    """One router per distinct set of probabilities among the fine-tuning seeds, named by its seeds
    ('adapted specialist (seeds 0, 1, 2)' when every seed's decisions are the same)."""
    groups: dict[tuple, tuple[list[int], Sequence[Mapping[str, float]]]] = {}
    for seed, probs in by_seed.items():
        key = tuple(tuple(round(v, 6) for v in p.values()) for p in probs)
        groups.setdefault(key, ([], probs))[0].append(seed)
    return {f"{name} (seed{'s' if len(s) > 1 else ''} {', '.join(map(str, s))})": list(p) for s, p in groups.values()}


def retrieval_values(kb, rows: Sequence[dict]) -> dict[str, list[float]]:
    """training.fitting.retrieval_signals per row from one batched search of `kb` (the left-out set's KB of
    its questions' passages, k as the rows'): the signals the chunk route's search gives before
    any LLM call."""
    from training.fitting.retrieval_signals import SIGNALS, signals_of

    if not rows:
        return {}
    questions = [r["question"] for r in rows]
    hits = kb.search_batch(questions, k=int(rows[0].get("k") or 3))
    found = [signals_of(q, h) for q, h in zip(questions, hits)]
    return {f"retrieval: {s}": [f[s] for f in found] for s in SIGNALS}
