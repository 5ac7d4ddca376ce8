"""Router labels: for each question, how well and at what cost each route does (the scorers of
training.labels.label_scorers), and the preference vector the router is trained against.

Preference vector: pref = softmax((score - lam * cost / max_cost) / tau) over the routes,
cost = tokens (measured for ``answer``, nominal for ``retrieval``). The oracle route is the
argmax of pref; ties go to the cheaper route. Rows where every route scores 0 are kept and
marked ``all_zero``: no route helps, so training targets the cheapest route for them
(TrainConfig.all_zero="cheapest" in training.fitting.fit), rather than learning noise.

Label files are JSONL (training.common.jsonl_store), one row per question, appended and flushed row
by row; a rerun skips rows already present, so an interrupted run resumes without duplicates.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from engine.core.routes import check_route
from engine.floor.base.errors import LogicRouteError
from training.common.jsonl_store import JsonlStore, read_jsonl
from training.labels.label_scorers import (
    SCORERS,
    LabelConfig,
    answer_route,
    prefetch_vectors,
    score_answer,
    score_retrieval,
)

if TYPE_CHECKING:
    from hierarchy.datasets import Question

PREFETCH_BLOCK = 64  # questions whose embeddings are computed in one batch (retrieval scorer)


# ---------------------------------------------------------------- preference vectors


def route_cost(cost: dict) -> float:
    """The scalar cost a preference uses: tokens (measured, else the nominal estimate)."""
    for key in ("tokens", "tokens_est"):
        if key in cost and cost[key] is not None:
            return float(cost[key])
    return float(cost.get("llm_calls", 0.0))


def preference(scores: dict[str, float], costs: dict[str, float], lam: float, tau: float) -> dict[str, float]:
    """softmax((score - lam * cost / max_cost) / tau), in the order of `scores`."""
    top = max(costs.values()) or 1.0
    utils = {r: scores[r] - lam * costs[r] / top for r in scores}
    m = max(utils.values())
    ex = {r: math.exp((u - m) / tau) for r, u in utils.items()}
    z = sum(ex.values())
    return {r: v / z for r, v in ex.items()}


def oracle_route(pref: dict[str, float], costs: dict[str, float], eps: float = 1e-9) -> str:
    """Argmax of the preference; among (near-)ties the cheaper route, then the earlier one."""
    best = max(pref.values())
    tied = [r for r in pref if pref[r] >= best - eps]
    return min(tied, key=lambda r: (costs.get(r, 0.0), list(pref).index(r)))


def _preferred(scores: dict[str, float], scal: dict[str, float], lam: float, tau: float) -> dict:
    """A row's "pref" (rounded) and "oracle" fields at cost weight `lam`."""
    pref = preference(scores, scal, lam, tau)
    return {"pref": {r: round(p, 6) for r, p in pref.items()}, "oracle": oracle_route(pref, scal)}


def with_cost_weight(row: dict, lam: float) -> dict:
    """The row with its preference and oracle recomputed at cost weight `lam` (its own tau), from
    its measured scores and costs: how much quality a token is worth is the user's trade, made at
    training time, not fixed when the labels were made."""
    scal = {r: route_cost(row["costs"][r]) for r in row["scores"]}
    return {**row, **_preferred(row["scores"], scal, lam, float(row.get("tau", 0.1))), "lam": lam}


def cheapest_route(costs: dict[str, float]) -> str:
    return min(costs, key=lambda r: (costs[r], list(costs).index(r)))


@functools.cache  # the prompts are fixed for the process: one hash per style, not per row
def prompts_fingerprint(style: str = "short") -> str:
    """A short hash of the prompts the routes send in `style` (the answer prompt, the logic route's
    decomposition and step): label rows made with other prompt text are told apart."""
    import json

    from engine.floor.base.files import content_hash
    from engine.floor.prompts.answer import answer_messages
    from engine.floor.prompts.logic import decompose_messages
    from engine.floor.prompts.logic_step import step_messages

    probe = [
        answer_messages("q", "[1] c", "n", style=style),
        decompose_messages("q"),
        step_messages("q", "n", "[1] c", [("q1", "q")], 60, True),
    ]
    return content_hash(json.dumps(probe, sort_keys=True))[:8]


