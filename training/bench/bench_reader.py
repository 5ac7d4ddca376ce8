"""Reader-style answers measured (`logicroute bench reader`): the answer people get from `ask`.

For questions with gold answers (a shared QA set, or the shipped demo corpus), one route in the
reader style. Per question: does the reply contain a gold answer (string accuracy: the
normalized gold inside the normalized reply, citation markers ignored), does it cite a passage
([n]), does it say "Not in the indexed documents", and does it say so wrongly: a gold answer is
in the passages it was shown. Rows are appended to results.jsonl (resumable); report.json and
report.md sum them up.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from engine.core.routes import RouteContext, answer_on, make_route
from engine.core.routes.common import cited_numbers, looks_unanswered
from engine.floor.base.files import atomic_write_json, atomic_write_text
from engine.floor.base.metrics import f1
from training.common.answer_scores import cites, string_acc
from training.common.jsonl_store import JsonlStore, exclusive_folder

DEMO = "demo"
ROUTED = "routed"


def parse_system(spec: str, k: int = 3, max_seconds: float = 3600.0):
    """(style, route, LogicConfig | None) of a system spec "[STYLE:]NAME[+FIELD=VALUE...]":
    STYLE short or reader (default reader); NAME a route (chunk, summary, logic), `routed` (the
    router decides, with the style's defaults and escalation: what `ask` answers) or a logic
    preset (engine.core.routes.logic.config.PRESETS); +FIELD=VALUE sets one field of its
    LogicExperiment on top (a LogicConfig field or a fixed mechanism), for ablations
    ("reader:lean+reshow_best=0"). The wall-clock budget is relaxed as in bench logic, so a
    loaded machine does not change the answers."""
    from dataclasses import fields

    from engine.core.routes import ROUTES
    from engine.core.routes.logic.config import PRESETS
    from training.common.logic_experiment import LogicExperiment, experiment

    style, _, rest = spec.rpartition(":")
    style = style or "reader"
    name, *sets = rest.split("+")
    if style not in ("short", "reader"):
        raise ValueError(f"{spec}: style is short or reader")
    if name == ROUTED or (name in ROUTES and name != "logic"):
        if sets:
            raise ValueError(f"{spec}: only a logic preset takes +FIELD=VALUE")
        return style, name, None
    preset = "paper" if name == "logic" else name
    if preset not in PRESETS:
        raise ValueError(f"{spec}: {name!r} is neither a route nor a logic preset ({', '.join(PRESETS)})")
    types = {f.name: f.type for f in fields(LogicExperiment)}
    over: dict = {}
    for item in sets:
        key, _, value = item.partition("=")
        if key not in types:
            raise ValueError(f"{spec}: unknown LogicExperiment field {key!r}")
        kind = str(types[key])
        cast = {"bool": lambda v: v not in ("0", "false", "False"), "int": int, "float": float}.get(kind, str)
        over[key] = cast(value)
    return style, "logic", experiment(preset, k=k, max_seconds=max_seconds, **over)


def reader_row(qid: str, question: str, golds: Sequence[str], ans, system: str = "") -> dict:
    """One question's measures from its Answer (reader or short style)."""
    shown = " ".join(s.text for s in ans.sources)
    gold_shown = bool(string_acc(shown, list(golds)))  # a gold answer inside the passages shown
    refused = looks_unanswered(ans.text) is not None
    nodes = (ans.trace.dag or {}).get("nodes", []) if ans.route == "logic" else []
    checked = [n["supported"] for n in nodes if n.get("supported") is not None]
    dropped = len(ans.trace.citations_dropped or [])
    return {
        "system": system,
        "id": qid,
        "question": question,
        "answers": list(golds),
        "reply": ans.text,
        "route": ans.route,
        "contains_gold": string_acc(ans.text, list(golds)),
        "f1": round(f1(ans.text, list(golds)), 4),
        "cites": cites(ans.text),
        "citations": len(cited_numbers(ans.text)) + dropped,  # as the model wrote them
        "citations_dangling": dropped,
        "sub_answers_checked": len(checked),
        "sub_answers_unsupported": sum(not x for x in checked),
        "says_not_found": refused,
        "gold_in_passages": gold_shown,
        "wrongly_not_found": refused and gold_shown,
        "llm_calls": ans.usage.llm_calls,
        "tokens": ans.usage.total_tokens,
        "completion_tokens": ans.usage.completion_tokens,
        "seconds": round(ans.usage.seconds, 3),
        "cached_calls": ans.usage.cached_calls,
    }


def summarize(rows: Sequence[dict]) -> dict:
    n = len(rows)

    def share(key: str) -> float:
        return round(sum(bool(r[key]) for r in rows) / n, 3) if n else 0.0

    def mean(key: str) -> float:
        return round(sum(r.get(key, 0) for r in rows) / n, 1) if n else 0.0

    def ratio(part: str, whole: str) -> float | None:
        total = sum(r.get(whole, 0) for r in rows)
        return round(sum(r.get(part, 0) for r in rows) / total, 3) if total else None

    shown = [r for r in rows if r["gold_in_passages"]]
    dangling = ratio("citations_dangling", "citations")
    return {
        "n": n,
        "contains_gold": share("contains_gold"),
        "f1": round(sum(r.get("f1", 0.0) for r in rows) / n, 3) if n else 0.0,
        "cites": share("cites"),
        "citations_resolved": None if dangling is None else round(1 - dangling, 3),
        "sub_answers_unsupported": ratio("sub_answers_unsupported", "sub_answers_checked"),
        "says_not_found": share("says_not_found"),
        "wrongly_not_found": share("wrongly_not_found"),
        "gold_in_passages": share("gold_in_passages"),
        "contains_gold_when_shown": round(sum(r["contains_gold"] for r in shown) / len(shown), 3) if shown else None,
        "llm_calls": mean("llm_calls"),
        "tokens": mean("tokens"),
        "completion_tokens": mean("completion_tokens"),
        "seconds": mean("seconds"),
    }


def demo_questions() -> tuple[list[tuple[str, str, list[str]]], Path]:
    """(id, question, gold answers) of the shipped demo, and its corpus file."""
    import json

    folder = Path(__file__).resolve().parents[2] / "engine" / "demo"
    lines = (folder / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    items = [json.loads(x) for x in lines if x.strip()]
    return [(f"demo-{i}", d["question"], list(d["answers"])) for i, d in enumerate(items)], folder / "corpus.jsonl"


def run_bench_reader(
    items,
    kb,
    llm,
    out: str | Path,
    *,
    route: str = "chunk",
    k: int = 3,
    progress: bool = True,
    systems: Sequence[str] = (),
):
    """Answer `items` [(id, question, golds)] with each system (parse_system; default: `route`
    in the reader style), appending rows to out/results.jsonl (rows already there are kept),
    then write report.json / report.md, the systems side by side."""
    from tqdm import tqdm

    systems = list(systems) or [route]
    parsed = {s: parse_system(s, k) for s in systems}
    with exclusive_folder(out, "bench reader run") as folder:
        store = JsonlStore(folder / "results.jsonl", key=lambda r: (r.get("system") or route, r["id"]))
        todo = [(s, it) for it in items for s in systems if (s, it[0]) not in store]
        t0 = time.perf_counter()
        from engine.core.pipeline import RoutedRAG

        routed = {}  # style -> the RoutedRAG that answers its `routed` system
        for system, (qid, question, golds) in tqdm(todo, desc="bench reader", unit="answer", disable=not progress):
            style, on, cfg = parsed[system]
            if on == ROUTED:
                if style not in routed:
                    routed[style] = RoutedRAG(kb=kb, llm=llm, k=k, style=style)
                ans = routed[style].answer(question)
            else:
                ans = answer_on(make_route(on, cfg), question, RouteContext(kb, llm, k, style))
            store.append(reader_row(qid, question, golds, ans, system))
        by_system = {s: [store.get((s, it[0])) for it in items] for s in systems}
        report = {
            "route": route if len(systems) == 1 else "several",
            "k": k,
            "llm": getattr(llm, "name", "?"),
            **summarize(by_system[systems[0]]),
            "systems": {s: summarize(rows) for s, rows in by_system.items()},
            "fingerprints": {s: _fingerprint(cfg) for s, (_, _, cfg) in parsed.items() if cfg is not None},
        }
        report["seconds_this_run"] = round(time.perf_counter() - t0, 1)
        atomic_write_json(folder / "report.json", report)
        atomic_write_text(folder / "report.md", format_report(report, by_system))
        return report


def format_report(report: dict, by_system: dict[str, Sequence[dict]]) -> str:
    def pct(x) -> str:
        return "-" if x is None else f"{x:.1%}"

    first = next(iter(by_system))
    lines = [
        f"# Reader-style answers: {report['n']} questions, {report['llm']}",
        "",
        "| system | contains a gold answer | F1 | cites a passage | citations resolved | sub-answers no passage "
        "states | says not in the documents | says so wrongly (gold in its passages) | LLM calls / q | tokens / q "
        "| seconds / q |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s, m in report["systems"].items():
        lines.append(
            f"| {s} | {pct(m['contains_gold'])} | {100 * m['f1']:.1f} | {pct(m['cites'])} | "
            f"{pct(m['citations_resolved'])} | {pct(m['sub_answers_unsupported'])} | {pct(m['says_not_found'])} | "
            f"{pct(m['wrongly_not_found'])} | {m['llm_calls']:.1f} | {m['tokens']:,.0f} | {m['seconds']:.1f} |"
        )
    lines += ["", f"Replies of {first}:", "", "| question | gold | reply |", "|---|---|---|"]
    for r in by_system[first][:40]:
        reply = r["reply"].replace("\n", " ").replace("|", "/")
        lines.append(f"| {r['question']} | {'; '.join(r['answers'][:2])} | {reply} |")
    return "\n".join(lines) + "\n"


def _fingerprint(cfg) -> str:
    """A route config's fingerprint: a logic one's as every benchmark stores it (logic_fingerprint)."""
    from engine.core.routes.logic.config import LogicConfig
    from training.common.logic_experiment import logic_fingerprint

    return logic_fingerprint(cfg) if isinstance(cfg, LogicConfig) else cfg.fingerprint()
