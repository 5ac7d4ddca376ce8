"""`logicroute bench retrieval` (issue 42): dense, lexical and hybrid retrieval measured on what
they retrieve, then how fast (training.retrieval.bench_retrieval_scale).

(a) QA sets. One KB per shared set of the passages of its questions 0-199 (training.common.passage_kb:
    doc id = passage id), every question searched in every mode with the same query vector:
    recall@3 and recall@10 of the gold supporting passages (the share of a question's supporting
    passages among the documents of its top-k chunks, averaged over questions with any), and the
    answer-in-context rate (a gold answer string, SQuAD-normalized, inside the top-3 chunks'
    text: training.common.answer_scores.string_acc). Pooled: every question of every set counts once.
(b) What the shipped defaults were fitted on: the title weight, BM25's b and the fusion (convex
    shares, RRF constants) in a grid on other questions of the same files (200-399 of NQ, SQuAD,
    2Wiki and HotpotQA: the dev split), pooled recall@3 first; its rows are in the report.
(c) Documentation questions (training.retrieval.doc_questions): a KB of a real package's Markdown docs,
    hit@3 of the heading each question's answer lives under (the heading in a top-3 chunk's path).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from hierarchy import lexical
from hierarchy.retrieval import CONVEX, DENSE, HYBRID, LEXICAL, RRF, RetrievalConfig
from training.common.answer_scores import string_acc

QA_SETS = ("nq", "squad", "hotpotqa", "2wiki", "musique")
DEV_SETS = ("nq", "squad", "2wiki", "hotpotqa")  # questions 200-399: MuSiQue's shared file has 200 only
DEV_OFFSET = 200
MODES = (DENSE, LEXICAL, HYBRID)
DENSE_WEIGHTS = (0.3, 0.4, 0.5, 0.6, 0.7)  # convex fusion: the dense side's share
RRF_KS = (10, 60)
TITLE_WEIGHTS = (1, 2, 3)
BS = (0.4, 0.75)


@dataclass
class QASet:
    name: str
    kb: object  # hierarchy.kb.KnowledgeBase
    questions: list  # hierarchy.datasets.Question
    vectors: np.ndarray  # the questions embedded once: every mode searches with the same vector


def qa_set(name: str, root: Path, embedder, n: int = 200, offset: int = 0) -> QASet:
    """The KB of a shared set's questions offset..offset+n-1 (built on first use, resumed after), and them."""
    from hierarchy.datasets import load_dataset
    from training.common.passage_kb import passages_kb
    from training.common.shared_data import resolve_data

    ds = load_dataset(resolve_data(name), n=n, offset=offset)
    kb = passages_kb(root / name, ds.passages, embedder, show_progress=False)
    if kb.postings is None:  # built before lexical retrieval, or with another analysis: indexed again now
        kb.set_retrieval(None)
    vectors = np.asarray(kb.embedder.encode([q.text for q in ds.questions]), np.float32)
    return QASet(name, kb, list(ds.questions), vectors)


def qa_scores(qa: QASet, config: RetrievalConfig) -> dict:
    """recall@3, recall@10 and answer-in-context@3 of one set's questions under `config`, with
    the per-question values the pooled figure averages."""
    kb = qa.kb
    kb.use_retrieval(config)
    hits = kb.search_batch(qa.vectors, k=10, texts=[q.text for q in qa.questions])
    kb.use_retrieval(None)
    r3, r10, ctx = [], [], []
    for q, h in zip(qa.questions, hits):
        gold = set(q.supporting)
        if gold:
            r3.append(len(gold & {c.doc_id for c in h[:3]}) / len(gold))
            r10.append(len(gold & {c.doc_id for c in h[:10]}) / len(gold))
        ctx.append(string_acc(" ".join(c.text for c in h[:3]), q.answers))
    return {"recall@3": r3, "recall@10": r10, "answer_in_context@3": ctx}


def means(scores: dict) -> dict:
    return {m: round(100 * float(np.mean(v)), 1) if v else None for m, v in scores.items()} | {
        "questions": len(scores["answer_in_context@3"])
    }


def pooled(per_set: Sequence[dict]) -> dict:
    return means({m: [x for s in per_set for x in s[m]] for m in per_set[0]})


@contextmanager
def analysis(title_weight: int, b: float, sets: Sequence[QASet]):
    """The sets' KBs with their postings made again with this title weight and BM25 b, in memory
    only (the KBs on disk keep the shipped ones); the shipped values back after."""
    saved = lexical.TITLE_WEIGHT, lexical.B, [s.kb.postings for s in sets]
    lexical.TITLE_WEIGHT, lexical.B = title_weight, b
    try:
        for s in sets:
            (number,) = [x["number"] for x in s.kb.manifest["segments"] if x["rows"]]  # passages_kb: one segment
            texts = [lexical.lexical_text(s.kb.chunks[c]) for c in s.kb.chunk_ids]
            s.kb.postings, s.kb._lexical = {number: lexical.Postings.of_texts(s.kb.chunk_ids, texts)}, None
        yield
    finally:
        lexical.TITLE_WEIGHT, lexical.B = saved[0], saved[1]
        for s, postings in zip(sets, saved[2]):
            s.kb.postings, s.kb._lexical = postings, None