def make_row(
    q: "Question",
    scores: dict[str, float],
    costs: dict[str, dict],
    cfg: LabelConfig,
    index: int | None = None,
    extra: dict | None = None,
) -> dict:
    scal = {r: route_cost(costs[r]) for r in scores}
    row = {
        "id": q.id,
        "dataset": q.dataset,
        "index": index,
        "question": q.text,
        "type": q.type,
        "answers": q.answers,
        "scores": {r: round(float(s), 4) for r, s in scores.items()},
        "costs": costs,
        **_preferred(scores, scal, cfg.lam, cfg.tau),
        "all_zero": max(scores.values()) <= 1e-9,
        "scorer": cfg.scorer,
        "metric": cfg.metric if cfg.scorer == "answer" else "support_recall",
        "llm": cfg.llm,
        "lam": cfg.lam,
        "tau": cfg.tau,
        "k": cfg.k,
    }
    if cfg.scorer == "answer":
        row["style"] = cfg.style
        row["prompts"] = prompts_fingerprint(cfg.style)
    if cfg.stop_score is not None:
        row["stop_score"] = cfg.stop_score
    if cfg.scorer == "answer" and cfg.logic_preset != "paper":
        row["logic_preset"] = cfg.logic_preset
    if extra:
        row.update(extra)
    return row


# ---------------------------------------------------------------- files


def row_key(row: dict) -> str:
    return f"{row.get('dataset')}:{row.get('id')}"


def read_labels(path: str | Path) -> list[dict]:
    """Rows of a label file. A torn last line (an interrupted write) is ignored; a bad line
    elsewhere is a DataFormatError naming the line."""
    return read_jsonl(path, strict=True)


REPO = Path(__file__).resolve().parents[2]
# Label files lived under checkpoints/labels/ until they moved beside the scripts that make them;
# a checkpoint's card (in its safetensors header, never rewritten) still names the old place.
MOVED_LABEL_DIRS = {"checkpoints/labels/": "training/data/labels/"}


def card_label_paths(card: dict | None) -> list[Path]:
    """The training label files a router's card lists that are still on disk: each path as
    written (relative to the cwd, else to the repository), else in the folder it moved to."""
    found = []
    for entry in ((card or {}).get("training") or {}).get("label_files") or []:
        written = str(entry.get("path", "") if isinstance(entry, dict) else entry)
        moved = next(
            (new + written[len(old) :] for old, new in MOVED_LABEL_DIRS.items() if written.startswith(old)), None
        )
        tries = [Path(written), REPO / written] + ([Path(moved), REPO / moved] if moved else [])
        path = next((p for p in tries if written and p.is_file()), None)
        if path is not None:
            found.append(path)
    return found


def select_questions(
    data: str | Path,
    n: int | None = None,
    offset: int = 0,
    stride: int = 1,
    corpus: str | Path | None = None,
    question_type: str | None = None,
):
    """(questions, dataset, indices): questions offset, offset+stride, ... (n of them) and their
    positions in the file. With `question_type`, offset and stride count within the questions of
    that type (GraphRAG-Bench files list their types in blocks). The dataset's passages are those
    of every question in the span read (stride 1: the questions taken), or for a set whose
    questions share a corpus file (`corpus`, else the one beside data) that corpus."""
    from hierarchy.datasets import load_dataset

    if stride < 1:
        raise LogicRouteError(f"stride must be >= 1, got {stride}")
    if question_type is None:
        span = None if n is None else n * stride
        ds = load_dataset(data, n=span, offset=offset, corpus=corpus)
        positions = list(range(offset, offset + len(ds.questions)))[::stride]
        qs = ds.questions[::stride]
    else:
        ds = load_dataset(data, corpus=corpus)
        typed = [i for i, q in enumerate(ds.questions) if q.type == question_type]
        if not typed:
            kinds = sorted({str(q.type) for q in ds.questions})
            raise LogicRouteError(f"{data}: no question of type {question_type!r} (types: {', '.join(kinds)})")
        positions = typed[offset::stride]
        qs = [ds.questions[i] for i in positions]
        if ds.corpus is None:  # per-question passages: those of the questions taken
            keep = {p for q in qs for p in q.passages}
            ds.passages = [p for p in ds.passages if p.id in keep]
    if n is not None:
        qs, positions = qs[:n], positions[:n]
    return qs, ds, positions


