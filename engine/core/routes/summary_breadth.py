"""The global mode's breadth that follows the evidence (issue 66, item 2): how many pages a list
question's answer is read from depends on how many pages the KB's words say hold it, not on a
batch count tuned on three corpora.

The first `map_calls` batches come from the fused rankings (engine.core.routes.summary_gather). A
flag that 12 command pages document then often sits on 2-7 of them: the others' chunks rank
below the batches' cut. The lexical evidence names them all, with no LLM call: every page with a
chunk holding each of the question's evidence words (what it quotes, `--dry-run`, else its rare
words). When pages of the evidence are not among the pages the batches showed, the map reads
more batches, the best chunk of each unseen page in turn (one passage a page: breadth, not
depth), until `breadth_calls` calls in all, and stops earlier when a batch names no item the
earlier ones had not (`breadth_stop="no-new-item"`: the evidence ranked best first, a batch that
adds nothing says the rest will add little). Items are only added, never taken away: the first
batches' items stand as they were.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from engine.core.routes.summary_gather import anchors, compress, rare_terms
from engine.floor.base.types import RetrievedChunk

if TYPE_CHECKING:  # pragma: no cover
    from hierarchy.kb import KnowledgeBase

NO_NEW_ITEM = "no-new-item"  # SummaryConfig.breadth_stop's default (BREADTH_STOPS lists the others)


@dataclass(frozen=True)
class Evidence:
    """The question's evidence words and the pages holding all of them in one chunk, best first
    (by that chunk's BM25 score), each with its best chunk."""

    terms: tuple[str, ...]
    best_chunk: dict[str, str]  # document id -> chunk id, in rank order

    @property
    def pages(self) -> list[str]:
        return list(self.best_chunk)


def evidence_terms(question: str, terms: dict[str, float]) -> tuple[str, ...]:
    """What the question quotes (`--dry-run`: dry, run), else its rarest words: the words a page
    must hold to be a candidate."""
    from engine.floor.words import tokens

    quoted = {t for a in anchors(question) for t in tokens(a) if terms.get(t, 0.0) > 0}
    return tuple(sorted(quoted or rare_terms({t: w for t, w in terms.items() if w > 0})))


def evidence(question: str, kb: "KnowledgeBase", terms: dict[str, float]) -> Evidence:
    """The pages whose chunks hold every evidence word (no LLM call; none without a lexical index)."""
    want = evidence_terms(question, terms)
    if not want or kb.postings is None:
        return Evidence(want, {})
    index = kb.lexical_index()
    held: np.ndarray | None = None
    for t in want:
        has = index.scores(t) > 0
        held = has if held is None else held & has
    score = index.scores(" ".join(want))
    rows = np.flatnonzero(held) if held is not None else np.array([], int)
    best: dict[str, str] = {}
    for r in rows[np.lexsort((rows, -score[rows]))].tolist():
        chunk = kb.chunks.get(kb.chunk_ids[r])
        if chunk is not None:
            best.setdefault(chunk.doc_id, chunk.id)
    return Evidence(want, best)


def unseen_passages(
    kb: "KnowledgeBase", found: Evidence, shown_docs: set[str], terms: dict[str, float], words: int
) -> list[RetrievedChunk]:
    """The best chunk of each evidence page the batches did not show, cut as the batches' are."""
    out = []
    for doc in found.pages:
        if doc not in shown_docs:
            p = compress(RetrievedChunk.of(kb.chunks[found.best_chunk[doc]], 0.0), terms, words)
            if p.text:
                out.append(p)
    return out
