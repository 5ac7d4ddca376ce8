"""`logicroute bench peers`: the contract every compared system meets, and the registry of them.

A system, logicroute's own routes or a peer such as LightRAG, is one PeerAdapter: it indexes the
set's passages once (`index`, which says what that cost), answers one question at a time
(`answer`, which says what each answer cost) and names every setting it ran with (`settings`,
written into the report). The harness (training/peers/bench_peers_run.py) gives every system the same
passages, questions, LLM and embedder, and scores every answer the same way.

logicroute's rows (chunk, logic, router) go through the same contract: their index is the KB
the routing benchmark builds (no LLM call: extractive summaries), their answers RoutedRAG's.
The peers run in a virtual environment of their own, through a runner subprocess
(training/peers/bench_peers_subprocess.py), so their dependencies never meet ours."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from engine.floor.base.errors import LogicRouteError

Progress = Callable[[int, int], None]  # (passages done, passages in all)


@dataclass
class IndexCost:
    """What one index build (or the part of it done in one run) cost."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    passages: int = 0
    errors: int = 0  # documents the peer reported as failed; the build goes on
    failed_calls: int = 0  # LLM calls the harness could not serve (the peer may have retried them)
    cached_calls: int = 0  # LLM calls the call cache answered; `seconds` counts them at their first run

    def add(self, other: "IndexCost") -> None:
        for k, v in asdict(other).items():
            setattr(self, k, getattr(self, k) + v)


def uncached_seconds(wall: float, usage) -> float:
    """Wall seconds as if no LLM call had come from the cache: a hit takes ~0 s, so a resumed or
    rerun build would otherwise report a fraction of what it costs (engine.floor.base.types.Usage keeps
    each hit's original seconds)."""
    return wall + max(0.0, float(usage.llm_seconds_uncached) - float(usage.llm_seconds))


@dataclass
class PeerAnswer:
    """One answer and its cost. A failed answer has `error` set and is scored as empty."""

    text: str
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    error: str | None = None


@dataclass
class PeerContext:
    """What every system of one run shares: the LLM (engine.floor.llm LLM), the embedder (None: the
    default MiniLM, loaded on first use), a folder of its own, top-k and the answer style."""

    llm: Any
    workdir: Path
    embedder: Any = None
    k: int = 3
    style: str = "short"
    options: dict = field(default_factory=dict)  # per-system settings from the command line
    setup: str = ""  # the run's LLM, passages, k and style: a peer keeps one index per setup


class PeerAdapter:
    """One compared system. Subclasses set `name` and implement the three methods; `close`
    releases what `index` started (a subprocess, a model)."""

    name = "peer"

    def __init__(self, ctx: PeerContext):
        self.ctx = ctx

    def index(self, passages: Sequence, progress: Progress) -> IndexCost:
        """Build (or continue) the index of `passages` (hierarchy.datasets.Passage: id, title,
        text). Called again after an interruption with the passages not yet indexed."""
        raise NotImplementedError

    def answer(self, question: str) -> PeerAnswer:
        """Answer one question from the index; errors are returned in PeerAnswer.error."""
        raise NotImplementedError

    def settings(self) -> dict:
        """Every setting that shapes the answers (version, mode, chunk size, top-k...)."""
        raise NotImplementedError

    def close(self) -> None:
        return None


