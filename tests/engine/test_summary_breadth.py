"""The global mode's breadth follows the evidence (SummaryConfig.breadth_calls, breadth_stop): when
pages holding the question's quoted words were not among the first batches' pages, more batches
are read, one passage a page, up to the bound, and no further once a batch names no new item;
the trace says how many evidence pages there were, how many batches were read and why they
stopped. A scripted LLM over the small tool manual of test_summary_global."""

from __future__ import annotations

import pytest

from engine.core.routes import SummaryRoute, answer_on
from engine.core.routes.summary_config import SummaryConfig
from engine.core.routes.summary_global import bounded_config
from engine.floor.base.errors import LogicRouteError
from tests.engine.test_summary_global import QUESTION, ctx, kb, naming  # noqa: F401 (kb: the fixture)
from tests.fakes import ScriptedLLM

FORCE_PAGES = ("tool-build", "tool-clean", "tool-publish")  # the pages documenting `--force`
# One passage a batch: the first batch shows one page, the evidence names three.
NARROW = {"mode": "global", "map_calls": 1, "map_tokens": 50}


def test_evidence_pages_no_batch_showed_are_read_in_more_batches_up_to_the_bound(kb):  # noqa: F811
    cfg = SummaryConfig(**NARROW, breadth_calls=4, breadth_stop="bound")
    llm = ScriptedLLM(rules={"Items:": naming("force")})
    ans = answer_on(SummaryRoute(cfg), QUESTION, ctx(kb, llm))
    assert all(name in ans.text for name in FORCE_PAGES)
    assert 2 <= ans.usage.llm_calls <= 4
    record = ans.trace["global"]
    assert record["max_llm_calls"] == 4
    breadth = record["breadth"]
    assert breadth["evidence_terms"] == ["force"] and breadth["evidence_pages"] == 3
    assert breadth["bound"] == 4 and breadth["stop"] == "bound" and breadth["batches_read"] >= 1
    assert breadth["stopped"] in ("every evidence page was read", "the bound, 4 map calls")


def test_a_batch_that_names_no_new_item_stops_the_breadth(kb):  # noqa: F811
    cfg = SummaryConfig(**NARROW, breadth_calls=5)  # breadth_stop: no-new-item, the default
    llm = ScriptedLLM([{"items": []}, {"items": []}, {"items": []}, {"items": []}])
    ans = answer_on(SummaryRoute(cfg), QUESTION, ctx(kb, llm))
    assert ans.usage.llm_calls == 2  # the first batch, then one evidence batch that added nothing
    assert ans.trace["global"]["breadth"]["stopped"] == "a batch named no new item"


def test_the_bound_is_never_passed_however_many_evidence_pages_are_unseen(kb):  # noqa: F811
    cfg = SummaryConfig(**NARROW, breadth_calls=2, breadth_stop="bound")
    ans = answer_on(SummaryRoute(cfg), QUESTION, ctx(kb, ScriptedLLM(rules={"Items:": naming("force")})))
    assert ans.usage.llm_calls == 2
    assert ans.trace["global"]["breadth"]["stopped"] == "the bound, 2 map calls"


def test_breadth_calls_0_is_the_global_mode_as_it_was(kb):  # noqa: F811
    cfg = SummaryConfig(**NARROW, breadth_calls=0)
    ans = answer_on(SummaryRoute(cfg), QUESTION, ctx(kb, ScriptedLLM(rules={"Items:": naming("force")})))
    assert ans.usage.llm_calls == 1 and ans.trace["global"]["breadth"] is None


def test_the_bound_and_the_stop_rule_are_checked_and_a_budget_cuts_the_bound():
    for bad in ({"breadth_calls": 7}, {"breadth_calls": 1}, {"breadth_stop": "never"}):
        with pytest.raises(LogicRouteError, match="breadth"):
            SummaryConfig(mode="global", **bad)
    cfg = SummaryConfig(mode="global")
    assert bounded_config(cfg, {"max_llm_calls": 3}).breadth_calls == 3
    assert bounded_config(cfg, {"max_llm_calls": 2}).breadth_calls == 0  # no call left for the evidence
    assert bounded_config(cfg, {}).breadth_calls == cfg.breadth_calls


def test_the_descents_fingerprint_ignores_the_global_modes_breadth():
    descend = SummaryConfig(mode="descend")
    assert descend.fingerprint() == SummaryConfig(mode="descend", breadth_calls=0).fingerprint()
    assert SummaryConfig(mode="global").fingerprint() != SummaryConfig(mode="global", breadth_calls=0).fingerprint()
