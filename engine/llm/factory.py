"""make_llm: the one place a spec string becomes an LLM (backend + on-disk cache)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from engine.llm.base import DEFAULT_LLM, LLM, parse_spec


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def make_llm(spec: str = DEFAULT_LLM, *, cache: bool | str | Path = True) -> LLM:
    """Build the LLM a spec names, wrapped in the on-disk cache unless `cache` is False or
    LOGICROUTE_NO_CACHE=1. `cache` may also be the SQLite file to use. Nothing loads or
    connects here: backends start on their first call."""
    s = parse_spec(spec)
    llm: Any
    if s.backend == "local":
        from engine.llm.local import LocalLLM

        llm = LocalLLM(s.model)
    else:
        from engine.llm.openai_api import OpenAILLM

        llm = OpenAILLM(s.model, base_url=s.base_url)
    if cache is False or _env_flag("LOGICROUTE_NO_CACHE"):
        return llm
    from engine.llm.cache import CachedLLM

    return CachedLLM(llm, None if cache is True else Path(cache))
