"""The routes and their registry: ROUTES is the one list of route names, `run_route` the one
dispatch. Adding a route means one module and one line in RUNNERS.

Route modules load on first use, so importing this package is instant."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from engine.base.errors import LogicRouteError
from engine.prompts.answer import check_style

if TYPE_CHECKING:
    from engine.base.types import Answer
    from engine.llm.base import LLM
    from engine.routes.logic.config import LogicConfig
    from hierarchy.kb import KnowledgeBase

# Cheapest first: benchmarks, labels and escalation read this order.
ROUTES: tuple[str, ...] = ("chunk", "summary", "logic")
# The routes escalation may leave for "logic".
CHEAP_ROUTES: tuple[str, ...] = ("chunk", "summary")
AUTO = "auto"

RUNNERS: dict[str, str] = {
    "chunk": "engine.routes.chunk:run",
    "summary": "engine.routes.summary:run",
    "logic": "engine.routes.logic.solve:run",
}


def check_route(route: str, *, allow_auto: bool = True) -> str:
    """The route name, or a LogicRouteError naming the choices."""
    if route in ROUTES or (allow_auto and route == AUTO):
        return route
    choices = ((AUTO,) if allow_auto else ()) + ROUTES
    raise LogicRouteError(f"unknown route {route!r}: choose one of {', '.join(choices)}")


def check_routes(routes) -> tuple[str, ...]:
    """Known route names, deduplicated, in registry (cheapest-first) order."""
    bad = [r for r in routes if r not in ROUTES]
    if bad or not routes:
        raise LogicRouteError(f"unknown route(s) {bad}: choose from {', '.join(ROUTES)}")
    return tuple(r for r in ROUTES if r in routes)


def run_route(
    route: str,
    question: str,
    kb: "KnowledgeBase",
    llm: "LLM",
    *,
    k: int = 3,
    logic_config: "LogicConfig | None" = None,
    style: str = "short",
) -> "Answer":
    """Answer `question` on one route in answer `style` (engine.prompts.answer: short | reader).
    The logic route takes `logic_config` (default: LogicConfig(k=k))."""
    module, _, name = RUNNERS[check_route(route, allow_auto=False)].partition(":")
    runner = getattr(importlib.import_module(module), name)
    ans = runner(question, kb, llm, k=k, logic_config=logic_config, style=check_style(style))
    if style == "reader":
        _drop_dangling_citations(ans)
    return ans


def _drop_dangling_citations(ans: "Answer") -> None:
    """A reader answer's [n] that names no listed, numbered source is removed, and flagged."""
    from engine.llm.base import flag
    from engine.routes.common import resolve_citations

    numbered = {s.n for s in ans.sources if s.n is not None}
    text, dropped = resolve_citations(ans.text, numbered)
    ans.trace["citations_dropped"] = dropped
    if dropped:
        flag(ans.trace, f"citation {', '.join(f'[{n}]' for n in dropped)} named no listed source: removed")
        ans.text = text
        if "answer" in ans.trace:
            ans.trace["answer"] = text
