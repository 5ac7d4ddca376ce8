"""Fixtures for the engine tests."""

from __future__ import annotations

import pytest

from engine.llm.base import SETTINGS_ENV


@pytest.fixture
def isolated_llm_env(tmp_path, monkeypatch):
    """The LLM backends' environment without the user's settings: the cache folder is
    tmp_path/cache and no API key, endpoint or no-cache switch is set, so no test touches the
    user's cache or reaches a real server."""
    monkeypatch.setenv("LOGICROUTE_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("LOGICROUTE_NO_CACHE", "LOGICROUTE_API_KEY", "OPENAI_API_KEY", "LOGICROUTE_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    for var in SETTINGS_ENV.values():  # the user's timeout and retries: the specs set their own
        monkeypatch.delenv(var, raising=False)
