"""What each bench global system shows the answering model, judged before any LLM call: per
question type, the share of the gold sentence answer's words that the passages shown hold
(coverage of the answer by the context, training.common.answer_scores.coverage), and each system against
the chunk route question by question (paired bootstrap, as the answer report).

A system whose context holds less of the answer than the chunk route's can only beat chunk by
writing better from less; this check costs seconds, where the answers cost hours. It reads the
extractive layers (and the LLM-written ones when a run has built them); the logic route is left
out: its context depends on its own LLM calls.
"""

from __future__ import annotations

from typing import Any

from training.bench.bench_report import markdown_table
from training.global_qa.bench_global_report import BASELINE, paired, versus_baseline
from training.global_qa.bench_global_systems import SYSTEMS, system_settings


def context_systems(systems, built_layers) -> list[str]:
    """The systems whose context needs no LLM call and whose layers exist."""
    return [s for s in systems if SYSTEMS[s].route != "logic" and SYSTEMS[s].layers in built_layers]


def shown_context(system: str, settings: Any, question: str, kb, k: int) -> list:
    """The passages the system's answer call would be shown (engine.floor.base.types.RetrievedChunk)."""
    if SYSTEMS[system].route == "chunk":
        return list(kb.search(question, k=k))
    from engine.core.routes.summary import summary_context

    return summary_context(question, kb, k=k, config=settings)[0]


def context_rows(cfg, questions: list, kbs: dict, systems: list[str]) -> list[dict]:
    """One row per (question, system): the words shown and their coverage of the gold answer."""
    from training.common.answer_scores import coverage

    settings = {s: system_settings(SYSTEMS[s], cfg.k, cfg.wide_chunks, cfg.logic_max_seconds)[0] for s in systems}
    rows = []
    for q in questions:
        for s in systems:
            shown = shown_context(s, settings[s], q.text, kbs[SYSTEMS[s].layers], cfg.k)
            text = " ".join(f"{c.title} {c.text}" if c.title else c.text for c in shown)
            rows.append(
                {
                    "system": s,
                    "qid": q.id,
                    "type": q.type,
                    "words": len(text.split()),
                    "coverage": coverage(text, q.answers),
                }
            )
    return rows


def context_report(rows: list[dict], systems: list[str], types, *, resamples: int, seed: int) -> dict:
    """{type: {system: {n, coverage (%), words, vs_chunk}}}: means per question, and the paired
    difference against the chunk route's context on the same questions (versus_baseline)."""
    versus = versus_baseline(rows, systems, types, resamples=resamples, seed=seed, metrics=("coverage",))
    out: dict = {}
    for t in types:
        out[t] = {}
        for s in systems:
            mine = [r for r in rows if r["type"] == t and r["system"] == s]
            if not mine:
                continue
            out[t][s] = {
                "n": len(mine),
                "coverage": round(100 * sum(r["coverage"] for r in mine) / len(mine), 1),
                "words": round(sum(r["words"] for r in mine) / len(mine), 1),
            }
            if s != BASELINE:
                out[t][s]["vs_chunk"] = versus[t][s]["coverage"]
    return out


OLD_LAYER = "-embedded"  # the suffix of a system's twin on the old extractive layer (every sentence embedded)


def versus_old_layer(rows: list[dict], systems: list[str], types, *, resamples: int, seed: int) -> dict:
    """{type: {system: paired coverage difference}} of each system on the default extractive layer
    against its twin on the old layer (system + OLD_LAYER), when both ran: the same
    questions over the same chunks, so the difference is the layer's alone."""
    by = {(r["system"], r["qid"]): r["coverage"] for r in rows}
    out: dict = {}
    for t in types:
        qids = list(dict.fromkeys(r["qid"] for r in rows if r["type"] == t))
        for s in (s for s in systems if s + OLD_LAYER in systems):
            both = [q for q in qids if (s, q) in by and (s + OLD_LAYER, q) in by]
            old = [by[s + OLD_LAYER, q] for q in both]
            out.setdefault(t, {})[s] = paired([by[s, q] for q in both], old, resamples=resamples, seed=seed)
    return out


def _best_mean(pool: list[str], typed: list) -> float:
    """Mean over the questions of the best coverage of the gold answer by one text of `pool`
    (training.common.answer_scores.coverage, with every text normalized and counted once, not per question)."""
    from collections import Counter

    from engine.floor.base.metrics import normalize_answer
    from training.common.answer_scores import token_recall

    counts = [Counter(normalize_answer(x).split()) for x in pool]
    best = []
    for q in typed:
        golds = [Counter(normalize_answer(a).split()) for a in q.answers]
        best.append(max((token_recall(c, g) for c in counts for g in golds), default=0.0))
    return round(100 * sum(best) / len(typed), 1)


def answer_locality(questions: list, passages: list, kbs: dict) -> dict:
    """{type: ceilings}: the mean coverage of the gold answer by the one passage of the whole
    corpus that holds the most of it, by the best run of 3 adjacent passages (corpus order), and by
    the best single summary node of each layer kind built. No retrieval: what the best possible
    pick could show. Where one passage already holds more than any summary node, the answers
    are local, and a summary cannot add answer words that the chunks lack."""
    from hierarchy.layers.persist import load_layers

    texts = [p.text for p in passages]
    runs = [" ".join(texts[i : i + 3]) for i in range(max(len(texts) - 2, 1))]
    nodes = {kind: [n.text for n in layers.nodes.values()] for kind, kb in kbs.items() if (layers := load_layers(kb))}
    out: dict = {}
    for t in dict.fromkeys(q.type for q in questions):
        typed = [q for q in questions if q.type == t]
        out[t] = {"n": len(typed), "best_passage": _best_mean(texts, typed)}
        out[t]["best_3_adjacent_passages"] = _best_mean(runs, typed)
        out[t].update({f"best_{kind}_summary_node": _best_mean(v, typed) for kind, v in nodes.items()})
    return out


