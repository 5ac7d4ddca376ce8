"""The list gate (router.list_gate): the checkpoint's gate, whose firing the Decider's list-gate stage
turns into the summary route (tests/engine/test_decider.py); the gate travels in the checkpoint,
is refused when its weights and card disagree, and is off on a KB of single passages."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from engine.core.decide import Decider, decide_many
from engine.floor.base.errors import CheckpointError
from router.checkpoint import load_gate, load_router, read_card, save_checkpoint
from router.kb_router import load_for_kb
from router.list_gate import ListGate
from router.model import RouterConfig, RouterMLP
from tests.fakes import HashedBowEmbedder
from tests.router.tiny_setup import shape_gate

pytestmark = pytest.mark.usefixtures("one_thread")

DIM = 64
ROUTES = ("chunk", "summary", "logic")
LIST = "Which commands can change the lockfile?"


def embedder() -> HashedBowEmbedder:
    return HashedBowEmbedder("tiny-bow", DIM)


def checkpoint(path, gate: ListGate | None = None, card: dict | None = None):
    torch.manual_seed(0)
    model = RouterMLP(RouterConfig(routes=ROUTES, embed_dim=DIM, features=(), hidden=(8, 4)))
    save_checkpoint(path, model, {"embedder": {"id": "tiny-bow", "dim": DIM}, **(card or {})}, gate=gate)
    return path


# ---------------------------------------------------------------- the gate itself


def test_the_gate_fires_at_its_threshold_only():
    gate = shape_gate()
    e = np.zeros((2, DIM), np.float32)
    p = gate.probs(e, [LIST, "What is the default port?"])
    assert p[0] > 0.9 and p[1] < 0.1
    assert gate.fires(e, [LIST, "What is the default port?"]) == [pytest.approx(float(p[0])), None]
    assert shape_gate(threshold=0.99).fires(e[:1], [LIST]) == [None]
    with pytest.raises(CheckpointError, match="inputs"):
        gate.probs(np.zeros((1, DIM + 1), np.float32), [LIST])


# ---------------------------------------------------------------- in a checkpoint


def test_the_gate_round_trips_through_the_checkpoint_and_decides(tmp_path):
    path = checkpoint(tmp_path / "g.ckpt", shape_gate())
    card = read_card(path)
    assert card["list_gate"]["features"] == ["shape"] and card["list_gate"]["threshold"] == 0.7
    router = load_router(path, embedder=embedder())
    assert np.allclose(router.gate.weight, shape_gate().weight) and router.gate.bias == -4.0
    assert max(router.probs([LIST])[0].items(), key=lambda kv: kv[1])[0] != "summary"  # the gate decides it
    listed, lookup = Decider().decide_many(router, [LIST, "What is the default port?"])
    assert listed.route == "summary" and listed.decided_by == "argmax+list" and listed.list_gate > 0.9
    assert lookup.list_gate is None and lookup.decided_by == "argmax"
    (decision,) = decide_many(router, [LIST], None, "route")
    assert decision.route == "summary" and decision.form == "list"
    assert decision.trace()["list_gate"] > 0.9 and decision.to_dict()["policy"] == "argmax+list"
    (unasked,) = decide_many(router, [LIST], None, "route", list_gate=False)  # RagConfig.list_gate
    assert unasked.form is None and unasked.list_gate is None and unasked.to_dict()["policy"] == "argmax"


def test_a_checkpoint_without_a_gate_routes_as_before(tmp_path):
    path = checkpoint(tmp_path / "plain.ckpt", card={"list_gate": {"features": ["shape"], "threshold": 0.7}})
    assert "list_gate" not in read_card(path)  # a card copied from a gated parent loses the entry
    router = load_router(path, embedder=embedder())
    assert router.gate is None
    (d,) = Decider().decide_many(router, [LIST])
    assert d.decided_by == "argmax" and d.list_gate is None


def test_weights_without_their_card_entry_or_features_computed_otherwise_are_refused(tmp_path):
    path = checkpoint(tmp_path / "g.ckpt", shape_gate())
    card = read_card(path)
    with pytest.raises(CheckpointError, match="list gate"):
        load_gate(path, {k: v for k, v in card.items() if k != "list_gate"})
    changed = {**card, "list_gate": {**card["list_gate"], "feature_versions": {"shape": 99}}}
    with pytest.raises(CheckpointError, match="computed differently"):
        load_gate(path, changed)
    with pytest.raises(CheckpointError, match="list gate"):
        load_gate(checkpoint(tmp_path / "plain.ckpt"), card)


# ---------------------------------------------------------------- on a KB


def kb(chunks: int, documents: int):
    return SimpleNamespace(
        embedder=embedder(), path=None, manifest={"counts": {"chunks": chunks, "documents": documents}}
    )


def test_the_gate_is_off_on_a_kb_of_single_passages_and_the_label_says_so(tmp_path):
    path = checkpoint(tmp_path / "g.ckpt", shape_gate())
    passages = load_for_kb(kb(1200, 1200), path)
    assert passages.gate is None and "list gate off" in passages.label
    (d,) = Decider().decide_many(passages, [LIST])
    assert d.decided_by == "argmax" and d.list_gate is None
    documents = load_for_kb(kb(4411, 64), path)
    assert documents.gate is not None and "list gate" not in documents.label
    (d,) = Decider().decide_many(documents, [LIST])
    assert d.route == "summary" and d.decided_by == "argmax+list"
