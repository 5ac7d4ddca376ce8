"""The summary route's variants (engine.core.routes.summary_config.SummaryConfig): answering from the
summaries alone, more than k chunks cut to their best sentences within the same word budget, the
collapsed tree over every level; each checked against the default descent on a fake-embedder KB
of eight topics, with a scripted LLM."""

from __future__ import annotations

import pytest

from engine.core.routes.summary import MIN_PIECE_WORDS, answer_summary, summary_context
from engine.core.routes.summary_config import SummaryConfig, summary_config
from engine.floor.base.errors import LogicRouteError
from hierarchy.kb import KnowledgeBase
from hierarchy.layers.persist import load_layers
from hierarchy.layers.update import build_layers
from hierarchy.summarize import split_sentences
from tests.fakes import HashedBowEmbedder, ScriptedLLM
from tests.samples import make_docs

Q = "volcano eruption lava magma crater"


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    """48 one-chunk documents of ~48 words, 12 level-1 clusters of 4 under 3 level-2 nodes."""
    kb = KnowledgeBase.create(
        tmp_path_factory.mktemp("kb") / "kb", HashedBowEmbedder(dim=128), chunk_words=200, overlap_words=0
    )
    kb.add(make_docs(), show_progress=False)
    build_layers(kb, show_progress=False, cluster_size=4)
    return kb


def words(chunks) -> int:
    return sum(len(c.text.split()) for c in chunks)


# ---------------------------------------------------------------- defaults


def test_the_default_config_is_the_route_as_it_shipped(kb):
    assert SummaryConfig() == SummaryConfig(
        start_level=None, collapsed=False, answer_from="descend", context_words=450, wide_chunks=0
    )
    plain = summary_context(Q, kb, k=2)
    assert summary_context(Q, kb, k=2, config=SummaryConfig()) == plain
    # asking for no more chunks than k is no widening at all
    assert summary_context(Q, kb, k=2, wide_chunks=2) == plain
    ans = answer_summary(Q, kb, ScriptedLLM(["x"]), k=2)
    assert "summary_config" not in ans.trace and ans.trace["answer_from"] == "descend"


# ---------------------------------------------------------------- answer from the summaries


def test_answering_from_the_summaries_shows_the_descents_summaries_alone(kb):
    ctx, v = summary_context(Q, kb, k=2, answer_from="summaries")
    assert ctx and all(c.is_summary for c in ctx)
    assert v["chunk_ids"] == [] and "0" not in v["per_level"] and v["answer_from"] == "summaries"
    chosen = {n for level, ids in v["per_level"].items() for n in ids}
    assert set(v["summary_ids"]) <= chosen  # the nodes the descent chose, no others
    assert [c.score for c in ctx] == sorted((c.score for c in ctx), reverse=True)
    # The summaries get the whole budget, not the share they get beside chunks.
    descend, _ = summary_context(Q, kb, k=2)
    assert v["context_words"] > words(c for c in descend if c.is_summary)
    assert v["context_words"] <= 450


def test_an_answer_from_the_summaries_cites_only_summaries_and_records_its_config(kb):
    llm = ScriptedLLM(["Lava and magma [1]."])
    ans = answer_summary(Q, kb, llm, k=2, style="reader", answer_from="summaries")
    assert ans.text == "Lava and magma [1]." and ans.usage.llm_calls == 1
    assert ans.sources and all(s.kind == "summary" for s in ans.sources)
    assert ans.trace["summary_config"]["answer_from"] == "summaries" and ans.trace["chunk_ids"] == []
    assert "Summary (level" in llm.calls[0]["messages"][-1]["content"]


# ---------------------------------------------------------------- more chunks, same budget