class LogicrouteAdapter(PeerAdapter):
    """logicroute's own route (`chunk`, `logic`) or its router (`router`, route auto) over the KB
    the routing benchmark builds from the same passages: zero indexing LLM calls."""

    route = "chunk"
    # the KB is built from all the passages at once (no LLM call): built batch by batch, each
    # build would replace the last and leave a KB of the last batch alone
    incremental = False

    def __init__(self, ctx: PeerContext):
        super().__init__(ctx)
        self.rag = None

    def index(self, passages: Sequence, progress: Progress) -> IndexCost:
        import time

        from engine.core.pipeline import RoutedRAG
        from training.bench.bench_data import build_or_open_kb

        t0 = time.perf_counter()
        kb = build_or_open_kb(self.ctx.workdir.parent / "kb", list(passages), show_progress=False)
        preset = self.ctx.options.get("logic_preset", "auto")
        checkpoint = router_checkpoint(kb, self.name) if self.route == "router" else None
        self.rag = RoutedRAG(
            kb=kb, llm=self.ctx.llm, k=self.ctx.k, style=self.ctx.style, logic_preset=preset, checkpoint=checkpoint
        )
        self.rag.retry_unanswered = False  # each system answers as it is, no second route
        progress(len(passages), len(passages))
        return IndexCost(seconds=time.perf_counter() - t0, passages=len(passages))

    def answer(self, question: str) -> PeerAnswer:
        if self.rag is None:
            raise LogicRouteError(f"{self.name}: answer before index")
        from engine.core.pipeline import Budget

        # the routing benchmark's cap: the route's own default would make answers depend on machine load
        budget = Budget(max_seconds=float(self.ctx.options.get("logic_max_seconds", 1800)))
        t0 = time.perf_counter()
        try:
            a = self.rag.answer(question, route="auto" if self.route == "router" else self.route, budget=budget)
        except LogicRouteError as e:  # its seconds, as a peer's failed answer keeps them (its tokens are lost)
            return PeerAnswer("", seconds=round(time.perf_counter() - t0, 3), error=f"{type(e).__name__}: {e}")
        u = a.usage
        seconds = uncached_seconds(u.seconds, u)
        return PeerAnswer(a.text, u.llm_calls, u.prompt_tokens, u.completion_tokens, round(seconds, 3))

    def settings(self) -> dict:
        from engine.core.routes.logic.config import preset_config, resolve_preset

        out: dict[str, Any] = {"route": "auto (router)" if self.route == "router" else self.route, "k": self.ctx.k}
        out["style"] = self.ctx.style
        if self.route != "chunk":  # what RoutedRAG.logic_config() resolves, known before the KB is open
            preset = resolve_preset(self.ctx.options.get("logic_preset", "auto"), self.ctx.style)
            out["logic_preset"] = preset
            from training.common.logic_experiment import logic_fingerprint

            out["logic_config"] = logic_fingerprint(preset_config(preset, k=self.ctx.k))
            out["logic_max_seconds"] = float(self.ctx.options.get("logic_max_seconds", 1800))
        if self.route == "router":
            out["router"] = ADAPTED_ROUTER if self.name == ADAPTED_SYSTEM else "the shipped generalist"
        if self.name == ADAPTED_SYSTEM:  # another `adapt` makes another router: its answers are not these
            out["router_sha1"] = adapted_router_sha1(self.ctx.workdir.parent / "kb", self.ctx.embedder)
        out["indexing"] = "passages as chunks, extractive summary layers (no LLM)"
        return out


ADAPTED_SYSTEM = "router-adapted"
ADAPTED_ROUTER = "the KB's adapted router (logicroute adapt --kb on the bench's KB)"


def router_checkpoint(kb, system: str) -> str:
    """The router a router row decides with: `router` the shipped generalist even on a KB that
    remembers an adapted one (so its rows keep their meaning after `adapt`), `router-adapted` the
    KB's adapted router, an error naming the command when the KB has none."""
    from router.checkpoint import DEFAULT_CHECKPOINT
    from router.kb_router import remembered_checkpoint

    if system != ADAPTED_SYSTEM:
        return str(DEFAULT_CHECKPOINT)
    adapted = remembered_checkpoint(kb)
    if adapted is None:
        raise LogicRouteError(
            f"{system}: the KB at {kb.path} has no adapted router; run `logicroute adapt --kb {kb.path}`"
        )
    return str(adapted)


def adapted_router_sha1(kb_path: Path, embedder=None) -> str | None:
    """The content hash of the adapted router the KB at `kb_path` records; None without a KB or
    without one (indexing then names the missing `adapt`)."""
    from engine.floor.base.files import content_hash
    from hierarchy.kb import KnowledgeBase
    from router.kb_router import remembered_checkpoint

    if not KnowledgeBase.exists(kb_path):
        return None
    checkpoint = remembered_checkpoint(KnowledgeBase.open(kb_path, embedder))
    return content_hash(checkpoint.read_bytes()) if checkpoint is not None else None


def route_adapter(route: str, name: str | None = None) -> type[PeerAdapter]:
    name = name or route
    return type(f"Logicroute_{name.replace('-', '_')}", (LogicrouteAdapter,), {"name": name, "route": route})
