"""The routes and their registry. A route is an object (Route): its name, its cost rank, its own
settings, and `answer(question, context)`. ROUTE_TYPES is the one registry: ROUTES (the names,
cheapest first) is read off it, and the CLI's choices, the server's schemas, the OpenAI-compatible
model list, the retry ladder and the benchmarks all take the names from here. Adding a route means
one module and one class below.

A route answers a question already checked (engine.core.routes.common.check_question) in a style
already checked (engine.floor.prompts.answer.check_style): RoutedRAG checks both once per answer, and
`answer_on` does for a caller that runs one route by itself (the benchmarks, the labels).

Route modules load on first use, so importing this package is instant."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

from engine.core.budget import Budget, limits_of
from engine.core.routes.common import check_question
from engine.core.routes.logic.config import LogicConfig
from engine.core.routes.summary_config import SummaryConfig
from engine.floor.base.errors import LogicRouteError
from engine.floor.prompts.answer import answer_messages, check_style
from engine.floor.question.parse import Question, text_of

if TYPE_CHECKING:
    from engine.floor.base.types import Answer
    from engine.floor.llm.base import LLM
    from hierarchy.kb import KnowledgeBase

AUTO = "auto"


@dataclass(frozen=True)
class RouteContext:
    """What every route answers with: the KB, the LLM, the passages per retrieval, the answer
    style (engine.floor.prompts.answer: short | reader), and the chunks already read that the chunk
    route passes over when it looks further."""

    kb: "KnowledgeBase"
    llm: "LLM"
    k: int = 3
    style: str = "short"
    exclude: tuple[str, ...] = ()


class Route(Protocol):
    """A route: `name`, `cost_rank` (0 = cheapest; the order the retry ladder climbs), `cheap`
    (one call over retrieved passages: its answers are checked, and retried up the ladder when
    they say they have none), its own `config` (of type `settings`; None: the route's defaults),
    and `answer`. `bounded(limits)` is the route under a budget's limits (max_llm_calls,
    max_prompt_tokens, max_seconds left for it)."""

    name: ClassVar[str]
    cost_rank: ClassVar[int]
    cheap: ClassVar[bool]
    settings: ClassVar[type | None]
    config: object

    def answer(self, question: str | Question, ctx: RouteContext) -> "Answer": ...

    def bounded(self, limits: dict) -> "Route": ...

    def smallest_prompt(self, question: str | Question, ctx: RouteContext) -> int: ...


@dataclass(frozen=True)
class ChunkRoute:
    """One retrieval over the chunks, one answer call (engine.core.routes.chunk)."""

    name: ClassVar[str] = "chunk"
    cost_rank: ClassVar[int] = 0
    cheap: ClassVar[bool] = True
    settings: ClassVar[type | None] = None
    config: None = None

    def answer(self, question: str | Question, ctx: RouteContext) -> "Answer":
        from engine.core.routes.chunk import answer_chunk

        answer = answer_chunk(text_of(question), ctx.kb, ctx.llm, k=ctx.k, style=ctx.style, exclude=ctx.exclude)
        return _cited(answer, ctx.style)

    def bounded(self, limits: dict) -> "ChunkRoute":
        return self  # one call: nothing for a limit to cut

    def smallest_prompt(self, question: str | Question, ctx: RouteContext) -> int:
        q = text_of(question)
        return _answer_prompt(q, ctx.kb.search(q, k=ctx.k), ctx.style)


@dataclass(frozen=True)
class SummaryRoute:
    """Retrieval from the summary layers, one answer call (engine.core.routes.summary)."""

    name: ClassVar[str] = "summary"
    cost_rank: ClassVar[int] = 1
    cheap: ClassVar[bool] = True
    settings: ClassVar[type | None] = SummaryConfig
    config: SummaryConfig | None = None

    def answer(self, question: str | Question, ctx: RouteContext) -> "Answer":
        from engine.core.routes.summary import answer_summary

        ans = answer_summary(question, ctx.kb, ctx.llm, k=ctx.k, style=ctx.style, config=self.config)
        return _cited(ans, ctx.style)

    def bounded(self, limits: dict) -> "SummaryRoute":
        # One call in the descent: nothing for a limit to cut. The global mode's map calls are
        # cut to what the limits allow (at least one: a budget too small for any call is refused
        # up front by check_a_call_fits).
        if self.config is None or self.config.mode != "global" or not limits:
            return self
        from engine.core.routes.summary_global import bounded_config

        return SummaryRoute(bounded_config(self.config, limits))

    def smallest_prompt(self, question: str | Question, ctx: RouteContext) -> int:
        from engine.core.routes.summary import summary_messages
        from engine.floor.llm.base import estimate_prompt_tokens

        return estimate_prompt_tokens(summary_messages(question, ctx.kb, k=ctx.k, style=ctx.style, config=self.config))


@dataclass(frozen=True)
class LogicRoute:
    """LogicRAG: a DAG of sub-questions solved rank by rank (engine.core.routes.logic). Its config's
    k wins over the context's (no config: LogicConfig(k=ctx.k)); a budget's limits bound it (it
    stops solving and answers from what it found; engine.core.routes.logic.config.caps)."""

    name: ClassVar[str] = "logic"
    cost_rank: ClassVar[int] = 2
    cheap: ClassVar[bool] = False
    settings: ClassVar[type | None] = LogicConfig
    config: LogicConfig | None = None
    budget: Budget | None = None

    def answer(self, question: str | Question, ctx: RouteContext) -> "Answer":
        from engine.core.routes.logic.solve import answer_logic

        cfg = self.config or LogicConfig(k=ctx.k)
        return _cited(answer_logic(question, ctx.kb, ctx.llm, cfg, style=ctx.style, budget=self.budget), ctx.style)

    def bounded(self, limits: dict) -> "LogicRoute":
        return LogicRoute(self.config, Budget(**{**limits_of(self.budget), **limits})) if limits else self

    def smallest_prompt(self, question: str | Question, ctx: RouteContext) -> int:
        # stopped at once, its final answer is the chunk route's prompt at its own k (final_answer.py)
        k, q = self.config.k if self.config else ctx.k, text_of(question)
        return _answer_prompt(q, ctx.kb.search(q, k=k), ctx.style)


def _answer_prompt(question: str, passages: list, style: str) -> int:
    """The estimated prompt tokens of one answer call over `passages`."""
    from engine.floor.llm.base import estimate_prompt_tokens
    from engine.floor.prompts.passages import format_passages

    return estimate_prompt_tokens(answer_messages(question, format_passages(passages), style=style))


ROUTE_TYPES: dict[str, type] = {
    t.name: t for t in sorted((ChunkRoute, SummaryRoute, LogicRoute), key=lambda t: t.cost_rank)
}
# Cheapest first: benchmarks, labels and escalation read this order.
ROUTES: tuple[str, ...] = tuple(ROUTE_TYPES)
# The routes whose answers are checked and may be answered again on a costlier route.
CHEAP_ROUTES: tuple[str, ...] = tuple(n for n, t in ROUTE_TYPES.items() if t.cheap)
# The costliest route: where escalation sends a cheap answer that fails its check.
TOP_ROUTE: str = ROUTES[-1]
# The choices a caller may name: the router's decision, or one route forced.
ROUTE_CHOICES: tuple[str, ...] = (AUTO, *ROUTES)


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


def make_route(name: str, config=None) -> Route:
    """The route `name` with `config` (its own settings type; None: its defaults)."""
    kind = ROUTE_TYPES[check_route(name, allow_auto=False)]
    if config is not None and (kind.settings is None or not isinstance(config, kind.settings)):
        wanted = f"a {kind.settings.__name__}" if kind.settings else "none"
        raise LogicRouteError(f"the {name} route's settings are {wanted}, got {type(config).__name__}")
    return kind(config)


def answer_on(route: "str | Route", question: str, ctx: RouteContext) -> "Answer":
    """One route's answer to a question not checked yet, for callers that run a route by itself:
    the question and the style are checked here, as RoutedRAG checks them."""
    if isinstance(route, str):
        route = make_route(route)
    check_style(ctx.style)
    return route.answer(check_question(question), ctx)


def _cited(ans: "Answer", style: str) -> "Answer":
    """A reader answer's [n] that names no listed, numbered source is removed, and flagged."""
    if style != "reader":
        return ans
    from engine.core.routes.common import resolve_citations

    numbered = {s.n for s in ans.sources if s.n is not None}
    text, dropped = resolve_citations(ans.text, numbered)
    ans.trace.citations_dropped = dropped
    if dropped:
        ans.trace.flag(f"citation {', '.join(f'[{n}]' for n in dropped)} named no listed source: removed")
        ans.text = text
        if "answer" in ans.trace.details:  # the logic route's record of its final answer
            ans.trace.details["answer"] = text
    return ans


