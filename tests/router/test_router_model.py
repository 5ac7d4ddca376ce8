"""Router: cheap features, MLP shapes, Gumbel-Softmax training, deterministic inference,
calibration and policies, checkpoints and the shipped one. A tiny hashed embedder stands in for
MiniLM, except in the test marked `embedder`."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from engine.core.decide import Decider
from engine.floor.base.errors import CheckpointError
from router.checkpoint import DEFAULT_CHECKPOINT, Router, load_checkpoint, load_router, read_card, save_checkpoint
from router.features import (
    ALL_FEATURES,
    DEFAULT_FEATURES,
    build_inputs,
    cheap_features,
    feature_dim,
    normalize_question,
)
from router.model import RouterConfig, RouterMLP
from router.policy import Policy, calibrate_share
from tests.router.tiny_setup import ROUTES, tiny_embedder
from training.fitting.cmd_eval import achieved_share, share_for_budget
from training.fitting.fit import anneal_tau, gumbel_routing_loss

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_model(routes=ROUTES, dropout=0.5, features=ALL_FEATURES, dim=16) -> RouterMLP:
    torch.manual_seed(0)
    return RouterMLP(RouterConfig(routes=routes, embed_dim=dim, features=features, hidden=(8, 4), dropout=dropout))


# ---------------------------------------------------------------- features and model


def test_features_are_cheap_and_sensible():
    f = dict(zip(("spec", "len"), cheap_features(["Who directed the film Inception?"], ("specificity", "length"))[0]))
    assert 0 < f["spec"] < 1 and 0 < f["len"] < 1
    q = cheap_features(["Who was born first, Ada Lovelace or Alan Turing?", "what is a river"], ALL_FEATURES)
    assert q.shape == (2, feature_dim(ALL_FEATURES)) and q.dtype == np.float32
    comparison = feature_dim(ALL_FEATURES[: ALL_FEATURES.index("comparison")])  # its column
    assert q[0, comparison] == 1.0 and q[1, comparison] == 0.0
    assert normalize_question("  Who   is\tX? ") == "Who is X?"
    x = build_inputs(["Who is X?"], tiny_embedder(), ALL_FEATURES)
    assert x.shape == (1, 16 + feature_dim(ALL_FEATURES))
    with pytest.raises(ValueError):
        cheap_features(["x"], ("nope",))


def test_masked_text_keeps_the_form_and_drops_the_topic():
    from router.features import embedded_text, mask_entities

    assert mask_entities("Who was born first, Ann Lee or Tom Ford?") == "Who was born first, X or X?"
    assert mask_entities('When did "The Wall" come out in 1979?') == "When did X come out in N?"
    assert mask_entities("Which river flows through Budapest?") == "Which river flows through X?"
    assert embedded_text("  Who wrote  Hamlet? ", "question") == "Who wrote Hamlet?"
    with pytest.raises(ValueError):
        embedded_text("Who?", "upper")


def test_structural_features_mark_joins_and_nested_relations():
    names = ("chain", "relative", "pair")
    lookup, nested, joined, relative = cheap_features(
        [
            "Which river flows through Budapest?",
            "What is the nationality of the director of the film Amélie?",
            "Who is older, the founder of Patagonia or the founder of Nike?",
            "What is the capital of the country where the Danube ends?",
        ],
        names,
    )
    assert lookup.tolist() == [0.0, 0.0, 0.0]
    assert nested[0] >= 2 / 3 and joined[2] == 1.0 and relative[1] == 1.0


def test_the_form_feature_is_the_form_stages_reading_as_an_input():
    """One column per form engine.floor.question.forms names; what the form stage reads, offered to
    the MLP (not in the default set: docs/results/router/mlp_alone)."""
    comparison, chain, lookup = cheap_features(
        [
            "Who was born first, Ann Lee or Tom Ford?",
            "Where was the director of Inception born?",
            "What is the capital of France?",
        ],
        ("form",),
    )
    assert comparison.tolist() == [1.0, 0.0, 0.0] and chain.tolist() == [0.0, 0.0, 1.0]
    assert lookup.tolist() == [0.0, 0.0, 0.0] and "form" not in DEFAULT_FEATURES


def test_mlp_shapes_three_linear_layers():
    m = tiny_model(routes=("chunk", "summary", "logic"))
    linears = [x for x in m.modules() if isinstance(x, torch.nn.Linear)]
    assert len(linears) == 3
    assert linears[0].in_features == 16 + feature_dim(ALL_FEATURES) == m.config.input_dim
    assert [x.out_features for x in linears] == [8, 4, 3]
    assert m(torch.randn(5, m.config.input_dim)).shape == (5, 3)
    assert tiny_model(features=()).config.input_dim == 16
    with pytest.raises(ValueError):
        RouterMLP(RouterConfig(routes=("chunk",), embed_dim=4, features=()))


def _toy(n=200, d=6, seed=0):
    """Two separable clusters; cluster 0 prefers route 0, cluster 1 route 1."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 2
    x = torch.randn(n, d, generator=g) * 0.3 + (y[:, None] * 2.0 - 1.0)
    pref = torch.nn.functional.one_hot(y, 2).float() * 0.9 + 0.05
    return x, pref, y


