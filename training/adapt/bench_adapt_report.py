"""The report of `logicroute bench adapt` (training.adapt.bench_adapt): report.json as measured, and
report.md with one table per left-out set, the specialist's figure per seed, the verdict against
issue 43's bar, and what adapting cost."""

from __future__ import annotations

import json
from pathlib import Path

from engine.floor.base.files import atomic_write_text
from training.adapt import adapt_own_folds as own_folds


def write_report(folder: Path, report: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / "report.json", json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    path = folder / "report.md"
    atomic_write_text(path, render(report))
    return path


def _shares(m: dict) -> str:
    return ", ".join(f"{r} {v:.0%}" for r, v in m["shares"].items() if v)


def _far(m: dict) -> str:
    return "" if m.get("far") is None else f"{m['far']:.0%}"


def _set_section(name: str, part: dict) -> list[str]:
    lines = [
        f"## left out: {name} ({part['questions']} questions; KB of {part['passages']} passages, "
        f"{part['chunks']} chunks)",
        "",
        "| system | score | tokens / q | LLM calls / q | agreement with oracle | route shares | flagged far |",
        "|---|---|---|---|---|---|---|",
    ]
    for s, m in part["systems"].items():
        lines.append(
            f"| {s} | {m['score']} | {m['tokens']:,.0f} | {m['llm_calls']} | {m['agreement']} | {_shares(m)} | "
            f"{_far(m)} |"
        )
    seeds = part["specialist_seeds"]
    lines += [
        "",
        "adapted specialist per fine-tuning seed: "
        + ", ".join(f"seed {s['seed']} {s['score']} ({s['tokens']:,.0f} tokens)" for s in seeds),
        "",
    ]
    for key in ("verdict", "verdict_escalating"):
        if v := part.get(key):
            lines += [_verdict(v), ""]
    lines += _thresholds(part["systems"], part)
    lines += _adaptation(part.get("adaptation") or {})
    lines += _ceiling(part.get("ceiling"))
    lines += own_folds.section_lines(part)  # absent unless --own-folds
    return lines


def _ceiling_row(e: dict) -> str:
    if e["score"] is None:
        return f"| {e['signal']} | {e['base']} | | | even the base spends more | | | | |"
    side = {"high": ">=", "low": "<="}.get(e["direction"] or "", "")
    cut = f"{side} {e['threshold']}" if side else "none sent"
    passes = {True: "yes", False: "no", None: ""}[e["passes"]]
    return (
        f"| {e['signal']} | {e['base']} | {cut} | {e['to_logic']:.0%} | {e['score']} | "
        f"{e['tokens']:,.0f} ({e['token_share_of_logic']:.0%}) | {e['random_score']} | {_noise(e)} | {passes} |"
    )


def _noise(e: dict) -> str:
    return "" if e.get("noise_mean") is None else f"{e['noise_mean']} / {e['noise_p95']}"


def _ceiling(c: dict | None) -> list[str]:
    """training.adapt.adapt_ceiling's bounds for one set (absent in reports made before it)."""
    if not c:
        return []
    best = c.get("best") or {}
    lines = [
        "### ceiling: the best any threshold on one signal reaches at <= 50% of logic's tokens, fitted on the "
        "judged questions (an upper bound)",
        "",
        f"Each threshold is fitted on these same {c['questions']} questions, in both directions, so "
        "a score is an upper bound on what that signal can do here, not a router. Questions on the logic side go "
        "to logic, the others keep the base; the cheap answer's confidence escalates (both answers paid). "
        f"Token cap {c['token_cap']:,.0f} per question; bar {c['bar']} (the LODO generalist + 2 or the best fixed "
        "route - 1). 'random pick': the exact expected score of sending as many of the same candidates at random. "
        "'noise fitted': the bound of a random signal fitted the same way (mean / 95th percentile of "
        f"{c.get('noise_draws', 0):,} draws): "
        "what the fit alone finds.",
        "",
        "| signal | base | to logic when | sent to logic | score | tokens / q (of logic's) | random pick "
        "| noise fitted | passes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_ceiling_row(e) for e in c["rules"]]
    lines += [_ceiling_row(e) for e in c.get("reference", [])]
    verdict = (
        f"best: {best['signal']} over {best['base']}, {best['score']} at {best['token_share_of_logic']:.0%} of "
        f"logic's tokens: {'reaches' if c['any_passes'] else 'misses'} the bar {c['bar']}; a random signal fitted "
        f"the same way reaches {best['noise_mean']} on average, {best['noise_p95']} at its 95th percentile"
        if best
        else "no rule stays within the cap"
    )
    return [*lines, "", verdict, ""]


def _verdict(v: dict) -> str:
    share = f", {v['token_share_of_logic']:.0%} of always-logic's tokens (bar 50%)" if v["token_share_of_logic"] else ""
    return (
        f"verdict for {v.get('system', 'adapted specialist')}: {'PASSES' if v['passes'] else 'does not pass'}: "
        f"{v['gain_over_generalist']:+} over the LODO generalist (bar +2), {v['below_best_fixed']} below the best "
        f"fixed route ({v['best_fixed_route']}; bar 1){share}"
    )


def _thresholds(systems: dict, part: dict) -> list[str]:
    """The confidence thresholds the escalating systems used, and the token budget adapt fitted its within."""
    cells = [f"{name}: {m['below']}" for name, m in systems.items() if "below" in m]
    if "escalation_budget" in part:  # absent in reports made before the budget
        cells.append(f"adapt's escalation budget: {_budget(part['escalation_budget'])}")
    return (["confidence thresholds: " + "; ".join(cells), ""]) if cells else []


def _budget(budget: float | None) -> str:
    return "none (no token cap)" if budget is None else f"{budget:.0%} of always-logic's tokens on its training rows"


def _adaptation(a: dict) -> list[str]:
    """What adapt wrote and what it cost, from its own report."""
    lines = []
    q, w = a.get("questions") or {}, a.get("writing") or {}
    if q:
        lines.append(
            f"adapt: {q.get('written_kept')} written questions kept, {q.get('labelled')} labelled"
            + (f", {q['left']} left unlabelled" if q.get("left") else "")
        )
    if w:
        lines.append(f"writing: `{json.dumps(w, ensure_ascii=False)}`")
    for note in a.get("writing_notes") or []:
        lines.append(f"- {note}")
    phases = a.get("phases") or {}
    if phases:
        cells = [
            f"{k} {p.get('seconds', 0):,.0f} s"
            + (
                f", {p['llm_calls']} LLM calls, {p.get('tokens') or 0:,} tokens"
                if p.get("llm_calls") is not None
                else ""
            )
            for k, p in phases.items()
        ]
        lines.append("cost: " + "; ".join(cells))
    return [*lines, ""] if lines else []


def _calls(phase: dict) -> str:
    if phase.get("llm_calls") is None:
        return ""
    return f", {phase['llm_calls']} LLM calls, {phase.get('tokens') or 0:,} tokens"


def _ceiling_summary(sets: dict) -> list[str]:
    """One line per set: the best single-signal threshold fitted on the judged rows, against the bar."""
    parts = {name: part["ceiling"] for name, part in sets.items() if part.get("ceiling")}
    if not parts:
        return []
    lines = [
        "Ceiling (an upper bound: each threshold fitted on the judged questions themselves; per set below):",
        "",
        "| left out | bar | best single signal (base) | its score (tokens of logic's) | random pick of as many "
        "| noise fitted the same way (mean / 95th pct) | perfect signal at the cap | reaches the bar |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, c in parts.items():
        b = c.get("best")
        perfect = max((e["score"] for e in c.get("reference", []) if e["score"] is not None), default=None)
        cells = (
            f"{b['signal']} ({b['base']}) | {b['score']} ({b['token_share_of_logic']:.0%}) | {b['random_score']} "
            f"| {_noise(b)}"
            if b
            else "none within the cap | | | "
        )
        lines.append(f"| {name} | {c['bar']} | {cells} | {perfect} | {'yes' if c['any_passes'] else 'no'} |")
    return [*lines, ""]


def render(report: dict) -> str:
    sets = report.get("sets", {})
    lines = [
        "# `logicroute adapt` judged leave-one-dataset-out",
        "",
        f"Command: `{report.get('command', '')}`",
        "",
        f"For each left-out set: the generalist trained without it (the shipped recipe, none of its priors), "
        f"`adapt` on a KB of its questions' passages only (n = {report.get('n')} written questions, no question "
        f"of the set given), judged on the set's real questions through its answer-label rows (no new answers). "
        f"The adapted specialist is the mean over fine-tuning seeds {', '.join(map(str, report.get('seeds', [])))}. "
        "Bar (issue 43): specialist >= LODO generalist + 2, or within 1 of the best fixed route, at <= 50% of "
        "always-logic's tokens. 'flagged far': the share the router's out-of-distribution guard flags.",
        "",
    ]
    budgeted = [p["escalation_budget"] for p in sets.values() if "escalation_budget" in p]
    if budgeted:  # one --escalation-budget per run
        lines += [
            "Escalation on: the adapted router's cheap answers below the confidence threshold `adapt` fitted on its "
            f"written questions' training part go on to logic; escalation budget (`--escalation-budget`): "
            f"{_budget(budgeted[0])}.",
            "",
        ]
    if sets:
        lines += [
            "| left out | LODO generalist | adapted specialist | adapted, escalation on (tokens) | best fixed route "
            "| always logic tokens | oracle | passes |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name, part in sets.items():
            if "error" in part:
                lines.append(f"| {name} | failed: {part['error']} | | | | | | |")
                continue
            s, v = part["systems"], part["verdict"]
            best = s[f"always {v['best_fixed_route']}"]
            logic = s.get("always logic", {}).get("tokens", 0)
            esc = s.get(part.get("verdict_escalating", v)["system"], s["adapted specialist"])
            lines.append(
                f"| {name} | {s['LODO generalist']['score']} | {s['adapted specialist']['score']} | "
                f"{esc['score']} ({esc['tokens']:,.0f}) | {v['best_fixed_route']} {best['score']} | {logic:,.0f} | "
                f"{s['oracle']['score']} | {'yes' if v['passes'] else 'no'} |"
            )
        lines.append("")
        lines += _ceiling_summary(sets)
        lines += own_folds.summary_lines(sets)
    for name, part in sets.items():
        lines += (
            _set_section(name, part) if "error" not in part else [f"## left out: {name}: failed", "", part["error"], ""]
        )
    return "\n".join(lines)
