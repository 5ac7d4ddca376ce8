"""A knowledge base's searches (hierarchy.kb.KnowledgeBase.search / search_batch): dense through
its vector store, lexical through the postings its segments keep, hybrid fusing the two
(hierarchy.retrieval); and the postings a commit writes (hierarchy.kb_segments.plan_commit).

Every hit carries the chunk's cosine similarity to the query as its score, whichever retriever
found it: the routes compare scores with summary nodes' cosines and the router's signals were
fitted on cosines, so fusion changes which chunks come back and their order, never what a score
means. A hit only the lexical side found gets its cosine from the KB's vectors."""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.floor.base.errors import KBCorruptError, KBError
from engine.floor.base.types import RetrievedChunk
from hierarchy.kb_files import repair_hint
from hierarchy.kb_segments import segments_of
from hierarchy.lexical import LexicalIndex, Postings, lexical_text, top
from hierarchy.retrieval import DENSE, HYBRID, LEXICAL, RRF, Reranker, RetrievalConfig, check_mode, convex, fuse

if TYPE_CHECKING:  # pragma: no cover
    from hierarchy.documents import Chunk


def postings_of(kb: Any, chunks: Sequence["Chunk"], whole: bool) -> Postings:
    """The postings of a new segment holding `chunks`. The whole KB rewritten as one segment
    (compaction, a move to another store) takes the postings the KB has for the chunks it keeps
    and tokenizes only the others; without a lexical index every chunk is tokenized."""
    if not whole or kb.postings is None:
        return Postings.of_texts([c.id for c in chunks], [lexical_text(c) for c in chunks])
    index = kb.lexical_index()
    target = {c.id: i for i, c in enumerate(chunks)}
    old_to_new = np.array([target.get(cid, -1) for cid in kb.chunk_ids] + [-1], np.int64)  # [-1]: row -1 stays -1
    fresh = [c for c in chunks if c.id not in kb.chunks]
    parts = [*index.parts, Postings.of_texts([c.id for c in fresh], [lexical_text(c) for c in fresh])]
    live = [old_to_new[to] for to in index.live] + [np.array([target[c.id] for c in fresh], np.int64)]
    return Postings.merged(parts, live, [c.id for c in chunks])


def search(
    kb: Any, q: np.ndarray, texts: Sequence[str | None], k: int, exclude: set[str], mode: str
) -> list[list[RetrievedChunk]]:
    """Top-k per query row of `q` (texts[i]: its words, None for a vector alone: dense), never a
    chunk in `exclude`, by `mode`."""
    cfg = kb.retrieval_config
    reranker = kb.reranker
    want = max(k, reranker.depth) if reranker is not None else k
    worded = [i for i, t in enumerate(texts) if t is not None]
    if mode == DENSE or not worded:
        return dense(kb, q, k, exclude)
    depth = max(want, cfg.depth)
    need_dense = mode == HYBRID or len(worded) < len(texts)
    dense_hits = dense(kb, q, depth if mode == HYBRID else k, exclude) if need_dense else [[] for _ in texts]
    index = kb.lexical_index()
    skip = np.array(sorted(kb.row_of(c) for c in exclude), np.int64)
    out = []
    for i, text in enumerate(texts):
        if text is None:
            out.append(dense_hits[i][:k])
            continue
        bm25 = index.scores(text)
        rows, _ = top(bm25.copy(), depth if mode == HYBRID else want, skip)
        lexical = [kb.chunk_ids[r] for r in rows]
        if mode == LEXICAL:
            ids = lexical[:want]
        elif cfg.fusion == RRF:
            ranked = [h.chunk_id for h in dense_hits[i]]
            ids = fuse([(ranked, cfg.dense_weight), (lexical, cfg.lexical_weight)], cfg.rrf_k)[:want]
        else:
            ids = _convex(kb, dense_hits[i], q[i], bm25, rows, cfg)[:want]
        cosine = {h.chunk_id: h.score for h in dense_hits[i]}
        hits = [RetrievedChunk.of(kb.chunks[c], cosine[c] if c in cosine else _cosine(kb, c, q[i])) for c in ids]
        if reranker is not None:
            hits = reranker.rerank(text, hits)
        out.append(hits[:k])
    return out