def tune(sets: Sequence[QASet], shipped: RetrievalConfig) -> list[dict]:
    """Title weight x BM25 b x fusion (convex dense shares, RRF constants) on the dev sets, pooled,
    best first by recall@3 (ties: recall@10)."""
    fusions = [replace(shipped, fusion=CONVEX, dense_weight=w, lexical_weight=round(1 - w, 2)) for w in DENSE_WEIGHTS]
    fusions += [replace(shipped, fusion=RRF, rrf_k=c, dense_weight=1.0, lexical_weight=1.0) for c in RRF_KS]
    rows = []
    for title_weight, b in itertools.product(TITLE_WEIGHTS, BS):
        with analysis(title_weight, b, sets):
            for cfg in fusions:
                per = [qa_scores(s, cfg) for s in sets]
                rows.append({"title_weight": title_weight, "b": b, **cfg.to_dict(), **pooled(per)})
                rows[-1]["sets"] = {s.name: means(x)["recall@3"] for s, x in zip(sets, per)}
    return sorted(rows, key=lambda r: (-r["recall@3"], -r["recall@10"]))


def run_qa(root: Path, embedder, echo: Callable[[str], None], n: int = 200) -> dict:
    """(a) and (b): the grid on the dev questions, then every mode on the test questions (0-199),
    per set and pooled, the shipped config against dense and against plain RRF."""
    shipped = RetrievalConfig()
    dev = [qa_set(name, root / "dev", embedder, n, DEV_OFFSET) for name in DEV_SETS]
    dense_dev = pooled([qa_scores(s, replace(shipped, mode=DENSE)) for s in dev])
    grid = tune(dev, shipped)
    echo(f"dev: dense recall@3 {dense_dev['recall@3']}, best of the grid {grid[0]['recall@3']}")
    sets = []
    for name in QA_SETS:
        t0 = time.perf_counter()
        sets.append(qa_set(name, root / "test", embedder, n))
        echo(f"{name}: {len(sets[-1].kb)} chunks ({time.perf_counter() - t0:.0f} s)")
    rrf = replace(shipped, fusion=RRF, dense_weight=1.0, lexical_weight=1.0, rrf_k=60.0)
    configs = {m: replace(shipped, mode=m) for m in MODES} | {"hybrid rrf": rrf}
    out: dict = {"dev": {"sets": list(DEV_SETS), "offset": DEV_OFFSET, "dense": dense_dev, "grid": grid}}
    out |= {"shipped": shipped.to_dict(), "analysis": {"title_weight": lexical.TITLE_WEIGHT, "b": lexical.B}}
    raw: dict[str, list[dict]] = {label: [] for label in configs}
    out["sets"] = {}
    for qa in sets:
        row = {}
        for label, cfg in configs.items():
            scores = qa_scores(qa, cfg)
            raw[label].append(scores)
            row[label] = means(scores)
        out["sets"][qa.name] = {"chunks": len(qa.kb), **row}
        echo(f"{qa.name}: " + ", ".join(f"{label} r@3 {m['recall@3']}" for label, m in row.items()))
    out["pooled"] = {label: pooled(raw[label]) for label in configs}
    return out


def heading_hit(hits: Sequence, file: str, heading: str, k: int = 3) -> bool:
    """Whether a top-k chunk lies under `heading` of `file` (the heading in its path)."""
    from engine.floor.base.types import HEADING_SEP

    return any(h.doc_id.endswith(file) and heading in h.heading_path.split(HEADING_SEP) for h in hits[:k])


def run_docs(folder: Path, kb_dir: Path, embedder, echo: Callable[[str], None]) -> dict:
    """(c): hit@3 per mode on the documentation questions, and which questions each mode found."""
    from hierarchy.indexing import index_sources
    from hierarchy.kb import KnowledgeBase
    from training.retrieval.doc_questions import DOC_QUESTIONS

    files = sorted(Path(folder).glob("*.md"))
    if not files:
        raise FileNotFoundError(f"no Markdown files in {folder}")
    t0 = time.perf_counter()
    if KnowledgeBase.exists(kb_dir):
        kb = KnowledgeBase.open(kb_dir, embedder)
    else:  # the .md files alone: the folder also holds the same pages as HTML and JSON
        kb = index_sources(kb_dir, [str(f) for f in files], summaries="none", embedder=embedder, show_progress=False).kb
    echo(f"docs: {len(files)} files, {len(kb)} chunks ({time.perf_counter() - t0:.0f} s)")
    _check_headings(kb, DOC_QUESTIONS)
    qv = np.asarray(kb.embedder.encode([q for q, _, _ in DOC_QUESTIONS]), np.float32)
    out: dict = {"folder": str(folder), "files": len(files), "chunks": len(kb), "questions": len(DOC_QUESTIONS)}
    for mode in MODES:
        hits = kb.search_batch(qv, k=3, texts=[q for q, _, _ in DOC_QUESTIONS], retrieval=mode)
        found = [heading_hit(h, f, head) for h, (_, f, head) in zip(hits, DOC_QUESTIONS)]
        out[mode] = {"hit@3": sum(found), "found": found, "top1": [h[0].heading_path if h else "" for h in hits]}
    return out


def _check_headings(kb, questions) -> None:
    """Each question's heading is the path of some chunk of its file (the benchmark's premise)."""
    from engine.floor.base.types import HEADING_SEP

    paths = {(c.doc_id.rsplit("/", 1)[-1], h) for c in kb.chunks.values() for h in c.heading_path.split(HEADING_SEP)}
    missing = [(f, h) for _, f, h in questions if (f, h) not in paths]
    if missing:
        raise ValueError(f"headings not found in the documentation KB: {missing}")


def save(out_dir: Path, report: dict) -> Path:
    from engine.floor.base.files import atomic_write_json

    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out_dir / "retrieval_hybrid.json", report)
    return out_dir / "retrieval_hybrid.json"


def load(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))
