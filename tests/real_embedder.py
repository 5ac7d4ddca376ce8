"""The one real MiniLM embedder that every test marked `embedder` shares: loaded once per
test process, on first use."""

from __future__ import annotations

import atexit
import shutil
import tempfile

from engine.floor.embedder import Embedder

_SHARED: Embedder | None = None


def shared_test_embedder() -> Embedder:
    """One real MiniLM embedder per test process, for every test marked `embedder`, with a
    private cache folder so tests never touch ~/.cache."""
    global _SHARED
    if _SHARED is None:
        d = tempfile.mkdtemp(prefix="logicroute-test-emb-")
        atexit.register(shutil.rmtree, d, True)
        _SHARED = Embedder(cache=d)
    return _SHARED