def _convex(kb: Any, hits: list[RetrievedChunk], qv: np.ndarray, bm25: np.ndarray, rows: np.ndarray, cfg) -> list[str]:
    """The union of the dense hits and the lexical top `rows`, best first by the weighted sum of
    their normalized cosine and BM25 score (hierarchy.retrieval.convex); ties: dense order first."""
    ids = list(dict.fromkeys([h.chunk_id for h in hits] + [kb.chunk_ids[r] for r in rows]))
    at = np.array([kb.row_of(c) for c in ids], np.int64)
    cos = kb.vectors[at] @ qv
    listed_cos = np.array([h.score for h in hits])
    score = convex([(cos, listed_cos, cfg.dense_weight), (bm25[at], bm25[rows], cfg.lexical_weight)])
    return [ids[j] for j in np.argsort(-score, kind="stable")]


def _ranked(ids: Sequence[str], score: np.ndarray) -> list[str]:
    return [ids[j] for j in np.argsort(-score, kind="stable")]


def _cosine(kb: Any, chunk_id: str, qv: np.ndarray) -> float:
    return float(kb.vectors[kb.row_of(chunk_id)] @ qv)


def dense(kb: Any, q: np.ndarray, k: int, exclude: set[str]) -> list[list[RetrievedChunk]]:
    """Top-k by cosine through the vector store, best first."""
    # Committed chunks only: a shared store may hold rows of a change under way (hierarchy.kb_stores);
    # the window widens until k committed hits come back or the store runs out.
    k = min(k, len(kb) - len(exclude))
    window = k
    while True:
        found = kb.store.search(q, window, exclude)
        out = [[RetrievedChunk.of(kb.chunks[c], s) for c, s in hits if c in kb.chunks] for hits in found]
        if all(len(o) >= k or len(h) < window for o, h in zip(out, found)):
            return [sorted(o, key=lambda h: -h.score)[:k] for o in out]
        window *= 2


