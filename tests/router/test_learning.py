"""The router learns: each test fails when training is broken in a way that the other router
tests would miss (fit() skipped, the Gumbel term dropped from the loss)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from router.model import RouterConfig, RouterMLP
from training.fitting.fit import TrainConfig, fit, gumbel_routing_loss

ROUTES = ("chunk", "summary", "logic")


def _separable(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Three clusters in 8 dims; cluster i prefers route i (preference 0.8 / 0.1 / 0.1)."""
    rng = np.random.default_rng(seed)
    oracle = np.arange(n) % 3
    centres = rng.normal(size=(3, 8)) * 2.0
    x = (centres[oracle] + rng.normal(size=(n, 8)) * 0.3).astype(np.float32)
    pref = np.full((n, 3), 0.1, dtype=np.float32)
    pref[np.arange(n), oracle] = 0.8
    return x, pref, oracle.astype(np.int64)


def _model(seed: int = 0) -> RouterMLP:
    torch.manual_seed(seed)
    return RouterMLP(RouterConfig(routes=ROUTES, embed_dim=8, features=(), hidden=(16, 8), dropout=0.0))


def _quality(model: RouterMLP, x: np.ndarray, pref: np.ndarray) -> float:
    """Mean preference mass of the route the router takes (what validation monitors)."""
    taken = model.predict_proba(x).argmax(1)
    return float(pref[np.arange(len(x)), taken].mean())


def test_fit_changes_the_weights_and_raises_validation_quality():
    x, pref, oracle = _separable(240, seed=1)
    model = _model()
    before_weights = [p.detach().clone() for p in model.parameters()]
    before = _quality(model, x[200:], pref[200:])

    cfg = TrainConfig(hidden=(16, 8), features=(), lr=0.03, max_epochs=25, patience=25, batch_size=32, seed=0)
    history = fit(model, x[:200], pref[:200], x[200:], pref[200:], oracle[200:], cfg)

    assert history["epochs_run"] > 1
    assert any(not torch.equal(a, b) for a, b in zip(before_weights, model.parameters()))
    after = _quality(model, x[200:], pref[200:])
    assert after >= 0.75 > before + 0.2  # 0.8 is perfect routing, 0.33 chance


def test_the_gumbel_term_alone_learns():
    x_np, pref_np, oracle = _separable(300, seed=2)
    x, pref = torch.from_numpy(x_np), torch.from_numpy(pref_np)
    model = _model(seed=3)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    before = _quality(model, x_np, pref_np)
    for _ in range(150):
        model.train()
        opt.zero_grad()
        gumbel_routing_loss(model(x), pref, tau=0.5, loss="reward", ce_weight=0.0).backward()
        opt.step()
    assert _quality(model, x_np, pref_np) >= 0.75 > before + 0.2


def test_the_reward_loss_is_minus_the_preference_of_the_route_taken():
    pref = torch.tensor([[0.7, 0.2, 0.1], [0.3, 0.3, 0.4], [0.1, 0.6, 0.3]])
    # Logits this peaked make the hard Gumbel sample the argmax route whatever the noise.
    peaked = torch.tensor([[40.0, -40.0, -40.0], [-40.0, -40.0, 40.0], [-40.0, 40.0, -40.0]])
    torch.manual_seed(0)
    loss = gumbel_routing_loss(peaked, pref, tau=0.5, loss="reward", ce_weight=0.0)
    assert loss.item() == pytest.approx(-(0.7 + 0.4 + 0.6) / 3, abs=1e-6)

    # Moderate logits: the route taken is the Gumbel-max sample argmax(logits + g). Replaying the
    # noise F.gumbel_softmax draws (g = -log(Exp(1))) from the same seed gives the route chosen;
    # the forward value is minus its preference exactly (straight-through: the hard one-hot, not
    # the soft sample), and the noise explores more than one route across seeds.
    logits = torch.tensor([[0.5, 0.0, -0.5], [0.0, 0.2, 0.1], [-0.3, 0.4, 0.0]], requires_grad=True)
    chosen_routes = set()
    for seed in range(12):
        torch.manual_seed(seed)
        g = -torch.empty_like(logits).exponential_().log()
        chosen = (logits.detach() + g).argmax(-1)
        chosen_routes.add(tuple(chosen.tolist()))
        torch.manual_seed(seed)
        loss = gumbel_routing_loss(logits, pref, tau=0.5, loss="reward", ce_weight=0.0)
        assert loss.item() == pytest.approx(-pref[torch.arange(3), chosen].mean().item(), abs=1e-6)
        logits.grad = None
        loss.backward()
        assert logits.grad.abs().sum() > 1e-6  # the soft sample's gradient reaches the logits
    assert len(chosen_routes) > 1
