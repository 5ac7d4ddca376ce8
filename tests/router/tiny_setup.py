"""The tiny setup the router spec files share: two routes and a small hashed embedder in place
of MiniLM."""

from __future__ import annotations

from tests.fakes import HashedBowEmbedder


def tiny_embedder(id: str = "tiny-bow", dim: int = 16) -> HashedBowEmbedder:
    return HashedBowEmbedder(id, dim)


ROUTES = ("chunk", "logic")
