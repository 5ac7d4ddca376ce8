"""make_llm: the one place a spec string becomes an LLM (backend + on-disk cache)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.floor.llm.base import DEFAULT_LLM, LLM, LLMSettings, parse_spec


def make_llm(spec: str = DEFAULT_LLM, *, cache: bool | str | Path = True, settings: LLMSettings | None = None) -> LLM:
    """Build the LLM a spec names, wrapped in the on-disk cache unless `cache` is False (the
    commands' --no-cache). `cache` may also be the SQLite file to use. Nothing loads or
    connects here: backends start on their first call.

    How long a remote endpoint is waited on (LLMSettings: timeout in seconds per try, retries
    after the first try), first set wins:
      1. the spec's query: 'openai:MODEL@BASE_URL?timeout=10&retries=1'
      2. `settings` (RoutedRAG(llm_settings=...))
      3. 60 s and 4 retries.
    None of them is part of the cache key: they change how long we wait, not the answer.
    The local backend runs in process and ignores them."""
    s = parse_spec(spec)
    llm: Any
    if s.backend == "local":
        from engine.floor.llm.local import LocalLLM

        llm = LocalLLM(s.model)
    else:
        from engine.floor.llm.openai_api import OpenAILLM

        wait = s.settings.over(settings)
        llm = OpenAILLM(s.model, base_url=s.base_url, timeout=wait.timeout, max_retries=wait.retries)
    if cache is False:
        return llm
    from engine.floor.llm.cache import CachedLLM

    return CachedLLM(llm, None if cache is True else Path(cache))