def check_kb_matches(questions: Sequence["Question"], kb) -> None:
    """Supporting-passage recall needs KB doc ids = passage ids: refuse a KB built otherwise."""
    sup = {s for q in questions for s in q.supporting}
    if not sup:
        return
    have = set(kb.doc_ids)
    share = len(sup & have) / len(sup)
    if share < 0.5:
        raise LogicRouteError(
            f"only {share:.0%} of the questions' supporting passages are documents of the KB at "
            f"{kb.path}: build the KB from this data file (label --build-kb, or "
            "`logicroute index DATA --kb DIR`)"
        )


def open_label_file(out: Path, cfg: LabelConfig) -> JsonlStore:
    """The label file, ready for appending; refused when it holds another kind of labels."""
    store = JsonlStore(out, key=row_key, strict=True)
    for r in store.rows[:1]:
        if r.get("scorer") != cfg.scorer or tuple(r.get("scores", {})) != tuple(cfg.routes):
            raise LogicRouteError(
                f"{out} holds {r.get('scorer')} labels for routes {list(r.get('scores', {}))}; "
                f"this run makes {cfg.scorer} labels for {list(cfg.routes)}: use another --out"
            )
        held = r.get("logic_preset", "paper")
        if cfg.scorer == "answer" and "logic" in cfg.routes and held != cfg.logic_preset:
            raise LogicRouteError(
                f"{out} holds labels of the {held} logic preset; this run answers with {cfg.logic_preset}: "
                f"give --logic-preset {held} or another --out"
            )
    return store


def label_questions(
    questions: Sequence["Question"],
    kb,
    out: str | Path,
    cfg: LabelConfig,
    *,
    llm=None,
    runner: Callable = answer_route,
    progress: bool = True,
    indices: Sequence[int] | None = None,
    complete: bool = False,
    rerun: tuple[Sequence[dict], Sequence[str]] | None = None,
) -> dict:
    """Label questions into `out` (JSONL), skipping rows already there. Returns counts. With
    `complete`, label nothing new: run the routes a cascade skipped on the rows already there
    (complete_row) and put the full rows in their place. With `rerun` = (rows, routes), label
    from those rows: each selected question's row with `routes` run again under `cfg` (another
    logic preset, say) and the other routes copied."""
    if cfg.scorer not in SCORERS:
        raise LogicRouteError(f"unknown scorer {cfg.scorer!r}: choose {', '.join(SCORERS)}")
    if cfg.scorer == "answer" and llm is None:
        raise LogicRouteError("the answer scorer needs an LLM")
    for r in cfg.routes:
        check_route(r, allow_auto=False)
    out = Path(out)
    store = open_label_file(out, cfg)
    pairs = list(zip(indices or range(len(questions)), questions))
    if runner is answer_route and cfg.logic_preset != "paper":
        runner = functools.partial(answer_route, logic_preset=cfg.logic_preset)
    if complete:
        return _complete_rows(store, pairs, kb, llm, cfg, runner, progress)
    if rerun is not None:
        return _rerun_rows(store, pairs, kb, llm, cfg, runner, progress, *rerun)
    todo = [(i, q) for i, q in pairs if f"{q.dataset}:{q.id}" not in store]
    if cfg.scorer == "retrieval":
        check_kb_matches(questions, kb)
    from tqdm import tqdm

    written = zero = 0
    bar = tqdm(total=len(todo), desc=f"labels {cfg.scorer}", unit="q", file=sys.stderr, disable=not progress)
    vectors: dict = {}
    for j, (i, q) in enumerate(todo):
        if cfg.scorer == "retrieval":
            if j % PREFETCH_BLOCK == 0:
                vectors = prefetch_vectors([x for _, x in todo[j : j + PREFETCH_BLOCK]], kb, cfg.k)
            scores, costs = score_retrieval(q, kb, cfg, vectors)
            extra = None
        else:
            scores, costs, extra = score_answer(q, kb, llm, cfg, runner)
        row = make_row(q, scores, costs, cfg, index=i, extra=extra)
        store.append(row)
        written += 1
        zero += row["all_zero"]
        bar.update(1)
    bar.close()
    return {"written": written, "skipped": len(questions) - len(todo), "all_zero": zero, "out": str(out)}