@pytest.mark.parametrize("loss", ["reward", "ce"])
def test_gumbel_training_reduces_loss_on_separable_toy_set(loss):
    torch.manual_seed(0)
    x, pref, y = _toy()
    m = RouterMLP(RouterConfig(routes=ROUTES, embed_dim=6, features=(), hidden=(16, 8), dropout=0.0))
    opt = torch.optim.Adam(m.parameters(), lr=0.02)

    def expected_loss() -> float:  # the noise-free objective: -(softmax . pref)
        with torch.no_grad():
            return float(-(torch.softmax(m(x), -1) * pref).sum(-1).mean())

    before = expected_loss()
    for step in range(60):
        m.train()
        opt.zero_grad()
        gumbel_routing_loss(m(x), pref, tau=anneal_tau(step, 60, 1.0, 0.2), loss=loss).backward()
        opt.step()
    after = expected_loss()
    assert after < before - 0.2
    assert (m.predict_proba(x).argmax(1) == y.numpy()).mean() > 0.95


def test_gumbel_head_is_straight_through_hard():
    pref = torch.tensor([[0.6, 0.3, 0.1]])
    for seed in range(5):
        torch.manual_seed(seed)
        logits = torch.randn(1, 3, requires_grad=True)
        loss = gumbel_routing_loss(logits, pref, 0.5, ce_weight=0.0)
        # forward: the hard one-hot route, so the loss is minus one route's preference exactly
        assert min(abs(loss.item() + p) for p in (0.6, 0.3, 0.1)) < 1e-6
        loss.backward()
        # backward: the soft sample's gradient reaches the logits through the hard choice
        assert logits.grad.abs().sum() > 1e-6
    assert anneal_tau(0, 10, 1.0, 0.1) == 1.0 and abs(anneal_tau(9, 10, 1.0, 0.1) - 0.1) < 1e-9


def test_inference_is_deterministic_eval_mode_no_noise():
    m = tiny_model(dropout=0.5)
    m.train()
    x = np.random.default_rng(0).normal(size=(7, m.config.input_dim)).astype(np.float32)
    p1, p2 = m.predict_proba(x), m.predict_proba(x)
    assert not m.training
    np.testing.assert_array_equal(p1, p2)
    with torch.no_grad():
        np.testing.assert_allclose(p1, torch.softmax(m(torch.from_numpy(x)), -1).numpy(), rtol=1e-6)
    np.testing.assert_allclose(p1.sum(1), 1.0, rtol=1e-5)
    router = Router(m, {"embedder": {"id": "tiny-bow", "dim": 16}}, tiny_embedder())
    qs = ["Who directed Inception?", "Which is older, the Nile or the Amazon?"]
    a, b = router.probs(qs), router.probs(qs)
    assert a == b and list(a[0]) == list(ROUTES)
    (d,) = Decider().decide_many(router, qs[:1])
    assert d.route == max(d.probs, key=d.probs.get) and d.policy == "argmax"


