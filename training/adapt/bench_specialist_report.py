"""report.md of `bench specialist` (training.adapt.bench_specialist), from its results alone."""

from __future__ import annotations


def _table(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def _shares(shares: dict) -> str:
    return ", ".join(f"{r} {round(100 * v)}%" for r, v in shares.items() if v)


def _interval(p: dict) -> str:
    lo, hi = p["ci95"]
    return f"{p['mean_diff']:+.1f} points, 95% interval [{lo:+.1f}, {hi:+.1f}] (half-width {p['half_width']:.1f})"


def verdict(results: dict) -> str:
    """Issue 67's bar, in one sentence: on the LODO check where it ran, else on the forgetting check."""
    p, others = results["paired"]["decider"], results["other_sets"].get("lodo") or results["other_sets"]
    wins = p["above_zero"]
    kept = others["all_within_bar"]
    if wins and kept and "lodo" not in results["other_sets"]:
        return (
            "the specialist beats the generalist on the held-out questions (interval above 0) and lowers no "
            "other set's own rows by more than 1 point; the LODO check (--lodo) was not run."
        )
    if wins and kept:
        return (
            "PASSES: the specialist beats the generalist on the held-out questions (interval above 0) "
            "and lowers no other set by more than 1 point."
        )
    why = [] if wins else [f"the interval of specialist - generalist holds 0 or less ({_interval(p)})"]
    if not kept:
        worse = [d for d, v in others["sets"].items() if not v["within_bar"]]
        why.append(f"it lowers {', '.join(worse)} by more than 1 point")
    return (
        "does not pass: " + "; ".join(why) + f". Power: with these {p['n']} held-out questions the interval's "
        f"half-width is {p['half_width']:.1f} points, so a true gain smaller than about that could not have shown."
    )


def _others_table(sets: dict, kind: str) -> list[str]:
    return _table(
        [
            "set",
            "n",
            f"{kind}generalist F1",
            f"{kind}specialist F1",
            "difference",
            "tokens / q (gen / spec)",
            "within 1 point",
        ],
        [
            [
                d,
                v["n"],
                v["generalist"],
                v["specialist"],
                f"{v['diff']:+.1f}",
                f"{v['generalist_tokens']:,.0f} / {v['specialist_tokens']:,.0f}",
                "yes" if v["within_bar"] else "**no**",
            ]
            for d, v in sets.items()
        ],
    )


def format_report(results: dict) -> str:
    split, val = results["split"], results["validation"]
    lines = [f"# Specialist judged in-domain: {results['set']} (issue 67, item 2)", ""]
    if results.get("note"):
        lines += [results["note"], ""]
    lines += [
        f"Labels: `{results['label_file']}`, {split['n_rows']} rows of {results['set']}. Generalist: "
        f"`{results['generalist']}` (its cost weight {results['parent_cost_weight']}).",
        "",
        f"Split (first, by question id): {split['n_train']} training rows, {split['n_held_out']} held out "
        f"({split['rule']}). {split.get('n_seen_by_generalist', 0)} of the {split['n_rows']} questions were "
        "among the generalist's training questions (its set priors) and are training rows only. The held-out "
        "ids are in results.json; neither the generalist nor the specialist saw them.",
        "",
        f"## Choice, on {len(val['folds'])}-fold validation over the training rows only (folds of "
        f"{', '.join(map(str, val['folds']))} rows)",
        "",
        f"Chosen: **{val['chosen_name']}**. The generalist on the same rows: F1 {val['generalist']['score']}, "
        f"{val['generalist']['tokens']:,.0f} tokens / q. "
        + (
            "The chosen variant beats it on validation."
            if val["beats_generalist_on_validation"]
            else "No variant beats it on validation: the specialist below is the best fine-tuned one."
        ),
        "",
    ]
    lines += _table(
        ["variant", "validation F1", "tokens / q", "route shares"],
        [[v["name"], v["score"], f"{v['tokens']:,.0f}", _shares(v["shares"])] for v in val["table"]],
    )
    lines += ["", f"## Held-out questions ({split['n_held_out']}), read once after the choice", ""]
    lines += _table(
        ["system", "F1", "tokens / q", "LLM calls / q", "agreement with oracle", "route shares"],
        [
            [name, m["score"], f"{m['tokens']:,.0f}", m["llm_calls"], m["agreement"], _shares(m["shares"])]
            for name, m in results["held_out"].items()
        ],
    )
    pd, pm = results["paired"]["decider"], results["paired"]["mlp"]
    lines += [
        "",
        f"Specialist - generalist (Decider, paired bootstrap over questions, {pd['resamples']:,} draws, seed "
        f"{pd['seed']}): {_interval(pd)}; questions won / lost / tied {pd['wins']} / {pd['losses']} / {pd['ties']}.",
        "",
        f"Same, MLP argmax alone: {_interval(pm)}; won / lost / tied {pm['wins']} / {pm['losses']} / {pm['ties']}.",
        "",
        "## The other sets",
        "",
        results["other_sets"]["kind"][0].upper() + results["other_sets"]["kind"][1:] + ".",
        "",
    ]
    lines += _others_table(results["other_sets"]["sets"], "")
    lodo = results["other_sets"].get("lodo")
    if lodo:
        lines += [
            "",
            "Leave-one-dataset-out (`--lodo`): per other set, the fold's generalist (the generalist's recipe",
            "trained without it) and that generalist fine-tuned as the specialist was, on the same rows.",
            "",
        ]
        lines += _others_table(lodo["sets"], "LODO ")
    else:
        lines += ["", "The LODO check (`--lodo`: one generalist training per set) was not run.", ""]
    lines += ["", "## Verdict", "", verdict(results), ""]
    return "\n".join(lines)
