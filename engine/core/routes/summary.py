"""The summary route: retrieval that starts at a summary layer and descends to the chunks
under the chosen summaries, then one answer-only LLM call. SummaryConfig(mode="global") answers
list questions over the whole corpus instead (engine.core.routes.summary_global).

Tree traversal (default): take the top-k nodes of the start level (default: the top), then at
each lower level keep the top-k of their children by cosine to the question, down to the
chunks. Collapsed mode (RAPTOR's "collapsed tree"): rank the nodes of every level and the
chunks together and fill the context in score order.

The context holds the chosen summaries and the chosen chunks within `context_words`. Summary
sentences already present in a chosen chunk are dropped (extractive summaries quote chunks).

Variants (engine.core.routes.summary_config.SummaryConfig, each an ablation row of bench global):
answer_from="summaries" shows the chosen summaries alone; wide_chunks=N shows N > k chunks,
each cut to its sentences closest to the question, within the same word budget.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import TYPE_CHECKING

import numpy as np

from engine.core.routes.chunk import answer_chunk
from engine.core.routes.common import ANSWER_MAX_TOKENS, check_question, clean_answer, note_confidence
from engine.core.routes.summary_config import GLOBAL_MODE, SummaryConfig, mode_for, summary_config
from engine.floor.base.trace import Trace
from engine.floor.base.types import Answer, RetrievedChunk, Usage, numbered_sources
from engine.floor.llm.base import LLM, Stopwatch, call_llm, flag
from engine.floor.prompts.answer import answer_messages
from engine.floor.prompts.passages import format_passages
from engine.floor.question.parse import Question, as_question, text_of

if TYPE_CHECKING:  # pragma: no cover
    from hierarchy.kb import KnowledgeBase
    from hierarchy.layers.tree import Layers

SUMMARY_SHARE = 0.5  # at most this share of the word budget goes to summaries while chunks wait
SUMMARY_MIN_REL = 0.5  # a summary scoring under half the best summary's cosine is not shown
MIN_PIECE_WORDS = 25  # a truncated passage shorter than this carries too little to keep


def _words(text: str) -> int:
    return len(text.split())


def _truncate(text: str, n: int) -> str:
    return " ".join(text.split()[:n])


def _summary_hit(layers: "Layers", node_id: str, score: float, skip: set[str]) -> RetrievedChunk | None:
    """A node as a passage, without sentences the chunks already show."""
    n = layers.nodes[node_id]
    units = [u for u in n.units if " ".join(u[1].split()) not in skip]
    if not units:
        return None
    from hierarchy.summarize import render_units

    text = " ".join(render_units(units).splitlines())
    return RetrievedChunk(
        chunk_id=node_id, doc_id="", title=f"Summary (level {n.level})", text=text, score=float(score), kind="summary"
    )


def _quoted(layers: "Layers", node_id: str, shown: str) -> set[str]:
    """The node's sentences that occur verbatim in the shown chunk text."""
    norm = (" ".join(u[1].split()) for u in layers.nodes[node_id].units)
    return {x for x in norm if x and x in shown}


def _top(ids: list[str], scores: np.ndarray, k: int) -> list[tuple[str, float]]:
    order = np.argsort(-scores, kind="stable")[:k]
    return [(ids[i], float(scores[i])) for i in order]


def _fill(items: list[RetrievedChunk], budget: int) -> tuple[list[RetrievedChunk], int]:
    """Take items in order while they fit; the first that does not fit is cut to the room left."""
    out: list[RetrievedChunk] = []
    used = 0
    for it in items:
        w = _words(it.text)
        room = budget - used
        if w <= room:
            out.append(it)
            used += w
        elif room >= MIN_PIECE_WORDS:
            out.append(replace(it, text=_truncate(it.text, room)))
            used += room
    return out, used