class Searching:
    """The search half of hierarchy.kb.KnowledgeBase (which inherits it): queries in, hits out.
    It reads the KB's committed state (chunks, vectors, store, postings, manifest) and changes none."""

    path: Path
    embedder: Any
    manifest: dict
    chunk_ids: list[str]
    chunks: dict[str, "Chunk"]
    vectors: np.ndarray
    postings: dict[int, Postings] | None
    reranker: Reranker | None
    dim: int
    _row: dict[str, int]
    _retrieval: str | None
    _fusion: RetrievalConfig | None
    _lexical: LexicalIndex | None
    _lexical_lock: threading.Lock

    def __len__(self) -> int:
        return len(self.chunk_ids)

    def row_of(self, chunk_id: str) -> int:
        """The row of a chunk in `chunk_ids` and `vectors`."""
        return self._row[chunk_id]

    def _query_matrix(self, queries: "str | np.ndarray | Sequence[str]") -> np.ndarray:
        if isinstance(queries, str):
            queries = [queries]
        if isinstance(queries, np.ndarray):
            q = queries.astype(np.float32, copy=False)
        else:
            q = np.asarray(self.embedder.encode(list(queries)), dtype=np.float32)
        return np.ascontiguousarray(q.reshape(-1, self.dim))

    def search(
        self,
        query: str | np.ndarray,
        k: int = 3,
        exclude: Collection[str] = (),
        *,
        text: str | None = None,
        retrieval: str | None = None,
    ) -> list[RetrievedChunk]:
        """Top-k chunks, best first, never a chunk id in `exclude` (sampling without replacement:
        each retriever filters them, so k new chunks still come back). Scores are cosines.
        retrieval: dense | lexical | hybrid (default: `self.retrieval`); a query vector searches
        lexically only with its `text`."""
        if k <= 0 or len(self) == 0:
            return []
        words = query if isinstance(query, str) else text
        mode = self._mode(retrieval)
        excluded = {c for c in exclude if c in self._row}
        return search(self, self._query_matrix(query)[:1], [words], k, excluded, mode)[0]

    def search_batch(
        self,
        queries: Sequence[str] | np.ndarray,
        k: int = 3,
        *,
        texts: Sequence[str] | None = None,
        retrieval: str | None = None,
    ) -> list[list[RetrievedChunk]]:
        """Top-k for many queries with one embedding call and one index search (see `search`)."""
        if len(queries) == 0:
            return []
        q = self._query_matrix(queries)
        if k <= 0 or len(self) == 0:
            return [[] for _ in range(len(q))]
        words = list(texts) if texts is not None else [None] * len(q)
        if not isinstance(queries, np.ndarray):
            words = list(queries)
        return search(self, q, words, k, set(), self._mode(retrieval))

    def rank_within(
        self, qv: np.ndarray, ids: Sequence[str], k: int, *, text: str | None = None, retrieval: str | None = None
    ) -> list[RetrievedChunk]:
        """The top-k of the chunks `ids` (all in the KB), as `search` would rank them were they the
        whole KB: what the summary descent's last step does with the chunks under its nodes."""
        mode = self._mode(retrieval)
        rows = np.array([self.row_of(c) for c in ids], np.int64)
        cos = self.vectors[rows] @ np.asarray(qv, np.float32)
        if mode == DENSE or text is None or not len(rows):
            score = cos
        else:
            bm25 = self.lexical_index().scores(text)[rows]
            cfg = self.retrieval_config
            if mode == LEXICAL:
                score = bm25
            elif cfg.fusion == RRF:
                pairs = [(_ranked(ids, cos), cfg.dense_weight), (_ranked(ids, bm25), cfg.lexical_weight)]
                place = {c: i for i, c in enumerate(fuse(pairs, cfg.rrf_k))}
                score = -np.array([place[c] for c in ids], np.float64)
            else:
                score = convex([(cos, cos, cfg.dense_weight), (bm25, bm25[bm25 > 0], cfg.lexical_weight)])
        best = np.lexsort((np.arange(len(rows)), -score))[:k]
        return [RetrievedChunk.of(self.chunks[ids[j]], float(cos[j])) for j in best]

    # -- retrieval --------------------------------------------------------------------------
    @property
    def retrieval_config(self) -> RetrievalConfig:
        """use_retrieval's config, else the manifest's."""
        return self._fusion or RetrievalConfig.of_manifest(self.manifest)

    @property
    def retrieval(self) -> str:
        """What a search does unless told: use_retrieval's, else the manifest's; dense without a lexical index."""
        return self._retrieval or (self.retrieval_config.mode if self.postings is not None else DENSE)

    def use_retrieval(self, mode: str | RetrievalConfig | None) -> None:
        """Search this way from now on (this object only; `index --retrieval` records it in the
        KB): a mode, or a whole config (its fusion too: what a benchmark tunes); None: the KB's
        own again. KBError for lexical or hybrid on a KB without the index."""
        self._fusion = mode if isinstance(mode, RetrievalConfig) else None
        self._retrieval = None if mode is None else self._mode(getattr(mode, "mode", mode))

    def _mode(self, mode: str | None) -> str:
        if mode is None:
            return self.retrieval
        if check_mode(mode) != DENSE and self.postings is None:
            raise KBError(
                f"the knowledge base at {self.path} has no lexical index (written before lexical retrieval): "
                f"`logicroute index --kb {self.path}` adds it"
            )
        return mode

    def lexical_index(self) -> LexicalIndex:
        """The BM25 index of the committed chunks, built at the first lexical search of each state."""
        with self._lexical_lock:
            if self._lexical is None:
                postings = self.postings
                if postings is None:
                    raise KBError(f"the knowledge base at {self.path} has no lexical index")
                parts = [postings[s.number] for s in segments_of(self.manifest, len(self)) if s.rows]
                try:
                    self._lexical = LexicalIndex(parts, self.chunk_ids)
                except KBCorruptError as e:
                    raise KBCorruptError(f"the lexical index of {self.path} {e}; {repair_hint(self.path)}") from e
            return self._lexical
