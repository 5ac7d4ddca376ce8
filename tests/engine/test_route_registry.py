"""The route registry: every surface that names routes reads them off it, and a route carries
its own settings."""

from __future__ import annotations

import typing

import pytest

from engine.core.budget import Budget, left_after, limits_of
from engine.core.pipeline import RoutedRAG
from engine.core.routes import (
    CHEAP_ROUTES,
    ROUTE_CHOICES,
    ROUTES,
    TOP_ROUTE,
    ChunkRoute,
    LogicRoute,
    RouteContext,
    SummaryRoute,
    answer_on,
    make_route,
)
from engine.core.routes.logic.config import LogicConfig
from engine.core.routes.summary_config import SummaryConfig
from engine.floor.base.errors import LogicRouteError
from tests.fakes import FakeRouter, HashedBowEmbedder, ScriptedLLM, WordOverlapKB, layered_kb, make_rag
from tests.samples import PASSAGES


def test_the_routes_are_ordered_by_cost_and_the_cheap_ones_climb_to_the_top():
    assert ROUTES == ("chunk", "summary", "logic") and ("auto", *ROUTES) == ROUTE_CHOICES
    assert ROUTES[:-1] == CHEAP_ROUTES and TOP_ROUTE == "logic"


def test_every_surface_that_names_routes_offers_the_registrys_names():
    from engine.core.escalation import RETRY_ROUTES
    from engine.face.cli_ask import ask
    from engine.face.serve.mcp_tools import RouteName
    from engine.face.serve.openai_compat import MODEL_ROUTES
    from engine.face.serve.schemas import QueryBody

    route_option = next(p for p in ask.params if p.name == "route")
    assert tuple(route_option.type.choices) == ROUTE_CHOICES
    assert tuple(QueryBody.model_json_schema()["properties"]["route"]["enum"]) == ROUTE_CHOICES
    assert typing.get_args(RouteName) == ROUTE_CHOICES
    assert tuple(MODEL_ROUTES.values()) == ROUTE_CHOICES
    assert ROUTES[1:] == RETRY_ROUTES


def test_a_route_takes_only_its_own_settings():
    assert make_route("summary", SummaryConfig(context_words=200)).config.context_words == 200
    with pytest.raises(LogicRouteError, match="the chunk route's settings are none"):
        make_route("chunk", LogicConfig())
    with pytest.raises(LogicRouteError, match="a LogicConfig"):
        make_route("logic", SummaryConfig())


def test_a_routed_rag_gives_each_route_its_own_settings_and_resolves_only_that_routes():
    summary = SummaryConfig(collapsed=True)
    rag = make_rag(ScriptedLLM([]), summary_config=summary, logic_preset="paper", k=5)
    assert rag.route("chunk") == ChunkRoute()
    assert rag.route("summary") == SummaryRoute(summary)
    assert rag.route("logic") == LogicRoute(rag.logic_config()) and rag.logic_config().k == 5


def test_a_budget_bounds_the_logic_route_and_what_it_leaves_after_an_attempt():
    budget = Budget(max_llm_calls=8, max_seconds=30.0, threshold=0.4)
    bounded = LogicRoute(LogicConfig(k=4)).bounded(limits_of(budget))
    assert bounded == LogicRoute(LogicConfig(k=4), Budget(max_llm_calls=8, max_seconds=30.0))
    assert ChunkRoute().bounded(limits_of(budget)) == ChunkRoute()  # one call: nothing to cut
    spent = make_rag(ScriptedLLM(["Warsaw"]), style="short").answer("Where was Marie Curie born?", route="chunk")
    left = left_after(budget, spent.usage)
    assert left.max_llm_calls == 7 and left.max_seconds == 30.0 - spent.usage.seconds and left.threshold == 0.4
    assert left_after(None, spent.usage) is None


def test_the_routed_rag_passes_its_summary_settings_to_the_summary_route(tmp_path):
    kb = layered_kb(tmp_path / "kb", HashedBowEmbedder())
    rag = RoutedRAG(kb=kb, llm=ScriptedLLM(["lava"]), router=FakeRouter(), summary_config=SummaryConfig(collapsed=True))
    ans = rag.answer("Which volcano eruption had lava?", route="summary")
    assert ans.route == "summary" and ans.trace["collapsed"] and ans.trace["summary_config"]["collapsed"]


def test_a_routed_rag_builds_its_routes_from_its_settings_as_they_are_at_answer_time():
    rag = make_rag(ScriptedLLM(), style="short", logic_preset="paper")
    rag.k, rag.summary_config = 5, SummaryConfig(context_words=200)
    assert rag.route("logic").config == LogicConfig(k=5) and rag.route("summary").config.context_words == 200
    assert rag.route("logic", Budget(max_llm_calls=4)).budget.max_llm_calls == 4
    with pytest.raises(LogicRouteError, match="unknown route"):
        rag.route("auto")


def test_a_route_run_by_itself_checks_the_question_and_the_style_first():
    kb, llm = WordOverlapKB.titled(PASSAGES), ScriptedLLM(["Warsaw"])
    with pytest.raises(LogicRouteError, match="style"):
        answer_on("chunk", "Where was Marie Curie born?", RouteContext(kb, llm, style="long"))
    ans = answer_on("chunk", "  Where was   Marie Curie born? ", RouteContext(kb, llm))
    assert ans.text == "Warsaw" and "Question: Where was Marie Curie born?" in llm.calls[0]["messages"][-1]["content"]