def test_wide_chunks_show_more_than_k_chunks_cut_to_sentences_within_the_same_budget(kb):
    layers = load_layers(kb)
    ctx, v = summary_context(Q, kb, k=2, context_words=150, wide_chunks=8)
    _, narrow = summary_context(Q, kb, k=2, context_words=150)
    assert len(v["chunk_ids"]) > 2 >= len(narrow["chunk_ids"])
    assert v["context_words"] <= 150 and words(ctx) == v["context_words"]
    # still the descent: the chunks lie under the level-1 summaries it chose
    assert {layers.assignment()[c] for c in v["chunk_ids"]} <= set(v["per_level"]["1"])
    for c in ctx:
        if not c.is_summary:  # a chunk shows some of its own sentences, in their order
            own = split_sentences(kb.chunks[c.chunk_id].text)
            shown = split_sentences(c.text)
            assert shown and [s for s in own if s in shown] == shown
    assert v["wide"]["compressed"] and v["wide"]["chunks_kept"] == len(v["chunk_ids"])


def test_wide_chunks_from_start_level_0_are_the_chunk_route_widened_without_summaries(kb):
    ctx, v = summary_context(Q, kb, k=2, start_level=0, wide_chunks=8, context_words=150)
    assert not v["summary_ids"] and len(v["chunk_ids"]) > 2 and v["context_words"] <= 150
    assert all(kb.chunks[c].title.startswith("Volcano") for c in v["chunk_ids"])
    assert v["wide"]["chunks_in"] == 8


def test_chunks_that_already_fit_are_not_cut(kb):
    ctx, v = summary_context(Q, kb, k=2, start_level=0, wide_chunks=4, context_words=1000)
    assert len(v["chunk_ids"]) == 4 and not v["wide"]["compressed"]
    assert all(c.text == kb.chunks[c.chunk_id].text for c in ctx)


# ---------------------------------------------------------------- collapsed tree


def test_the_collapsed_tree_ranks_enough_of_every_level_to_fill_a_large_budget(kb):
    layers = load_layers(kb)
    ctx, v = summary_context(Q, kb, k=1, collapsed=True, context_words=1000)
    # more pieces than 2k per level could give, and the budget filled
    assert len(ctx) > 2 * 1 * (layers.top + 1)
    assert 1000 - MIN_PIECE_WORDS <= v["context_words"] <= 1000
    assert [c.score for c in ctx] == sorted((c.score for c in ctx), reverse=True)


def test_the_collapsed_tree_over_summaries_alone_mixes_levels_without_chunks(kb):
    ctx, v = summary_context(Q, kb, k=2, collapsed=True, answer_from="summaries")
    assert ctx and all(c.is_summary for c in ctx) and not v["chunk_ids"]
    assert "0" not in v["per_level"] and len(v["per_level"]) >= 1
    assert [c.score for c in ctx] == sorted((c.score for c in ctx), reverse=True)


# ---------------------------------------------------------------- the config itself


@pytest.mark.parametrize(
    "bad, why",
    [
        ({"answer_from": "chunks"}, "answer_from must be one of descend, summaries"),
        ({"context_words": 0}, "context_words >= 1"),
        ({"wide_chunks": -1}, "wide_chunks >= 0"),
        ({"answer_from": "summaries", "wide_chunks": 9}, "shows none"),
        ({"collapsed": True, "wide_chunks": 9}, "fills its budget already"),
        ({"answer_from": "summaries", "start_level": 0}, "start_level 0 is the chunks"),
    ],
)
def test_settings_that_would_mean_something_else_are_refused(bad, why):
    with pytest.raises(LogicRouteError, match=why):
        SummaryConfig(**bad)


def test_options_override_a_config_and_unknown_options_are_named(kb):
    cfg = summary_config(SummaryConfig(collapsed=True), {"context_words": 200})
    assert cfg.collapsed and cfg.context_words == 200
    with pytest.raises(LogicRouteError, match="unknown summary route option.*colapsed.*known are start_level"):
        summary_context(Q, kb, colapsed=True)


def test_every_setting_has_help_and_changes_the_fingerprint():
    assert all(SummaryConfig.help().values())
    prints = {
        SummaryConfig().fingerprint(),
        SummaryConfig(answer_from="summaries").fingerprint(),
        SummaryConfig(wide_chunks=9).fingerprint(),
        SummaryConfig(collapsed=True).fingerprint(),
        SummaryConfig(context_words=300).fingerprint(),
    }
    assert len(prints) == 5 and SummaryConfig().fingerprint() == SummaryConfig().fingerprint()
