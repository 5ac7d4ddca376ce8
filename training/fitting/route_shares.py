"""Where routers send a set of questions: the share of each route under the default decision
(engine.core.decide.decide_many: the router, the form policy, the out-of-distribution policy), and the
router's own choice before the guard, for each checkpoint side by side. No retrieval, no LLM call.

    python -m training.fitting.route_shares --checkpoint OLD.ckpt --checkpoint NEW.ckpt \
        --set lists=training/data/global_lists/npm.jsonl:judge --set nq=nq:300:200 [--kb lists=KB] [--json OUT]

A set is FILE[:half] (a JSONL file of questions, e.g. the list questions, `half` tune | judge)
or a shared set NAME:OFFSET:N (questions OFFSET.. of ../shared/data, say past every row the
router trained on). `--kb NAME=DIR` decides NAME's questions as `ask --kb DIR` does: the
out-of-distribution guard also knows the questions made from the KB's headings.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

ROUTES = ("chunk", "summary", "logic")


def read_questions(spec: str) -> list[str]:
    """The questions a --set names: FILE[:half] or NAME:OFFSET:N."""
    parts = spec.split(":")
    if Path(parts[0]).is_file():
        from training.common.jsonl_store import read_jsonl

        half = parts[1] if len(parts) > 1 else "all"
        return [r["question"] for r in read_jsonl(parts[0], strict=True) if half == "all" or r.get("half") == half]
    from training.common.shared_data import resolve_data
    from training.labels.labels import select_questions

    name, offset, n = parts[0], int(parts[1]), int(parts[2])
    questions, _, _ = select_questions(resolve_data(name), n=n, offset=offset)
    return [q.text for q in questions]


def shares(routes: Sequence[str]) -> dict[str, float]:
    counts = Counter(routes)
    return {r: round(counts[r] / max(len(routes), 1), 3) for r in ROUTES}


def route_shares(
    checkpoint: str, sets: dict[str, list[str]], kbs: dict[str, str] | None = None, ood_policy: str = "chunk-escalate"
) -> dict:
    """{set: {"n", "decided": shares, "router": shares, "far": share flagged far}} for one
    checkpoint; a set named in `kbs` is decided with that KB's heading questions in the guard."""
    from engine.core.decide import decide_many
    from router.checkpoint import load_router

    plain = load_router(checkpoint)
    out = {}
    for name, questions in sets.items():
        router = plain
        if name in (kbs or {}):
            from engine.floor.embedder import get_embedder
            from hierarchy.kb import KnowledgeBase
            from router.kb_router import load_for_kb

            router = load_for_kb(KnowledgeBase.open(kbs[name], get_embedder()), checkpoint, kb_questions=True)
        decisions = decide_many(router, questions, None, ood_policy)
        out[name] = {
            "n": len(questions),
            "decided": shares([d.route for d in decisions]),
            "router": shares([d.router_route or d.route for d in decisions]),
            "far": round(sum(bool(d.flag) for d in decisions) / max(len(decisions), 1), 3),
        }
    return out


def markdown(report: dict) -> str:
    lines = [
        "| checkpoint | set | n | decided: chunk / summary / logic | router's own: chunk / summary / logic | far |",
        "|---|---|---|---|---|---|",
    ]
    for ckpt, per_set in report.items():
        for name, f in per_set.items():
            d, r = f["decided"], f["router"]
            lines.append(
                f"| {ckpt} | {name} | {f['n']} | {' / '.join(f'{d[x]:.0%}' for x in ROUTES)} "
                f"| {' / '.join(f'{r[x]:.0%}' for x in ROUTES)} | {f['far']:.0%} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m training.fitting.route_shares", description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", action="append", required=True, help="router checkpoint (repeat)")
    p.add_argument("--set", action="append", required=True, help="NAME=FILE[:half] or NAME=SET:OFFSET:N (repeat)")
    p.add_argument("--kb", action="append", default=[], help="NAME=KB_DIR: decide set NAME as ask --kb does")
    p.add_argument("--json", default=None, help="write the report here")
    a = p.parse_args(argv)
    sets = {}
    for spec in a.set:
        name, _, source = spec.partition("=")
        sets[name] = read_questions(source)
    kbs = dict(spec.split("=", 1) for spec in a.kb)
    report = {ckpt: route_shares(ckpt, sets, kbs) for ckpt in a.checkpoint}
    print(markdown(report))
    if a.json:
        from engine.floor.base.files import atomic_write_json

        atomic_write_json(a.json, report)
    return report


if __name__ == "__main__":
    main()