def locality_markdown(locality: dict) -> list[str]:
    keys = list(dict.fromkeys(k for v in locality.values() for k in v if k != "n"))
    lines = [
        "## How local are the answers? (the best possible pick, no retrieval)",
        "",
        "Mean coverage of the gold answer by the single passage of the corpus that holds the most of it, by the best "
        "3 adjacent passages, and by the best single summary node of each layer kind.",
        "",
    ]
    rows = [[t, v["n"], *(v.get(k, "") for k in keys)] for t, v in locality.items()]
    return lines + markdown_table(["question type", "n", *(k.replace("_", " ") for k in keys)], rows) + [""]


def old_layer_markdown(versus: dict, per_type: dict) -> list[str]:
    lines = [
        "## The default extractive layer against the old one",
        "",
        f"Each system on the default layer against its `{OLD_LAYER}` twin (every candidate sentence embedded, "
        "summaries' embeddings as node vectors), question by question: coverage new and old, the mean "
        "difference in points with its paired bootstrap 95% interval, the questions won / lost / tied.",
        "",
    ]
    table = []
    for t, per in versus.items():
        for s, v in per.items():
            if v.get("n"):
                lo, hi = v["ci95"]
                new, old = per_type[t][s]["coverage"], per_type[t][s + OLD_LAYER]["coverage"]
                versus_cell = f"{v['mean_diff']:+.1f} ({lo:+.1f} to {hi:+.1f})"
                table.append([t, s, new, old, versus_cell, f"{v['wins']}/{v['losses']}/{v['ties']}"])
    header = ["question type", "system", "new %", "old %", "new - old", "won/lost/tied"]
    return lines + markdown_table(header, table) + [""]


def context_markdown(report: dict, about: dict[str, str]) -> str:
    lines = [
        "# What each system shows: coverage of the gold answer by its context (no LLM call)",
        "",
        "Per question type, the share of the gold answer's words (normalized, counted with repeats) that "
        "the passages shown to the answer call hold, and the words shown; against chunk, the mean "
        "difference in points with its paired bootstrap 95% interval and the questions won / lost / tied.",
        "",
    ]
    for t, per in report["per_type"].items():
        table = []
        for s, e in per.items():
            v = e.get("vs_chunk")
            versus = ""
            if v and v.get("n"):
                lo, hi = v["ci95"]
                versus = f"{v['mean_diff']:+.1f} ({lo:+.1f} to {hi:+.1f}); {v['wins']}/{v['losses']}/{v['ties']}"
            table.append([s, e["n"], e["coverage"], e["words"], versus, about.get(s, "")])
        lines += [f"## {t}", ""]
        lines += markdown_table(["system", "n", "coverage %", "words shown", "vs chunk", "what it shows"], table)
        lines.append("")
    if report.get("versus_old_layer"):
        lines += old_layer_markdown(report["versus_old_layer"], report["per_type"])
    if report.get("locality"):
        lines += locality_markdown(report["locality"])
    return "\n".join(lines)


def context_main(cfg, *, embedder: Any = None, show_progress: bool = True) -> dict:
    """The context check of `cfg`'s questions and systems: builds the extractive KB when missing
    (no LLM), reads the LLM-written layers only where a run built them, writes context_report.json
    and context_report.md into cfg.out, and returns the report."""
    from pathlib import Path

    from engine.floor.base.files import atomic_write_json, atomic_write_text
    from hierarchy.kb import LAYERS_DIR, KnowledgeBase
    from hierarchy.layers.persist import read_meta
    from training.global_qa.bench_global import load_questions, open_kb

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    ds, questions = load_questions(cfg)
    # Every extractive kind the systems read (and the default one, which chunk reads) is built here.
    kinds = dict.fromkeys(["extractive", *(k for k in cfg.layers_needed() if k != "llm")])
    kbs = {k: open_kb(out / f"kb_{k}", ds.passages, k, embedder, None, show_progress)[0] for k in kinds}
    if (read_meta(out / "kb_llm" / LAYERS_DIR) or {}).get("summarizer") == "llm":
        kbs["llm"] = KnowledgeBase.open(out / "kb_llm", embedder)
    systems = context_systems(cfg.systems, kbs)
    left_out = [s for s in cfg.systems if s not in systems]
    rows = context_rows(cfg, questions, kbs, systems)
    report = {
        "data": ds.name,
        "questions_per_type": {t: sum(1 for q in questions if q.type == t) for t in cfg.types},
        "offset": cfg.offset,
        "k": cfg.k,
        "systems": systems,
        "left_out": left_out,
        "per_type": context_report(rows, systems, cfg.types, resamples=cfg.bootstrap, seed=cfg.seed),
        "versus_old_layer": versus_old_layer(rows, systems, cfg.types, resamples=cfg.bootstrap, seed=cfg.seed),
        "locality": answer_locality(questions, ds.passages, kbs),
    }
    atomic_write_json(out / "context_report.json", report)
    md = context_markdown(report, {s: SYSTEMS[s].about for s in systems})
    if left_out:
        md += f"\nLeft out (the logic route, or LLM-written layers no run has built): {', '.join(left_out)}.\n"
    atomic_write_text(out / "context_report.md", md)
    return report
