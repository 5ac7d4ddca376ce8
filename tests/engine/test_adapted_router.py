"""The router a KB remembers (router.kb_router, written by `logicroute adapt`): RoutedRAG.open
and `ask` route with it unless a checkpoint is named, a named one wins, and the decision trace
says which router decided. The routes themselves are stubbed: what is under test is the choice
of router, not the answers."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from engine.core.pipeline import RoutedRAG
from engine.floor.base.errors import CheckpointError
from engine.floor.base.types import Answer, Usage
from router.kb_router import ADAPTED, SHIPPED, load_for_kb, remember, remembered_checkpoint, router_label
from tests.fakes import ScriptedLLM
from tests.training.adapt_setup import embedder, small_generalist, tiny_kb

QUESTION = "Which volcano eruption lava magma crater ash holds item 3?"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return small_generalist(tmp_path_factory.mktemp("routers") / "router.ckpt")


@pytest.fixture
def kb_with_router(tmp_path, trained):
    """A KB that remembers a router copied into it, as adapt leaves one."""
    kb = tiny_kb(tmp_path / "kb")
    inside = tmp_path / "kb" / ADAPTED
    inside.parent.mkdir()
    shutil.copy(trained, inside)
    remember(kb, inside, {"adapted_from": "test"})
    return kb


@pytest.fixture
def stub_routes(monkeypatch):
    def run_route(self, q, route, budget=None):
        return Answer(text="an answer", route=route, usage=Usage(), trace={"llm_calls": [], "flags": []})

    monkeypatch.setattr(RoutedRAG, "_run_route", run_route)


def test_the_kb_records_its_router_by_a_path_inside_the_kb(kb_with_router):
    entry = json.loads((kb_with_router.path / "manifest.json").read_text())["router"]
    assert entry == {"checkpoint": "router/adapted.ckpt", "adapted_from": "test"}
    assert remembered_checkpoint(kb_with_router) == kb_with_router.path / ADAPTED


def test_routed_rag_routes_with_the_kb_router_and_the_trace_names_it(kb_with_router, stub_routes):
    rag = RoutedRAG(kb=kb_with_router, llm=ScriptedLLM(), retry_unanswered=False)
    ans = rag.answer(QUESTION)
    assert rag.get_router().path == kb_with_router.path / ADAPTED
    assert ans.trace["decision"]["router"] == f"adapted (kb) {kb_with_router.path / ADAPTED}"


def test_a_named_checkpoint_wins_over_the_kb_router(kb_with_router, trained, stub_routes):
    rag = RoutedRAG(kb=kb_with_router, llm=ScriptedLLM(), checkpoint=str(trained), retry_unanswered=False)
    assert rag.answer(QUESTION).trace["decision"]["router"] == f"checkpoint {trained}"


def test_a_kb_without_a_router_uses_the_shipped_generalist(tmp_path):
    kb = tiny_kb(tmp_path / "kb")
    assert remembered_checkpoint(kb) is None and router_label(None, kb) == SHIPPED


def test_a_remembered_router_that_is_gone_is_an_error_not_a_silent_fallback(kb_with_router):
    (kb_with_router.path / ADAPTED).unlink()
    with pytest.raises(CheckpointError, match="missing.*logicroute adapt"):
        load_for_kb(kb_with_router)


def test_ask_uses_the_kb_router_unless_one_is_named(kb_with_router, trained, stub_routes, monkeypatch):
    import engine.floor.embedder as embedder_mod
    import engine.floor.llm.factory as factory
    from engine.face.cli import main

    emb = embedder()
    monkeypatch.setattr(embedder_mod, "get_embedder", lambda *a, **kw: emb)
    monkeypatch.setattr(factory, "make_llm", lambda *a, **kw: ScriptedLLM())
    base = ["ask", QUESTION, "--kb", str(kb_with_router.path), "--json"]
    out = CliRunner().invoke(main, base, catch_exceptions=False)
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["trace"]["decision"]["router"].startswith("adapted (kb)")
    named = CliRunner().invoke(main, [*base, "--set", f"checkpoint={trained}"], catch_exceptions=False)
    assert json.loads(named.output)["trace"]["decision"]["router"] == f"checkpoint {trained}"


def test_a_dry_run_on_an_adapted_kb_names_the_router_and_route_that_ask_answers_with(
    kb_with_router, stub_routes, monkeypatch
):
    import engine.floor.embedder as embedder_mod
    import engine.floor.llm.factory as factory
    from engine.face.cli import main

    emb = embedder()
    monkeypatch.setattr(embedder_mod, "get_embedder", lambda *a, **kw: emb)
    monkeypatch.setattr(factory, "make_llm", lambda *a, **kw: ScriptedLLM())
    base = ["ask", QUESTION, "--kb", str(kb_with_router.path), "--json"]
    answered = json.loads(CliRunner().invoke(main, base, catch_exceptions=False).output)
    dry = CliRunner().invoke(main, [*base, "--dry-run"], catch_exceptions=False)
    assert dry.exit_code == 0, dry.output
    decided = json.loads(dry.output)
    assert decided["router"] == answered["trace"]["decision"]["router"] and decided["router"].startswith("adapted (kb)")
    assert decided["route"] == answered["trace"]["decision"]["route"]
    assert decided["checkpoint"].endswith(str(ADAPTED))
