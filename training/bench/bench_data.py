"""What the routing benchmark (training.bench.benchmark) runs on: its configuration, the questions of
its data files, their knowledge bases, and answers it can reuse from label files."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.core.routes import ROUTES, check_routes
from engine.core.routes.logic.config import PRESET_CHOICES
from engine.floor.base.errors import LogicRouteError
from engine.floor.llm.base import DEFAULT_LLM
from training.common.answer_scores import answer_scores, gold_style, metric_name

DEFAULT_THRESHOLDS = (0.25, 0.5, 0.75)
ESCALATE_BELOW = 0.63  # the confidence threshold every leave-one-dataset-out fold fitted (0.60-0.63)


@dataclass
class BenchConfig:
    """One benchmark run; stored in report.json."""

    data: list[str]
    out: str
    n: int | None = field(default=50, metadata={"help": "questions per data file (None = all)"})
    offset: int = field(default=0, metadata={"help": "first question taken from each file"})
    corpus: str | None = field(
        default=None,
        metadata={
            "help": "corpus file of the data files whose questions share one (GraphRAG-Bench); None = the "
            "*_corpus.json beside each. Such a set's KB is its whole corpus, whatever n and kb_questions are"
        },
    )
    kb_per_dataset: bool = field(
        default=False,
        metadata={"help": "one KB per data file (its questions' passages); otherwise one KB over all of them"},
    )
    kb_questions: int | None = field(
        default=None,
        metadata={
            "help": "KB = the passages of the first max(n, kb_questions) questions from offset (more distractors; "
            "None = those of the n questions, the data README's corpus rule)"
        },
    )
    llm_spec: str = DEFAULT_LLM
    checkpoint: str | None = field(default=None, metadata={"help": "router checkpoint (None: shipped generalist)"})
    labels: list[str] = field(
        default_factory=list,
        metadata={"help": "label files (answer scorer) whose per-route answers stand in for fixed-route runs"},
    )
    routes: tuple[str, ...] = ROUTES
    thresholds: tuple[float, ...] = DEFAULT_THRESHOLDS
    metric: str = field(
        default="f1", metadata={"help": "oracle and cost-quality metric: em | f1 | string_acc | rouge_l | coverage"}
    )
    style: str = field(
        default="auto",
        metadata={
            "help": "answer style: short | reader | auto (reader when every data file has sentence answers, "
            "as GraphRAG-Bench does; else short)"
        },
    )
    seed: int = 0
    k: int = 3
    logic_preset: str = field(
        default="auto",
        metadata={
            "help": "the logic route's settings (RoutedRAG.logic_preset): auto | paper | lean; logic answers of "
            "an earlier run are reused only under the same settings"
        },
    )
    concurrency: int = 1
    logic_max_seconds: float | None = field(
        default=1800.0,
        metadata={
            "help": "wall-clock cap of one logic answer (the route's own default makes results depend on "
            "machine load); None = the route's default"
        },
    )
    llm_router: bool = True
    self_check: bool = field(
        default=True,
        metadata={"help": "replay the pipeline's self-check on the router's cheap answers (router+check)"},
    )
    escalate_below: float = field(
        default=ESCALATE_BELOW,
        metadata={
            "help": "router+confidence: a cheap answer whose confidence is below this goes to logic (fitted "
            "leave-one-dataset-out on the short-answer labels: docs/results/router/lodo/lodo_confidence_escalation.md)"
        },
    )
    retrieval: str | None = field(
        default=None,
        metadata={
            "help": "what every route's searches do: dense | lexical | hybrid (None: the KB's own, hybrid for a new KB)"
        },
    )
    cache: bool = True
    retry_errors: bool = False
    show_progress: bool = True
    plots: bool = True

    def __post_init__(self) -> None:
        self.routes = check_routes(self.routes)  # cheapest first
        self.metric = metric_name(self.metric)
        if self.style not in ("auto", "short", "reader"):
            raise LogicRouteError(f"style must be auto, short or reader, got {self.style!r}")
        if self.logic_preset not in PRESET_CHOICES:
            raise LogicRouteError(f"logic_preset must be one of {', '.join(PRESET_CHOICES)}, got {self.logic_preset!r}")
        if not 0.0 < self.escalate_below <= 1.0:
            raise LogicRouteError(f"escalate_below is a probability in (0, 1], got {self.escalate_below}")
        if self.retrieval is not None:
            from hierarchy.retrieval import check_mode

            self.retrieval = check_mode(self.retrieval)
        if any(not 0.0 <= t <= 1.0 for t in self.thresholds):
            raise LogicRouteError(f"thresholds must be in [0, 1], got {list(self.thresholds)}")


@dataclass
class Item:
    """One benchmark question."""

    key: str
    dataset: str
    id: str
    text: str
    answers: list[str]
    type: str | None
    kb: str  # which KB answers it


def fingerprint(ids: Sequence[str]) -> str:
    return hashlib.sha1("\n".join(sorted(ids)).encode()).hexdigest()[:12]


def answer_style(cfg: BenchConfig, data: list[tuple[str, Any, str]]) -> str:
    """The run's answer style: cfg.style, or for "auto" the one every data file's golds need."""
    if cfg.style != "auto":
        return cfg.style
    return "reader" if data and all(gold_style(ds) == "reader" for _, ds, _ in data) else "short"


def load_data(cfg: BenchConfig) -> list[tuple[str, Any, str]]:
    """[(unique dataset name, Dataset, file)]; two files with one format name get suffixes."""
    from hierarchy.datasets import load_dataset

    out, seen = [], {}
    for path in cfg.data:
        ds = load_dataset(path, cfg.n, cfg.offset, corpus=cfg.corpus)
        if not ds.questions:
            raise LogicRouteError(f"{path}: no questions at offset {cfg.offset}")
        name = ds.name
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name}-{seen[name]}"
        out.append((name, ds, str(path)))
    if cfg.corpus and not any(ds.corpus for _, ds, _ in out):
        raise LogicRouteError(f"corpus {cfg.corpus}: no data file reads one (their questions carry their passages)")
    return out


def collect_items(
    cfg: BenchConfig, data: list[tuple[str, Any, str]], notes: list[str]
) -> tuple[dict[str, Item], dict[str, dict]]:
    """(questions by key, passages by id of each KB name): one KB per data file or one for all."""
    from hierarchy.datasets import load_dataset

    items: dict[str, Item] = {}
    kb_passages: dict[str, dict] = {}
    for name, ds, path in data:
        kb_name = name if cfg.kb_per_dataset else "all"
        kb_ds = ds
        # A corpus set's passages are its whole corpus already: more questions add none.
        if cfg.kb_questions and (cfg.n is not None and cfg.kb_questions > cfg.n) and ds.corpus is None:
            kb_ds = load_dataset(path, cfg.kb_questions, cfg.offset)
        kb_passages.setdefault(kb_name, {}).update({p.id: p for p in kb_ds.passages})
        for q in ds.questions:
            key = f"{name}:{q.id}"
            if key in items:
                notes.append(f"{name}: duplicate question id {q.id} taken once")
                continue
            items[key] = Item(key, name, str(q.id), q.text, list(q.answers), q.type, kb_name)
    return items, kb_passages


def build_or_open_kb(path: Path, passages: Sequence, *, show_progress: bool = True):
    """A KB of exactly these passages (doc id = passage id) with extractive summary layers,
    built under `path` once and reused while the passages are the same."""
    from engine.floor.base.files import atomic_write_json
    from hierarchy.kb import KnowledgeBase
    from hierarchy.layers.persist import load_layers
    from hierarchy.layers.update import build_layers
    from training.common.passage_kb import passages_kb

    marker = path.parent / f"{path.name}.bench.json"
    fp = fingerprint([p.id for p in passages])
    if KnowledgeBase.exists(path) and marker.exists():
        try:
            same = json.loads(marker.read_text()).get("passages") == fp
        except ValueError:
            same = False
        if same:
            kb = KnowledgeBase.open(path)
            if load_layers(kb) is None:
                build_layers(kb, summarizer="extractive", show_progress=show_progress)
            return kb
    kb = passages_kb(path, passages, overwrite=True, layers=True, show_progress=show_progress)
    atomic_write_json(marker, {"passages": fp, "n_passages": len(passages)})
    return kb


def open_kbs(
    kb_passages: dict[str, dict],
    make_kb: Callable,
    out: Path,
    show_progress: bool,
    echo: Callable[[str], None],
    retrieval: str | None = None,
) -> tuple[dict, dict[str, str]]:
    """(KB by name, fingerprint by name), each KB under out/kb/<name>. The fingerprint is the
    passages', plus the KB's retrieval when it is not dense: answers found by another retrieval
    are not reused (dense answers stored before lexical retrieval existed stay valid). retrieval:
    what the KBs' searches do in this run (None: each KB's own)."""
    kbs, kb_fp = {}, {}
    for kb_name, passages in kb_passages.items():
        echo(f"knowledge base {kb_name}: {len(passages)} passages")
        kbs[kb_name] = make_kb(out / "kb" / kb_name, list(passages.values()), show_progress=show_progress)
        if retrieval is not None:
            kbs[kb_name].use_retrieval(retrieval)
        kb_fp[kb_name] = fingerprint(list(passages))
        mode = getattr(kbs[kb_name], "retrieval", "dense")
        if mode != "dense":
            kb_fp[kb_name] += f"+{mode}"
    return kbs, kb_fp


def import_labels(
    files: Sequence[str], items: dict[str, Item], routes: Sequence[str], llm_name: str, k: int, notes: list[str]
) -> dict[tuple[str, str], dict]:
    """Per-route answers of answer-scorer label rows (same LLM and k), keyed (route, item key)."""
    from training.labels.labels import read_labels

    got: dict[tuple[str, str], dict] = {}
    for path in files:
        used = skipped = 0
        for row in read_labels(path):
            key = f"{row.get('dataset')}:{row.get('id')}"
            it = items.get(key)
            if it is None:
                continue
            if row.get("scorer") != "answer" or row.get("llm") != llm_name or row.get("k") != k:
                skipped += 1
                continue
            for r in routes:
                pred = (row.get("answers_pred") or {}).get(r)
                cost = (row.get("costs") or {}).get(r)
                if pred is None or cost is None:
                    continue
                got[(r, key)] = {
                    "kind": "answer",
                    "system": r,
                    "key": key,
                    "dataset": it.dataset,
                    "id": it.id,
                    "route": r,
                    "pred": pred,
                    **answer_scores(pred, it.answers),
                    "error": (row.get("errors") or {}).get(r),
                    "llm_calls": cost.get("llm_calls", 0),
                    "prompt_tokens": cost.get("prompt_tokens", 0),
                    "completion_tokens": cost.get("completion_tokens", 0),
                    "cached_calls": cost.get("cached_calls", 0),
                    "seconds": cost.get("seconds", 0.0),
                    "confidence": (row.get("confidence") or {}).get(r),
                    "source": f"labels:{path}",
                }
                used += 1
        notes.append(
            f"labels {path}: {used} route answers reused"
            + (f"; {skipped} matching rows skipped (not answer-scorer rows of {llm_name}, k={k})" if skipped else "")
        )
    return got


def training_overlap(card: dict, items: dict[str, Item]) -> int:
    """How many benchmark questions the router was trained on, by (dataset, id) in the label
    files its card lists (those still readable: training.labels.labels.card_label_paths)."""
    from training.labels.labels import card_label_paths, read_labels

    wanted = {(it.dataset, it.id) for it in items.values()}
    seen: set[tuple[str, str]] = set()
    for p in card_label_paths(card):
        try:
            rows = read_labels(p)
        except LogicRouteError:
            continue
        seen |= {(str(r.get("dataset")), str(r.get("id"))) for r in rows} & wanted
    return len(seen)