def summary_context(
    question: str,
    kb: "KnowledgeBase",
    *,
    k: int = 3,
    query_vector: np.ndarray | None = None,
    layers: "Layers | None" = None,
    config: SummaryConfig | None = None,
    **options,
) -> tuple[list[RetrievedChunk], dict]:
    """Retrieve the summary route's context with no LLM call.

    Returns (passages in prompt order, visited). Passages are chunks (doc_id set) and
    summaries (kind "summary", chunk_id = node id, title "Summary (level L)"). visited:
    {"start_level", "collapsed", "answer_from", "per_level": {"<level>": [node ids chosen],
    "0": [chunk ids]}, "scores": {id: cosine}, "chunk_ids", "summary_ids", "context_words",
    "flags"}, and "wide" (the sentence cut's record) when wide_chunks cut chunks.
    `config` / `options` (SummaryConfig fields: start_level, collapsed, answer_from,
    context_words, wide_chunks) choose the variant. start_level 0 searches the chunks directly.
    `layers`: the KB's layers when the caller has loaded them already. Raises KBError when the
    KB has no layers."""
    from hierarchy.layers.search import require_layers

    cfg = summary_config(config, options)
    q = check_question(question)
    layers = require_layers(kb) if layers is None else layers
    return _context(q, kb, k, query_vector, layers, cfg)


def _context(
    q: str, kb: "KnowledgeBase", k: int, query_vector: np.ndarray | None, layers: "Layers", cfg: SummaryConfig
) -> tuple[list[RetrievedChunk], dict]:
    """summary_context for a checked question and the layers loaded."""
    flags: list[str] = []
    k = max(1, int(k))
    qv = np.asarray(query_vector if query_vector is not None else kb.embedder.encode([q])[0], dtype=np.float32)
    start = _start_level(layers, cfg.start_level, flags)
    covered = layers.meta.get("chunks")
    if covered is not None and covered != len(kb):
        flags.append(
            f"the summary layers cover {covered} chunks, the KB has {len(kb)}: bring them up to date "
            f"with `logicroute check --repair --kb {kb.path}`"
        )
    per_level: dict[str, list[str]] = {}
    scores: dict[str, float] = {}
    extra: dict = {}
    if cfg.collapsed and layers.top > 0:
        context, used = _collapsed_context(layers, kb, q, qv, k, cfg, per_level, scores)
    else:
        context, used = _tree_context(layers, kb, q, qv, start, k, cfg, per_level, scores, flags, extra)
    visited = {
        "start_level": start,
        "collapsed": bool(cfg.collapsed),
        "answer_from": cfg.answer_from,
        "per_level": per_level,
        "scores": scores,
        "chunk_ids": [c.chunk_id for c in context if not c.is_summary],
        "summary_ids": [c.chunk_id for c in context if c.is_summary],
        "context_words": used,
        **extra,
        "flags": flags,
    }
    return context, visited


def _start_level(layers: "Layers", start_level: int | None, flags: list[str]) -> int:
    """The level the descent starts at (default: the top), clamped to the levels that exist."""
    top = layers.top
    if top == 0:
        flags.append("the summary layers are empty (the KB had no chunks when they were built)")
    if start_level is None:
        return top
    start = int(start_level)
    if start > top or start < 0:
        flags.append(f"start level {start_level} outside 0..{top}; started at {min(max(start, 0), top)}")
        start = min(max(start, 0), top)
    return start


def _chunk_hits(
    kb: "KnowledgeBase", q: str, qv: np.ndarray, ids: list[str], k: int, flags: list[str]
) -> list[RetrievedChunk]:
    """The top-k of the chunks `ids` by the KB's retrieval (dense or hybrid: KnowledgeBase.rank_within);
    ids no longer in the KB are flagged."""
    # the KB's own id -> row map: building one here would cost a pass over every chunk
    live = [c for c in ids if c in kb.chunks]
    if len(live) < len(ids):
        flags.append(f"{len(ids) - len(live)} chunk(s) in the summary layers are no longer in the KB")
    if not live:
        return []
    return kb.rank_within(qv, live, k, text=q)


