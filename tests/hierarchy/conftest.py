"""Fixtures the hierarchy specs share."""

from __future__ import annotations

import pytest

from tests.fakes import HashedBowEmbedder


@pytest.fixture
def emb() -> HashedBowEmbedder:
    """A fast deterministic embedder (128 dims): no model loads."""
    return HashedBowEmbedder(dim=128)
