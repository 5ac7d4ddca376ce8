"""Fixtures for the engine tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def isolated_llm_env(tmp_path, monkeypatch):
    """The LLM backends' environment without the user's settings: the cache folder is
    tmp_path/cache and no API key is set, so no test touches the user's cache or reaches a real
    server."""
    monkeypatch.setenv("LOGICROUTE_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("LOGICROUTE_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
