"""The router a knowledge base remembers: `logicroute adapt` fine-tunes a specialist for one KB
and saves it inside the KB (ADAPTED, relative to the KB folder, so a moved or copied KB keeps
it), recorded in the KB's manifest under MANIFEST_ENTRY. `ask`, `serve` and RoutedRAG.open(kb)
route with it unless a checkpoint is named; the loaded Router's `label` says which router
decided, and the answer's trace carries it.

torch loads inside functions (router.checkpoint): importing this is cheap.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from engine.floor.base.errors import CheckpointError

if TYPE_CHECKING:
    from router.checkpoint import Router

MANIFEST_ENTRY = "router"
ADAPTED = Path("router") / "adapted.ckpt"  # inside the KB folder
SHIPPED = "shipped generalist"


def remembered_checkpoint(kb) -> Path | None:
    """The checkpoint the KB's manifest records, or None when it records none. A recorded
    checkpoint that is gone is a CheckpointError: routing with another router unannounced
    would hide it."""
    entry = (getattr(kb, "manifest", None) or {}).get(MANIFEST_ENTRY)
    if not entry:
        return None
    path = Path(kb.path) / entry["checkpoint"]
    if not path.is_file():
        raise CheckpointError(
            f"the knowledge base at {kb.path} records the router {entry['checkpoint']}, which is missing: "
            f"run `logicroute adapt --kb {kb.path}` again, or name a router with --checkpoint"
        )
    return path


def remember(kb, checkpoint: str | Path, info: dict) -> None:
    """Record `checkpoint` (a file inside the KB folder) as the KB's router, with `info` (what it
    was adapted from and on): one manifest commit under the KB's writer lock."""
    rel = Path(checkpoint).resolve().relative_to(Path(kb.path).resolve())
    with kb.writing():
        kb.annotate(MANIFEST_ENTRY, {"checkpoint": rel.as_posix(), **info})


def router_label(path: str | Path | None, kb=None) -> str:
    """How a trace names the router of `path`: the KB's adapted one, the shipped generalist, or
    the checkpoint's path."""
    from router.checkpoint import DEFAULT_CHECKPOINT

    if path is None or Path(path).resolve() == DEFAULT_CHECKPOINT.resolve():
        return SHIPPED
    if kb is not None:
        try:
            mine = remembered_checkpoint(kb)
        except CheckpointError:
            mine = None
        if mine is not None and Path(path).resolve() == mine.resolve():
            return f"adapted (kb) {path}"
    return f"checkpoint {path}"


def load_for_kb(kb, checkpoint: str | Path | None = None, kb_questions: bool = False) -> "Router":
    """The Router for answering from `kb`: `checkpoint` when one is named, else the KB's
    remembered one, else the shipped generalist; its `label` names which. `kb_questions`: its
    out-of-distribution guard also knows questions made from the KB's headings (with_kb_questions).
    On a KB of single passages the list gate is off (its label says so): the summary route would
    answer a list there by the descent, which the router's own probabilities already weigh."""
    from router.checkpoint import load_router

    path = checkpoint if checkpoint is not None else remembered_checkpoint(kb)
    router = load_router(path, embedder=kb.embedder)
    router.label = router_label(router.path, kb)
    fit_to_kb(router, kb)
    if kb_questions:
        with_kb_questions(router, kb)
    return router


def fit_to_kb(router: "Router", kb) -> "Router":
    """`router` as it answers from `kb`: on a KB of single passages its list gate is off (its label
    says so, when it has one), as the summary route's global mode is there. Every path that routes
    a KB's questions outside `load_for_kb` (adapt, its benchmarks) calls this too."""
    from hierarchy.kb_manifest import single_passage_ratio

    per_document = single_passage_ratio(getattr(kb, "manifest", None))
    if router.gate is not None and per_document is not None:  # no documents to gather a list across
        router.gate = None
        off = f"list gate off: the KB's documents are single passages ({per_document:.1f} chunks each)"
        router.label = f"{router.label}; {off}" if router.label else off
    return router


def with_kb_questions(router: "Router", kb) -> None:
    """Add questions made from the KB's headings and titles (hierarchy.kb_questions) to the
    router's out-of-distribution reference set, embedded as the router embeds a question. One
    embedding batch when the router loads (the embedding cache keeps it for the next process)."""
    from hierarchy.kb_questions import heading_questions

    if router.guard is None or not len(kb):
        return
    questions = heading_questions(kb.chunks[c] for c in kb.chunk_ids)
    if questions:
        x = router.inputs(questions)[:, : router.model.config.embed_dim]
        router.guard = router.guard.extended(x, "kb headings")