def complete_row(
    row: dict, q: "Question", kb, llm, cfg: LabelConfig, runner: Callable = answer_route, routes=None
) -> dict:
    """A cascade row (label --stop-score) with the routes it skipped run and measured: the full
    label a run without the cascade makes, the measured routes kept as they are. Under the
    cascade a skipped route carries the upper bound of its score (the cheap route's perfect
    one); "always <that route>" is only measured once it has run. The row lists them under
    "completed". With `routes`, those routes are run again instead, listed under "rerun"."""
    skipped = [r for r in cfg.routes if r in (routes if routes is not None else row.get("skipped", ()))]
    full = replace(cfg, stop_score=None)
    new_scores, new_costs, new_extra = score_answer(q, kb, llm, replace(full, routes=tuple(skipped)), runner)
    scores = {r: new_scores[r] if r in skipped else row["scores"][r] for r in cfg.routes}
    costs = {r: new_costs[r] if r in skipped else row["costs"][r] for r in cfg.routes}
    extra = {}
    for name in ("answers_pred", "confidence", "flags", "errors"):
        merged = {**(row.get(name) or {}), **(new_extra.get(name) or {})}
        if merged:
            extra[name] = merged
    extra["completed" if routes is None else "rerun"] = skipped
    return make_row(q, scores, costs, full, index=row.get("index"), extra=extra)


RERUN_MATCH = ("scorer", "metric", "llm", "k", "style", "prompts")  # what a copied route's score depends on


def _rerun_rows(store: JsonlStore, pairs, kb, llm, cfg: LabelConfig, runner: Callable, progress: bool, src, routes):
    from tqdm import tqdm

    by_key = {row_key(r): r for r in src}
    todo = [(i, q, by_key[k]) for i, q in pairs if (k := f"{q.dataset}:{q.id}") in by_key and k not in store]
    written = zero = 0
    want = {"scorer": cfg.scorer, "metric": cfg.metric, "llm": cfg.llm, "k": cfg.k, "style": cfg.style}
    want["prompts"] = prompts_fingerprint(cfg.style)
    for i, q, row in tqdm(todo, desc="labels rerun", unit="q", file=sys.stderr, disable=not progress):
        differ = [f for f in RERUN_MATCH if f in row and row[f] != want[f]]
        if differ or tuple(row["scores"]) != tuple(cfg.routes):
            raise LogicRouteError(
                f"the row of {row_key(row)} was labelled with other settings ({', '.join(differ) or 'routes'}): "
                "its copied routes would not match this run's; give the same --style, --k, --metric and LLM"
            )
        new = complete_row({**row, "index": row.get("index", i)}, q, kb, llm, cfg, runner, routes=routes)
        store.append(new)
        written += 1
        zero += new["all_zero"]
    return {"written": written, "skipped": len(pairs) - len(todo), "all_zero": zero, "out": str(store.path)}


def _complete_rows(store: JsonlStore, pairs, kb, llm, cfg: LabelConfig, runner: Callable, progress: bool) -> dict:
    from tqdm import tqdm

    todo = [(q, row) for _, q in pairs if (row := store.get(f"{q.dataset}:{q.id}")) and row.get("skipped")]
    done = zero = 0
    for q, row in tqdm(todo, desc="labels complete", unit="q", file=sys.stderr, disable=not progress):
        new = complete_row(row, q, kb, llm, cfg, runner)
        store.replace(new)
        done += 1
        zero += new["all_zero"]
    return {"written": done, "skipped": len(pairs) - len(todo), "all_zero": zero, "out": str(store.path)}
