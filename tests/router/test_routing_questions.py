"""The shipped router on questions written for the test (tests/router/routing_questions.py):
it loads and routes them (a missing or unreadable checkpoint fails here, it is never skipped),
and keeps lookups off the logic route and sends
comparison and compositional questions to it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.core.decide import Decider, FormStage, ListGateStage
from engine.core.routes.common import check_question
from engine.floor.question.forms import form_plan
from router.checkpoint import DEFAULT_CHECKPOINT, load_router
from tests.router.routing_questions import (
    MULTI_HOP,
    MULTI_HOP_INVENTED,
    MULTI_HOP_KNOWN,
    ONE_HOP,
    ONE_HOP_INVENTED,
    ONE_HOP_KNOWN,
)
from tests.router.routing_questions_fresh import MULTI_HOP_FRESH, ONE_HOP_FRESH

pytestmark = pytest.mark.usefixtures("one_thread")

SHARE = 0.8  # of one-hop questions kept off logic, and of multi-hop questions sent to it


def test_the_question_sets_are_large_distinct_and_well_formed():
    assert len(ONE_HOP) >= 30 and len(MULTI_HOP) >= 30
    assert len(ONE_HOP_INVENTED) >= 30 and len(MULTI_HOP_INVENTED) >= 30
    assert ONE_HOP == ONE_HOP_INVENTED + ONE_HOP_KNOWN and MULTI_HOP == MULTI_HOP_INVENTED + MULTI_HOP_KNOWN
    everything = ONE_HOP + MULTI_HOP
    assert len(set(everything)) == len(everything)
    assert all(check_question(q) == q and q.endswith("?") for q in everything)


@pytest.fixture(scope="module")
def shipped(real_embedder):
    """The shipped checkpoint's decisions on every hand-written question. No skip: a missing
    checkpoint raises CheckpointError and every test using this fails."""
    router = load_router(embedder=real_embedder)  # the default: checkpoints/generalist.ckpt
    assert router.path == DEFAULT_CHECKPOINT
    return router, _decided(router, ONE_HOP), _decided(router, MULTI_HOP)


PLAIN = Decider()  # no out-of-distribution stage: the router's own choice
ARGMAX_ONLY = Decider(list_gate=ListGateStage(on=False), form=FormStage(on=False))


def _decided(router, questions: list[str], decider: Decider = PLAIN) -> list[dict]:
    """The Decider's decisions as dicts, with their questions."""
    return [{"question": q, **d.to_dict()} for q, d in zip(questions, decider.decide_many(router, questions))]


def _share(decisions: list[dict], route: str) -> float:
    return sum(d["route"] == route for d in decisions) / len(decisions)


@pytest.mark.embedder
def test_the_shipped_checkpoint_loads_and_routes_the_handwritten_questions(shipped):
    router, one_hop, multi_hop = shipped
    assert "logic" in router.routes
    for d in one_hop + multi_hop:
        assert d["route"] in router.routes and list(d["probs"]) == list(router.routes)
        if d["policy"] == "argmax+form":  # the form policy: a form that names its sub-questions goes to logic
            assert d["route"] == "logic" and form_plan(d["question"]) is not None
        elif d["policy"] == "argmax+list":  # the list gate: a list asked for across a corpus goes to summary
            assert d["route"] == "summary" and d["list_gate"] >= router.gate.threshold
        else:
            assert d["route"] == max(d["probs"], key=d["probs"].get) and d["policy"] == "argmax"
        assert abs(sum(d["probs"].values()) - 1.0) < 1e-5
        assert d["ood"] is None or set(d["ood"]) == {"similarity", "threshold", "far"}
    # deterministic, no noise and no dropout: the same decisions again, in a batch of another size
    # (whose float sums may differ in the last digits)
    again = _decided(router, MULTI_HOP[:5])
    assert [d["route"] for d in again] == [d["route"] for d in multi_hop[:5]]
    for a, b in zip(again, multi_hop[:5]):
        assert all(abs(a["probs"][r] - b["probs"][r]) < 1e-5 for r in router.routes)
    p_logic = {
        name: np.mean([d["probs"]["logic"] for d in ds]) for name, ds in (("one", one_hop), ("multi", multi_hop))
    }
    assert p_logic["multi"] > p_logic["one"]  # even the topic-bound generalist leans the right way


@pytest.mark.embedder
def test_the_shipped_router_keeps_lookups_off_logic_and_sends_multi_hop_to_it(shipped):
    _, one_hop, multi_hop = shipped
    kept_off, sent = 1 - _share(one_hop, "logic"), _share(multi_hop, "logic")
    assert kept_off >= SHARE and sent >= SHARE, (
        f"one-hop kept off logic {kept_off:.0%} (of {len(one_hop)}), multi-hop sent to logic {sent:.0%} "
        f"(of {len(multi_hop)}); both must be >= {SHARE:.0%}"
    )


@pytest.mark.embedder
def test_on_questions_written_after_the_form_reader_it_keeps_lookups_off_logic_and_sends_multi_hop_to_it(shipped):
    router = shipped[0]
    one_hop, multi_hop = _decided(router, ONE_HOP_FRESH), _decided(router, MULTI_HOP_FRESH)
    kept_off, sent = 1 - _share(one_hop, "logic"), _share(multi_hop, "logic")
    assert kept_off >= SHARE and sent >= SHARE, (
        f"fresh: lookups kept off logic {kept_off:.0%}, multi-hop sent {sent:.0%}"
    )


@pytest.mark.embedder
def test_without_the_form_policy_and_the_list_gate_every_route_is_the_argmax(shipped):
    router = shipped[0]
    for d in _decided(
        router, ONE_HOP + MULTI_HOP, Decider(list_gate=ListGateStage(on=False), form=FormStage(on=False))
    ):
        assert d["route"] == max(d["probs"], key=d["probs"].get) and d["policy"] == "argmax"


def _judge_half(kind: str) -> list[str]:
    """The judge halves' questions of training/data/<kind>/*.jsonl (never trained on)."""
    from training.common.jsonl_store import read_jsonl

    files = sorted((Path(__file__).resolve().parents[2] / "training" / "data" / kind).glob("*.jsonl"))
    return [r["question"] for f in files for r in read_jsonl(f, strict=True) if r.get("half") == "judge"]


@pytest.mark.embedder
def test_the_shipped_router_sends_lists_asked_across_a_corpus_to_summary_and_keeps_doc_lookups_off_it(
    shipped,
):
    router = shipped[0]
    lists, lookups = _judge_half("global_lists"), _judge_half("docs_questions")
    assert len(lists) >= 60 and len(lookups) >= 60
    sent = _share(_decided(router, lists), "summary")
    kept_off = 1 - _share(_decided(router, lookups), "summary")
    assert sent >= 0.7 and kept_off >= 0.9, (
        f"lists to summary {sent:.0%}, documentation lookups kept off {kept_off:.0%}"
    )
