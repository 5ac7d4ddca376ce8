"""A node of the summary tree, and summarizing one level of it: the node's units (its summary)
and its vector, for the full build (hierarchy.layers.tree) and the incremental update
(hierarchy.layers.update) alike.

A node's summary and vector depend only on its children (their text and vectors), never on the
rest of the KB, so an update that re-summarizes the changed nodes gives what a rebuild of the
same tree gives.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.floor.base.errors import LogicRouteError
from engine.floor.base.progress import progress_bar
from engine.floor.base.trace import Trace
from engine.floor.base.types import Usage
from hierarchy.summarize import SUMMARIZERS, Unit, extractive_batch, llm_summary, render_units
from hierarchy.summarize_lexical import lexical_select

if TYPE_CHECKING:  # pragma: no cover
    from engine.floor.llm.base import LLM
    from hierarchy.kb import KnowledgeBase

LEVEL1_WORDS = 100  # summary word budgets
UPPER_WORDS = 150
EXTRACTIVE_BATCH = 64  # clusters per batched sentence encode, at most
# How an extractive summary scores its candidate sentences (meta.json's "sentence_scoring"):
# LEXICAL (the default) embeds no sentence (hierarchy.summarize_lexical); EMBEDDED embeds every
# candidate sentence and runs MMR on those vectors, ~100 times the build's time. Layers whose
# meta.json lacks the key are EMBEDDED, and their updates keep it, so a node's summary stays what a
# rebuild of that tree gives.
LEXICAL = "lexical"
EMBEDDED = "embedded"
SCORINGS = (LEXICAL, EMBEDDED)
# What a node's vector (the one the summary route's descent ranks) is (meta.json's "node_vectors"):
# SUMMARY_TEXT embeds the rendered summary (RAPTOR's choice; layers without the key have it);
# CHUNK_MEAN is the mean of the vectors of the chunks under it, not normalized, and costs no encode:
# its dot product with a question is the question's mean cosine to those chunks. Normalized, it
# scored summaries above the chunks they cover in the collapsed tree, which then showed fewer
# chunks (-1.4 points of coverage on Medical's Fact Retrieval); the mean keeps a loose cluster
# below its best chunks.
SUMMARY_TEXT = "summary"
CHUNK_MEAN = "chunk-mean"
NODE_VECTORS = (SUMMARY_TEXT, CHUNK_MEAN)
# Past CENTRAL_ABOVE chunks an EMBEDDED level-1 summary picks its sentences from the
# CENTRAL_CHUNKS of its chunks nearest the node's centroid: it embeds every sentence it may pick,
# which is what makes a large build slow. Below it every chunk is read (the cap costs a little
# answer coverage); the same threshold as the stores' exact search.
CENTRAL_CHUNKS = 4
CENTRAL_ABOVE = 20_000
PROGRESS_STEPS = 20  # batches per level, at least, when a level has that many clusters


@dataclass
class Node:
    id: str
    level: int
    children: list[str]
    parent: str | None = None
    units: list[Unit] = field(default_factory=list)

    @property
    def text(self) -> str:
        return render_units(self.units)


def normalize(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n == 0, 1.0, n)


class SummaryRun:
    """What summarizing needs: the KB, the summarizer, the LLM and the running cost."""

    def __init__(
        self,
        kb: "KnowledgeBase",
        summarizer: str,
        llm: "LLM | None",
        show_progress: bool,
        words: tuple[int, int] = (LEVEL1_WORDS, UPPER_WORDS),
        scoring: str = LEXICAL,
        node_vectors: str | None = None,
    ) -> None:
        node_vectors = node_vectors or default_node_vectors(summarizer)
        if summarizer not in SUMMARIZERS:
            raise LogicRouteError(f"unknown summarizer {summarizer!r}: choose one of {', '.join(SUMMARIZERS)}")
        if scoring not in SCORINGS:
            raise LogicRouteError(f"unknown sentence scoring {scoring!r}: choose one of {', '.join(SCORINGS)}")
        if node_vectors not in NODE_VECTORS:
            raise LogicRouteError(f"unknown node vectors {node_vectors!r}: choose one of {', '.join(NODE_VECTORS)}")
        self.scoring = scoring
        self.node_vectors = node_vectors
        self.kb = kb
        self.summarizer = summarizer
        self.llm = llm
        self.show_progress = show_progress
        self.words = words
        self.usage = Usage()
        self.trace = Trace()  # call_llm books the summaries' calls here
        self.sentence_cache: dict[str, np.ndarray] = {}
        self.rows = {c: i for i, c in enumerate(kb.chunk_ids)}
        self.embedded = 0
        self.cpu0 = time.process_time()  # CPU seconds say more than wall time on a shared machine
        self.summary_seconds = 0.0  # choosing the sentences, and embedding them when EMBEDDED
        self.embed_seconds = 0.0  # embedding the finished summaries, one text per node

    def encode(self, texts: list[str]) -> np.ndarray:
        self.embedded += len(texts)
        return self.kb.embedder.encode(texts)


def scoring_of(meta: dict) -> str | None:
    """The sentence scoring of extractive layers from their meta.json (EMBEDDED when it predates
    the key); None for LLM-written ones."""
    if meta.get("summarizer", "extractive") != "extractive":
        return None
    return meta.get("sentence_scoring") or EMBEDDED


def chunk_mean(
    nodes: dict[str, Node], vecs: dict[str, np.ndarray], chunk_vecs: np.ndarray, rows: dict[str, int], n: Node
) -> np.ndarray:
    """The mean of the vectors of the chunks under node n: from the chunks at level 1, above from
    its children's means weighted by the chunks under each (so it depends on its children alone)."""
    if n.level == 1:
        return chunk_vecs[[rows[c] for c in n.children]].mean(axis=0)
    weights = np.array([_chunks_under(nodes, nodes[ch]) for ch in n.children], dtype=np.float32)
    return (weights[:, None] * np.stack([vecs[ch] for ch in n.children])).sum(axis=0) / max(weights.sum(), 1.0)