def check_a_call_fits(budget: Budget | None, questions: Sequence[str | Question], rag, route: str) -> None:
    """Refuse, before anything is asked, a prompt-token budget too small for the route that will
    answer: `route`, or with "auto" any the router may pick (the largest of them). Each route's
    answer needs one call at least (Route.smallest_prompt: the chunk route's over the question
    and its k best passages, which is also the logic route's final answer when it has to stop at
    once; the summary route's over its context), so a budget below it makes no call and gives a
    blank answer. `rag`: the RoutedRAG whose routes, KB, k and style answer. The prompt is
    estimated as the logic route estimates every call it may make
    (engine.floor.llm.base.estimate_prompt_tokens)."""
    if budget is None or budget.max_prompt_tokens is None or not questions:
        return
    ctx = RouteContext(rag.kb, None, rag.k, rag.style)  # type: ignore[arg-type]  # no call is made
    names = ROUTES if route == AUTO else (check_route(route, allow_auto=False),)
    # the first of equals: the cheapest route named
    need, name = max(((rag.route(n).smallest_prompt(q, ctx), n) for n in names for q in questions), key=lambda t: t[0])
    if budget.max_prompt_tokens < need:
        which = "this question" if len(questions) == 1 else "the batch's largest"
        on = f"the {name} route" + (" (the largest of the routes the router may pick)" if route == AUTO else "")
        raise LogicRouteError(
            f"max_prompt_tokens={budget.max_prompt_tokens} allows no LLM call: the answer prompt for {which} "
            f"takes about {need} tokens on {on}; give at least {need}"
        )
