"""RoutedRAG's retry ladder with engine.core.absence's gate, replayed leave-one-dataset-out.

`router+forms+retry` (training.fitting.lodo_cascade.retry_unanswered) climbs every cheap answer that says
it has none, because label rows carry no retrieval evidence. RoutedRAG weighs that evidence first
(engine.core.escalation.Escalation: weigh_absence before the first climb, on the passages the first
route read): when the gate says keep, "not in the documents" is the answer and nothing climbs.
Here the gate's verdicts come from the KB the labels were answered on (gate_verdicts: the chunk
route's retrieval, kb.search(question, k)), and retry_with_gate replays the ladder with them.

    python -m training.fitting.absence_replay --recipe checkpoints/generalist.ckpt --labels FILE ... \
        --kb graphrag_medical=KB_DIR [--retrieval dense] [--json OUT]

A row whose first route is unanswered needs a verdict: its set's KB must be given (a KeyError names
the row that lacks one). Only the chunk route's retrieval is rebuilt: a row the router sends to
summary first with an unanswered summary answer is an error too, not a silent climb.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from collections.abc import Sequence
from unittest import mock

from engine.core.escalation import RETRY_ROUTES
from engine.core.routes.common import looks_unanswered
from training.fitting.lodo_cascade import ROUTER_FORMS, ROUTER_RETRY, STRONG, retry_unanswered

GATED = f"{ROUTER_RETRY}+gate"


def unanswered(row: dict, route: str) -> bool:
    text = (row.get("answers_pred") or {}).get(route)
    return text is not None and looks_unanswered(text) is not None


def gate_verdicts(kb, rows: Sequence[dict], route: str = "chunk", retrieval: str | None = None) -> dict:
    """{row id: {route: weigh_absence's verdict, with "retrieved"}} for the rows whose stored
    `route` answer says it has none, from the chunk route's retrieval (k: the row's)."""
    from engine.core.absence import weigh_absence

    if route != "chunk":
        raise ValueError("only the chunk route's retrieval is rebuilt here")
    mode = {} if retrieval is None else {"retrieval": retrieval}
    out: dict = {}
    for row in rows:
        if unanswered(row, route):
            ids = [c.chunk_id for c in kb.search(row["question"], k=int(row.get("k", 3)), **mode)]
            out[str(row["id"])] = {route: {**weigh_absence(kb, row["question"], ids), "retrieved": ids}}
    return out


def retry_with_gate(
    rows: Sequence[dict], first: Sequence[str], verdicts: dict, ladder: Sequence[str] = RETRY_ROUTES
) -> tuple[list[str], list[dict], list[dict | None]]:
    """retry_unanswered, but a cheap first route whose answer says it has none and whose verdict
    says keep stays (its own score and cost, nothing paid on top); the gate weighs the first
    route only, as RoutedRAG does (a climb under way goes on up the ladder). Also returns each
    row's gate outcome ({route, climb, reason}; None where the ladder was not entered)."""
    decisions, overhead = retry_unanswered(rows, first, ladder)
    outcomes: list[dict | None] = []
    for i, (row, route) in enumerate(zip(rows, first)):
        if route == STRONG or not unanswered(row, route):
            outcomes.append(None)
            continue
        verdict = (verdicts.get(str(row["id"])) or {}).get(route)
        if verdict is None:
            raise KeyError(f"{row['id']}: its {route} answer says it has none, and no gate verdict was given")
        outcomes.append({"route": route, "climb": bool(verdict["climb"]), "reason": verdict["reason"]})
        if not verdict["climb"]:
            decisions[i], overhead[i] = route, {}
    return decisions, overhead, outcomes


def reason_kind(reason: str) -> str:
    """A verdict's reason without the terms it names and the counts in brackets."""
    kind = re.sub(r"'[^']*'(, '[^']*')*( and \d+ more)?", "...", reason)
    return re.sub(r" \(at most \d+ of \d+\)$", "", kind)


def gate_report(rows: Sequence[dict], folds: dict[str, tuple[list[int], list[str]]], verdicts: dict) -> dict:
    """Per left-out set (folds: set -> (row indices, router+forms decisions)) and pooled: the
    committed router+forms+retry and the gated one (score, tokens, LLM calls, route shares), and
    the gate's keeps and climbs with their reasons' counts."""
    from training.fitting.lodo import judge

    routes = list(rows[0]["pref"])
    out: dict = {"held_out": {}}
    pooled: dict = {"index": [], ROUTER_RETRY: ([], []), GATED: ([], []), "outcomes": []}
    for name, (index, first) in folds.items():
        part = [rows[i] for i in index]
        plain = retry_unanswered(part, first)
        gated = retry_with_gate(part, first, verdicts)
        out["held_out"][name] = _figures(part, routes, plain, gated, judge)
        pooled["index"].extend(index)
        pooled["outcomes"].extend(gated[2])
        for key, got in ((ROUTER_RETRY, plain), (GATED, gated)):
            pooled[key][0].extend(got[0])
            pooled[key][1].extend(got[1])
    part = [rows[i] for i in pooled["index"]]
    gated = (*pooled[GATED], pooled["outcomes"])
    out["pooled"] = _figures(part, routes, pooled[ROUTER_RETRY], gated, judge)
    return out


def _figures(rows, routes, plain, gated, judge) -> dict:
    seen = [o for o in gated[2] if o is not None]
    return {
        ROUTER_RETRY: judge(rows, plain[0], routes, plain[1]),
        GATED: judge(rows, gated[0], routes, gated[1]),
        "kept": sum(not o["climb"] for o in seen),
        "climbed": sum(o["climb"] for o in seen),
        "reasons": {
            "kept": dict(Counter(reason_kind(o["reason"]) for o in seen if not o["climb"])),
            "climbed": dict(Counter(reason_kind(o["reason"]) for o in seen if o["climb"])),
        },
        "changed": sum(a != b for a, b in zip(plain[0], gated[0])),
    }


def lodo_folds(label_files: Sequence[str], cfg) -> tuple[list[dict], dict, dict]:
    """(rows, {left-out set: (row indices, router+forms decisions)}, the LODO report) from
    training.fitting.lodo.lodo_report itself, each fold's decisions taken as it hands them to the
    escalation systems: the same folds, router and figures as `eval-router --lodo`."""
    import training.fitting.lodo as lodo
    from training.labels.label_arrays import load_label_files

    folds: dict = {}
    real = lodo.escalation_systems

    def recorded(rows, test, decided, paid, systems):
        folds[str(rows[test[0]]["dataset"])] = (list(test), list(decided[ROUTER_FORMS]))
        return real(rows, test, decided, paid, systems)

    with mock.patch.object(lodo, "escalation_systems", recorded):
        report = lodo.lodo_report(label_files, cfg, progress=True)
    return load_label_files(label_files), folds, report


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m training.fitting.absence_replay", description=__doc__.split("\n\n")[0])
    p.add_argument("--recipe", required=True, help="checkpoint card whose training recipe the folds use")
    p.add_argument("--labels", action="append", required=True, help="label file (repeat)")
    p.add_argument("--kb", action="append", default=[], help="SET=KB_DIR: the KB a set's labels were answered on")
    p.add_argument("--retrieval", default=None, help="dense | lexical | hybrid (default: the KB's own)")
    p.add_argument("--json", default=None, help="write the report (and the verdicts) here")
    a = p.parse_args(argv)
    from engine.floor.embedder import get_embedder
    from hierarchy.kb import KnowledgeBase
    from training.fitting.fit import config_from_card

    rows, folds, report = lodo_folds(a.labels, config_from_card(a.recipe))
    verdicts: dict = {}
    for spec in a.kb:
        name, path = spec.split("=", 1)
        kb = KnowledgeBase.open(path, get_embedder())
        verdicts.update(gate_verdicts(kb, [r for r in rows if str(r["dataset"]) == name], retrieval=a.retrieval))
    out = gate_report(rows, folds, verdicts)
    for name in folds:  # the replay's committed figure is eval-router's own
        assert out["held_out"][name][ROUTER_RETRY] == report["held_out"][name][ROUTER_RETRY], name
    print(format_gate(out))
    if a.json:
        with open(a.json, "w") as f:
            extra = {"verdicts": verdicts, "retrieval": a.retrieval or "the KB's", "folds": folds}
            json.dump({**out, **extra}, f, indent=1)
    return out


def format_gate(out: dict) -> str:
    lines = [
        f"| left out | {ROUTER_RETRY} score | tokens / q | with the gate: score | tokens / q | kept | climbed "
        "| decisions changed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, f in [*out["held_out"].items(), ("pooled", out["pooled"])]:
        a, b = f[ROUTER_RETRY], f[GATED]
        lines.append(
            f"| {name} | {a['score']} | {a['tokens']:,.0f} | {b['score']} | {b['tokens']:,.0f} | {f['kept']} "
            f"| {f['climbed']} | {f['changed']} |"
        )
    reasons = out["pooled"]["reasons"]
    for side in ("kept", "climbed"):
        for reason, n in sorted(reasons[side].items(), key=lambda kv: -kv[1]):
            lines.append(f"{side}: {n} x {reason}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
