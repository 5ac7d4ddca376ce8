"""The LLM as router, a baseline of the routing benchmark and of eval-router: the LLM is asked
which route should answer a question (engine.floor.prompts' router prompt, a JSON schema of the
route names), and the call's cost is booked like any answer's."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from engine.floor.base.errors import LogicRouteError
from engine.floor.base.trace import Trace
from engine.floor.base.types import Usage
from engine.floor.llm.base import call_llm
from training.fitting.llm_router_prompt import llm_router_messages, llm_router_schema

MAX_TOKENS = 16  # {"route": "summary"} and a little slack


@dataclass
class LLMRouteDecision:
    route: str
    error: str | None = None  # set when the call failed: route is then the cheapest one
    seconds: float = 0.0
    usage: Usage = field(default_factory=Usage)  # every attempt, a failed one included


def llm_route(llm, question: str, routes: Sequence[str]) -> LLMRouteDecision:
    """Ask `llm` to pick one of `routes` (cheapest first) for `question`. A failed call falls
    back to the cheapest route, visibly (error)."""
    usage, trace = Usage(), Trace()
    t0 = time.perf_counter()
    try:
        c = call_llm(
            llm,
            llm_router_messages(question, routes),
            purpose="route",
            usage=usage,
            trace=trace,
            schema=llm_router_schema(routes),
            max_tokens=MAX_TOKENS,
        )
        route, error = c.data["route"], None
    except LogicRouteError as e:
        route, error = routes[0], f"{type(e).__name__}: {e}"
    return LLMRouteDecision(route, error, time.perf_counter() - t0, usage)