# ---------------------------------------------------------------- policy / calibration


def test_calibration_hits_target_share():
    p = np.random.default_rng(1).beta(2, 5, size=1000)
    for share in (0.1, 0.3, 0.5):
        t = calibrate_share(p, share)
        assert abs(achieved_share(p, t) - share) <= 0.002
    assert achieved_share(p, calibrate_share(p, 0.0)) == 0.0
    assert achieved_share(p, calibrate_share(p, 1.0)) == 1.0
    assert share_for_budget(1000, {"chunk": 500, "logic": 1500}) == pytest.approx(0.5)
    assert share_for_budget(100, {"chunk": 500, "logic": 1500}) == 0.0


def test_a_thresholds_file_round_trips(tmp_path):
    pol = Policy(kind="threshold", route="logic", threshold=0.25, target_share=0.3)
    pol.save(tmp_path / "t.json")
    assert Policy.load(tmp_path / "t.json") == pol


# ---------------------------------------------------------------- checkpoints


def test_checkpoint_save_load_and_embedder_mismatch(tmp_path):
    m = tiny_model()
    m.set_normalization(np.random.default_rng(0).normal(size=(20, m.config.input_dim)))
    path = tmp_path / "r.ckpt"
    card = save_checkpoint(path, m, {"embedder": {"id": "tiny-bow", "dim": 16}, "training": {"n_rows": 3}})
    assert (tmp_path / "r.card.json").is_file()
    assert json.loads((tmp_path / "r.card.json").read_text())["routes"] == list(ROUTES)
    assert path.read_bytes()[8:9] == b"{"  # safetensors: a JSON header, not a pickle
    assert read_card(path)["training"] == {"n_rows": 3} and card["format"] == read_card(path)["format"]

    m2, card2 = load_checkpoint(path)
    x = np.random.default_rng(2).normal(size=(3, m.config.input_dim)).astype(np.float32)
    np.testing.assert_array_equal(m.predict_proba(x), m2.predict_proba(x))
    assert card2["config"]["hidden"] == [8, 4]

    r = load_router(path, embedder=tiny_embedder())
    assert r.routes == ROUTES
    with pytest.raises(CheckpointError) as e:
        load_router(path, embedder=tiny_embedder(id="other-model"))
    assert "tiny-bow" in str(e.value) and "other-model" in str(e.value)
    with pytest.raises(CheckpointError, match="dim"):
        load_router(path, embedder=tiny_embedder(dim=32))
    with pytest.raises(CheckpointError, match="not found"):
        load_router(tmp_path / "missing.ckpt", embedder=tiny_embedder())
    (tmp_path / "junk.ckpt").write_bytes(b"\x80\x04not a checkpoint")
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path / "junk.ckpt")


def test_default_checkpoint_is_the_shipped_generalist():
    from engine.core.routes import ROUTES as REGISTRY

    assert DEFAULT_CHECKPOINT.name == "generalist.ckpt" and DEFAULT_CHECKPOINT.parent.name == "checkpoints"
    assert DEFAULT_CHECKPOINT.is_file(), f"the shipped router is missing: {DEFAULT_CHECKPOINT}"
    assert DEFAULT_CHECKPOINT.stat().st_size < 2_000_000
    card = read_card(DEFAULT_CHECKPOINT)
    assert card["kind"] == "generalist" and "heldout" in card
    assert card["embedder"] == {"id": "all-MiniLM-L6-v2", "dim": 384}
    model, _ = load_checkpoint(DEFAULT_CHECKPOINT)
    assert model.config.routes == REGISTRY and model.config.input_dim == 384 + feature_dim(model.config.features)
    x = np.random.default_rng(0).normal(size=(2, model.config.input_dim)).astype(np.float32)
    np.testing.assert_allclose(model.predict_proba(x).sum(1), 1.0, rtol=1e-5)
