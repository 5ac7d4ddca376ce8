"""How each peer compares with logicroute's logic route and router on the same questions: the F1
difference with a paired bootstrap interval, the questions each one wins, and the cost as ratios
(tokens and seconds a question, indexing tokens). Ratios and paired differences, because wall
times on a shared machine are noisy and 30 questions are few: a difference whose interval holds
0 is no difference."""

from __future__ import annotations

import random

from training.bench.bench_report import markdown_table

REFERENCES = ("logic", "router")  # logicroute's systems a peer is held against, where the run has them
BOOTSTRAP_SAMPLES = 2000


def _by_key(rows: list[dict]) -> dict[str, dict]:
    return {r["key"]: r for r in rows if "key" in r}


def paired_interval(diffs: list[float], samples: int = BOOTSTRAP_SAMPLES, seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of the mean of `diffs`, resampling questions (a fixed seed: the
    report is the same on every rerun)."""
    if not diffs:
        return 0.0, 0.0
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(sum(rng.choice(diffs) for _ in range(n)) / n for _ in range(samples))
    return means[int(0.025 * samples)], means[int(0.975 * samples) - 1]


def _tokens(rows: list[dict]) -> float:
    return sum(r["prompt_tokens"] + r["completion_tokens"] for r in rows) / len(rows)


def _seconds(rows: list[dict]) -> float:
    return sum(r["seconds"] for r in rows) / len(rows)


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 2) if b else None


def compare(reference, peer) -> dict | None:
    """`reference` against `peer` (SystemRuns) on the questions both answered; None when they share
    none. Positive differences favour the reference."""
    ref, other = _by_key(reference.answer_rows), _by_key(peer.answer_rows)
    keys = sorted(ref.keys() & other.keys())
    if not keys:
        return None
    r, o = [ref[k] for k in keys], [other[k] for k in keys]
    diffs = [100 * (a["f1"] - b["f1"]) for a, b in zip(r, o, strict=True)]
    low, high = paired_interval(diffs)
    ref_index = sum(x["prompt_tokens"] + x["completion_tokens"] for x in reference.index_rows)
    peer_index = sum(x["prompt_tokens"] + x["completion_tokens"] for x in peer.index_rows)
    return {
        "reference": reference.name,
        "peer": peer.name,
        "questions": len(keys),
        "f1_difference": round(sum(diffs) / len(diffs), 1),
        "f1_interval": [round(low, 1), round(high, 1)],
        "reference_wins": sum(1 for d in diffs if d > 0),
        "peer_wins": sum(1 for d in diffs if d < 0),
        "ties": sum(1 for d in diffs if d == 0),
        "tokens_ratio": _ratio(_tokens(r), _tokens(o)),
        "seconds_ratio": _ratio(_seconds(r), _seconds(o)),
        "reference_index_tokens": ref_index,
        "peer_index_tokens": peer_index,
    }


def comparisons(runs: list) -> list[dict]:
    """Every reference of REFERENCES in the run against every system that is not one of
    logicroute's (a system with index rows or a peer's settings); none when either side is absent."""
    by_name = {r.name: r for r in runs if r.answer_rows}
    refs = [by_name[n] for n in REFERENCES if n in by_name]
    peers = [r for r in by_name.values() if not _is_logicroute(r)]
    return [c for ref in refs for p in peers if (c := compare(ref, p)) is not None]


def _is_logicroute(run) -> bool:
    return "route" in (run.settings or {})


def comparison_lines(items: list[dict]) -> list[str]:
    """The report's section: one line per reference and peer."""
    if not items:
        return []
    lines = [
        "## logicroute against each peer, question by question",
        "",
        "F1 difference in points (reference minus peer) with its 95% paired bootstrap interval over the "
        "questions; ratios are the reference's cost over the peer's (below 1: the reference is cheaper).",
        "",
    ]
    for c in items:
        low, high = c["f1_interval"]
        verdict = "higher" if low > 0 else "lower" if high < 0 else "no different (the interval holds 0)"
        lines.append(
            f"- **{c['reference']} vs {c['peer']}** ({c['questions']} questions): F1 {c['f1_difference']:+.1f} "
            f"[{low:+.1f}, {high:+.1f}], {verdict}; wins {c['reference_wins']}, loses {c['peer_wins']}, "
            f"ties {c['ties']}; tokens/q ×{c['tokens_ratio']}, s/q ×{c['seconds_ratio']}; indexing tokens "
            f"{c['reference_index_tokens']:,} against {c['peer_index_tokens']:,}"
        )
    return lines


def f1_by_type(items, runs: list) -> list[dict]:
    """Per question type of the set (2Wiki's comparison, compositional, inference...), each
    system's mean F1 over that type's questions: where a peer's mechanism wins shows here first.
    A question a system did not answer counts 0, as in the main table."""
    types: dict[str, list[str]] = {}
    for it in items:
        types.setdefault(it.type or "untyped", []).append(it.key)
    answered = {run.name: rows for run in runs if (rows := _by_key(run.answer_rows))}

    def mean_f1(rows: dict, keys: list[str]) -> float:
        return round(100 * sum(rows[k]["f1"] for k in keys if k in rows) / len(keys), 1)

    return [
        {"type": name, "questions": len(keys), "f1": {s: mean_f1(rows, keys) for s, rows in answered.items()}}
        for name, keys in sorted(types.items())
    ]


def by_type_lines(groups: list[dict]) -> list[str]:
    """The report's section: a table of F1 by question type; none when the set has one type."""
    if len(groups) < 2:
        return []
    systems = list(dict.fromkeys(s for g in groups for s in g["f1"]))
    rows = [[g["type"], g["questions"], *(g["f1"].get(s, "") for s in systems)] for g in groups]
    return ["## F1 by question type", "", *markdown_table(["type", "questions", *systems], rows)]