def _chunks_under(nodes: dict[str, Node], n: Node) -> int:
    return len(n.children) if n.level == 1 else sum(_chunks_under(nodes, nodes[ch]) for ch in n.children)


def default_node_vectors(summarizer: str) -> str:
    """CHUNK_MEAN for extractive layers: free, and the descent from the top held more of the gold
    answers with it than with the summaries' embeddings (docs/results/global/summary_layer_cost.md);
    SUMMARY_TEXT for LLM-written ones, whose embedding is small beside their LLM calls (not measured
    with centroids)."""
    return CHUNK_MEAN if summarizer == "extractive" else SUMMARY_TEXT


def node_vectors_of(meta: dict) -> str:
    """What the nodes' vectors are, from meta.json (SUMMARY_TEXT when it predates the key)."""
    return meta.get("node_vectors") or SUMMARY_TEXT


def summarize_level(
    run: SummaryRun, nodes: dict[str, Node], vecs: dict[str, np.ndarray], ids: Sequence[str], level: int
) -> None:
    """(Re)compute units and embeddings of the given nodes of one level, in place."""
    ids = list(ids)
    if not ids:
        return
    max_words = run.words[0] if level == 1 else run.words[1]
    kb = run.kb

    def passages(n: Node, central: int = 0, center: np.ndarray | None = None) -> list[tuple[str, str]]:
        """The node's text: its chunks (level 1; with `central`, only that many nearest its
        centroid `center`, in their order) or its children's summary sentences."""
        if level == 1:
            kids = list(n.children)
            if central and len(kids) > central:
                v = kb.vectors[[run.rows[c] for c in kids]]
                nearest = np.argsort(-(v @ center), kind="stable")[:central]
                kids = [kids[i] for i in sorted(nearest)]
            return [(kb.chunks[c].title, kb.chunks[c].text) for c in kids]
        return [(u[0], u[1]) for ch in n.children for u in nodes[ch].units]

    def centroid(n: Node) -> np.ndarray:
        if level == 1:
            v = kb.vectors[[run.rows[c] for c in n.children]]
        else:
            v = np.stack([vecs[ch] for ch in n.children])
        return normalize(v.mean(axis=0))

    def sources(n: Node) -> np.ndarray:
        """One vector per passage of the node: its chunk's (level 1) or its child's, per unit."""
        if level == 1:
            return kb.vectors[[run.rows[c] for c in n.children]]
        rows = [vecs[ch] for ch in n.children for _ in nodes[ch].units]
        return np.stack(rows) if rows else np.zeros((0, kb.embedder.dim), np.float32)

    t0 = time.perf_counter()
    bar = progress_bar(len(ids), f"summaries level {level} ({run.summarizer})", "node", run.show_progress)
    try:
        if run.summarizer == "extractive" and run.scoring == LEXICAL:
            for i in ids:
                n = nodes[i]
                n.units = lexical_select(passages(n), sources(n), centroid(n), max_words)
                bar.update(1)
        elif run.summarizer == "extractive":
            # about PROGRESS_STEPS batches per level, so the bar moves on a small KB too
            step = max(1, min(EXTRACTIVE_BATCH, -(-len(ids) // PROGRESS_STEPS)))
            for s in range(0, len(ids), step):
                part = [nodes[i] for i in ids[s : s + step]]
                central = CENTRAL_CHUNKS if len(kb) > CENTRAL_ABOVE else 0
                centers = [centroid(n) for n in part]
                jobs = [(passages(n, central, c), c) for n, c in zip(part, centers)]
                for n, units in zip(part, extractive_batch(jobs, run.encode, max_words, run.sentence_cache)):
                    n.units = units
                bar.update(len(part))
        else:
            for i in ids:
                n = nodes[i]
                n.units = llm_summary(passages(n), run.llm, max_words, usage=run.usage, trace=run.trace)
                bar.update(1)
    finally:
        bar.close()
    t1 = time.perf_counter()
    if run.node_vectors == CHUNK_MEAN:
        new = [chunk_mean(nodes, vecs, kb.vectors, run.rows, nodes[i]) for i in ids]
    else:
        new = list(run.encode([nodes[i].text or nodes[i].id for i in ids]))  # an empty summary still needs a vector
    for i, v in zip(ids, new):
        vecs[i] = np.asarray(v, dtype=np.float32)
    run.summary_seconds += t1 - t0
    run.embed_seconds += time.perf_counter() - t1


def run_cost(run: SummaryRun, t0: float, **extra: Any) -> dict:
    """The cost of a build or an update so far, with `extra` entries first."""
    u = run.usage
    return {
        **extra,
        "summarizer": run.summarizer,
        "seconds": round(time.perf_counter() - t0, 3),
        "cpu_seconds": round(time.process_time() - run.cpu0, 3),
        "llm_calls": u.llm_calls,
        "cached_calls": u.cached_calls,
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.total_tokens,
        "embedded_texts": run.embedded,
        "summary_seconds": round(run.summary_seconds, 3),
        "summary_embed_seconds": round(run.embed_seconds, 3),
        "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