def _collapsed_context(
    layers: "Layers",
    kb: "KnowledgeBase",
    q: str,
    qv: np.ndarray,
    k: int,
    cfg: SummaryConfig,
    per_level: dict[str, list[str]],
    scores: dict[str, float],
) -> tuple[list[RetrievedChunk], int]:
    """Every level's best nodes and the best chunks compete on one score (RAPTOR's collapsed tree).
    With answer_from="summaries" only the summary nodes compete."""
    context_words = cfg.context_words
    # Enough candidates per level to fill the budget from one level alone (RAPTOR ranks every
    # node; past this many, a level's next node could not fit anyway): a kept piece is at least
    # MIN_PIECE_WORDS long.
    pool_size = max(2 * k, context_words // MIN_PIECE_WORDS + 1)
    cands: list[tuple[str, float]] = []
    for level in range(1, layers.top + 1):
        cands += _top(layers.levels[level - 1], layers.vectors[level - 1] @ qv, pool_size)
    chunks = kb.search(qv, k=pool_size, text=q) if cfg.answer_from == "descend" else []
    for c in chunks:
        scores[c.chunk_id] = round(c.score, 4)
    for nid, s in cands:
        scores[nid] = round(s, 4)
    pool: list[RetrievedChunk] = list(chunks)
    for nid, s in cands:
        hit = _summary_hit(layers, nid, s, set())
        if hit is not None:
            pool.append(hit)
    pool.sort(key=lambda h: -h.score)
    first, _ = _fill(pool, context_words)
    # Drop summary sentences quoted by a chunk that made it in, then fill again.
    shown = " ".join(" ".join(c.text.split()) for c in first if not c.is_summary)
    pool2 = []
    for h in pool:
        if h.is_summary:
            h = _summary_hit(layers, h.chunk_id, h.score, _quoted(layers, h.chunk_id, shown))
            if h is None:
                continue
        pool2.append(h)
    context, used = _fill(pool2, context_words)
    for h in context:
        lvl = str(layers.nodes[h.chunk_id].level) if h.is_summary else "0"
        per_level.setdefault(lvl, []).append(h.chunk_id)
    return context, used


def _tree_context(
    layers: "Layers",
    kb: "KnowledgeBase",
    q: str,
    qv: np.ndarray,
    start: int,
    k: int,
    cfg: SummaryConfig,
    per_level: dict[str, list[str]],
    scores: dict[str, float],
    flags: list[str],
    extra: dict,
) -> tuple[list[RetrievedChunk], int]:
    """Descend from `start`, keeping the top-k children at each level, down to the chunks (the
    top max(k, wide_chunks) of them; none when answering from the summaries alone)."""
    chosen_nodes: list[tuple[str, float]] = []
    n_chunks = max(k, cfg.wide_chunks) if cfg.answer_from == "descend" else 0
    if start == 0:
        chunks = kb.search(qv, k=n_chunks, text=q) if len(kb) and n_chunks else []
    else:
        sel = _top(layers.levels[start - 1], layers.vectors[start - 1] @ qv, k)
        per_level[str(start)] = [i for i, _ in sel]
        chosen_nodes += sel
        for level in range(start - 1, 0, -1):
            kids = [ch for nid, _ in sel for ch in layers.nodes[nid].children]
            s = np.array([float(layers.vector(c) @ qv) for c in kids], dtype=np.float32)
            sel = _top(kids, s, k)
            per_level[str(level)] = [i for i, _ in sel]
            chosen_nodes += sel
        under = [c for nid, _ in sel for c in layers.nodes[nid].children]
        chunks = _chunk_hits(kb, q, qv, under, n_chunks, flags) if n_chunks else []
    if n_chunks:
        per_level["0"] = [c.chunk_id for c in chunks]
    for nid, s in chosen_nodes:
        scores[nid] = round(s, 4)
    for c in chunks:
        scores[c.chunk_id] = round(c.score, 4)
    cut = (lambda cs, room: _cut_to_sentences(kb, q, cs, room, extra)) if cfg.wide_chunks > k else None
    return _tree_passages(layers, chunks, chosen_nodes, cfg.context_words, cut)


def _cut_to_sentences(
    kb: "KnowledgeBase", q: str, chunks: list[RetrievedChunk], room: int, extra: dict
) -> list[RetrievedChunk]:
    """The chunks cut to their sentences closest to the question within `room` words: the logic
    route's zero-token evidence compression, so more chunks share the budget k whole ones fill."""
    from engine.core.routes.logic.evidence import compress_chunks

    # compress_chunks counts ~0.75 words a token and rounds each sentence up: this many tokens
    # never hold more than `room` words.
    cut, record = compress_chunks(chunks, [q], kb.embedder, int(room / 0.75))
    extra["wide"] = {**record, "chunks_in": len(chunks), "chunks_kept": len(cut)}
    return cut


def _tree_passages(
    layers: "Layers",
    chunks: list[RetrievedChunk],
    chosen_nodes: list[tuple[str, float]],
    context_words: int,
    cut=None,
) -> tuple[list[RetrievedChunk], int]:
    """Summaries minus sentences the chunks show, then the chunks, within `context_words`.
    Summaries may use at most SUMMARY_SHARE of the budget while chunks still need room.
    `cut(chunks, room)`, when given, shortens the chunks to the room the summaries leave."""
    shown = " ".join(" ".join(c.text.split()) for c in chunks)
    summaries = []
    best = max((s for _, s in chosen_nodes), default=0.0)
    for nid, s in sorted(chosen_nodes, key=lambda x: -x[1]):
        if s < SUMMARY_MIN_REL * best:  # visited for the descent, too far off to show
            continue
        hit = _summary_hit(layers, nid, s, _quoted(layers, nid, shown))
        if hit is not None:
            summaries.append(hit)
    s_words = sum(_words(h.text) for h in summaries)
    c_words = sum(_words(c.text) for c in chunks)
    s_budget = max(context_words - c_words, min(s_words, int(context_words * SUMMARY_SHARE)))
    s_part, s_used = _fill(summaries, min(s_budget, context_words))
    if cut is not None and chunks:
        chunks = cut(chunks, context_words - s_used)
    c_part, c_used = _fill(chunks, context_words - s_used)
    # Overview first, then the evidence closest to the question.
    return s_part + c_part, s_used + c_used


def answer_summary(
    q: "str | Question",
    kb: "KnowledgeBase",
    llm: LLM,
    *,
    k: int = 3,
    style: str = "short",
    config: SummaryConfig | None = None,
    **options,
) -> Answer:
    """Answer from the summary layers: summary_context (the variant `config` / `options`
    choose, SummaryConfig fields), then one answer-only LLM call. A KB without layers (indexed
    with --summaries none) is answered on the chunk route, flagged. `q` as check_question
    returns it (the route registry's callers check it once)."""
    from hierarchy.layers.persist import load_layers
    from hierarchy.layers.search import BUILD_HINT

    watch = Stopwatch()
    read, q = as_question(q), text_of(q)  # the mode reads the question's answer shape
    cfg = summary_config(config, options)
    layers = load_layers(kb)
    if layers is None:
        ans = answer_chunk(q, kb, llm, k=k, style=style)
        ans.trace.fallback_from = "summary"
        ans.trace.flag(f"the KB has no summary layers: answered on the chunk route ({BUILD_HINT})")
        return ans
    mode, why = mode_for(cfg, read, kb)
    if mode == GLOBAL_MODE:
        from engine.core.routes.summary_global import answer_global

        ans = answer_global(q, kb, llm, layers, cfg, style)
        ans.trace.details["summary_mode"] = f"global: {why}"
        return ans
    usage = Usage()
    trace = Trace(route="summary")
    trace.details["summary_mode"] = f"descend: {why}"
    if cfg != SummaryConfig():
        trace.details["summary_config"] = asdict(cfg)
    context, visited = _context(q, kb, k, None, layers, cfg)
    for f in visited.pop("flags"):
        flag(trace, f)
    trace.details.update(visited)
    trace.retrieved = [{"chunk_id": c.chunk_id, "title": c.title, "score": round(c.score, 4)} for c in context]
    if not context:
        flag(trace, "no context found in the summary layers; answered without passages")
    c = call_llm(
        llm,
        _messages(q, context, style),
        purpose="answer",
        usage=usage,
        trace=trace,
        max_tokens=ANSWER_MAX_TOKENS[style],
    )
    note_confidence(trace, c)
    usage.seconds = watch.elapsed()
    return Answer(
        text=clean_answer(c.text, style), route="summary", usage=usage, trace=trace, sources=numbered_sources(context)
    )


def summary_messages(
    q: "str | Question", kb: "KnowledgeBase", *, k: int = 3, style: str = "short", config: SummaryConfig | None = None
) -> list[dict]:
    """The prompt answer_summary would send for `q` (on a KB without layers, the chunk route's),
    with no LLM call: what a prompt-token budget is checked against."""
    from hierarchy.layers.persist import load_layers

    read, q = as_question(q), text_of(q)
    layers = load_layers(kb)
    if layers is None:
        return answer_messages(q, format_passages(kb.search(q, k=k)), style=style)
    cfg = summary_config(config, {})
    if mode_for(cfg, read, kb)[0] == GLOBAL_MODE:
        from engine.core.routes.summary_global import first_map_messages

        return first_map_messages(q, kb, layers, cfg)
    context, _ = _context(q, kb, k, None, layers, cfg)
    return _messages(q, context, style)


def _messages(q: str, context: list[RetrievedChunk], style: str) -> list[dict]:
    return answer_messages(q, format_passages(context) if context else "(none)", style=style)
