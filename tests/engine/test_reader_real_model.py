"""Reader-style answers with the real local model (`local_llm`) on the invented Velmora corpus:
the two-hop question is answered right on the default logic settings of each style, and on every
route each [n] of a reader answer names a listed, numbered source."""

from __future__ import annotations

import re

import pytest

from engine.core.budget import Budget
from engine.core.routes import LogicRoute, RouteContext, answer_on, make_route
from engine.core.routes.logic.config import preset_config, resolve_preset
from tests.samples import VELMORA

pytestmark = [pytest.mark.local_llm, pytest.mark.embedder]

QUESTION = "Where was the mayor of Velmora born?"


@pytest.fixture(scope="module")
def velmora(tmp_path_factory, real_embedder):
    from engine.floor.llm.factory import make_llm
    from hierarchy.indexing import index_sources

    folder = tmp_path_factory.mktemp("velmora")
    corpus = folder / "velmora.jsonl"
    import json

    corpus.write_text("".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n" for d in VELMORA))
    kb = index_sources(folder / "kb", [corpus], summaries="extractive", embedder=real_embedder).kb
    return kb, make_llm(cache=folder / "llm_cache.sqlite")


def cited(text: str) -> set[int]:
    return {int(n) for m in re.findall(r"\[([\d,\s-]+)\]", text) for n in re.findall(r"\d+", m)}


@pytest.mark.parametrize("style", ["reader", "short"])
def test_the_two_hop_question_is_answered_right_on_each_styles_default_logic_settings(velmora, style):
    kb, llm = velmora
    config = preset_config(resolve_preset("auto", style))
    ans = answer_on(LogicRoute(config, Budget(max_seconds=3600)), QUESTION, RouteContext(kb, llm, style=style))
    assert "kesh" in ans.text.lower(), (ans.text, ans.trace["dag"])
    if style == "reader":
        numbered = {s.n: s.title for s in ans.sources if s.n}
        assert cited(ans.text) and cited(ans.text) <= set(numbered), (ans.text, numbered)
        assert "Odile Brankov" in {numbered[n] for n in cited(ans.text)}  # the passage that says Kesh


@pytest.mark.parametrize("route", ["chunk", "summary", "logic"])
def test_every_citation_of_a_reader_answer_names_a_listed_source(velmora, route):
    kb, llm = velmora
    config = preset_config(resolve_preset("auto", "reader"))
    on = make_route(route, config if route == LogicRoute.name else None).bounded({"max_seconds": 3600})
    ans = answer_on(on, QUESTION, RouteContext(kb, llm, style="reader"))
    numbered = {s.n for s in ans.sources if s.n}
    assert numbered and cited(ans.text) <= numbered, (ans.text, numbered, ans.flags)
