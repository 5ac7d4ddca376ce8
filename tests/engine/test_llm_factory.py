"""The LLM layer's entry points: LLM spec parsing, the factory that builds backends lazily
behind the cache, and imports light enough for the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.floor.base.errors import LogicRouteError
from engine.floor.llm.base import LLMSettings, LLMSpec, parse_spec
from engine.floor.llm.cache import CachedLLM
from engine.floor.llm.factory import make_llm
from engine.floor.llm.local import LocalLLM
from engine.floor.llm.openai_api import OpenAILLM

pytestmark = pytest.mark.usefixtures("isolated_llm_env")  # no user cache, no real key or endpoint


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("local:qwen2.5-coder-1.5b", LLMSpec("local", "qwen2.5-coder-1.5b")),
        ("  openai:gpt-4o-mini ", LLMSpec("openai", "gpt-4o-mini")),
        ("openai:qwen@http://localhost:8000/v1", LLMSpec("openai", "qwen", "http://localhost:8000/v1")),
        (
            "openai:qwen@http://localhost:8000/v1?timeout=2.5&retries=1",
            LLMSpec("openai", "qwen", "http://localhost:8000/v1", LLMSettings(timeout=2.5, retries=1)),
        ),
        ("openai:gpt-4o-mini?retries=0", LLMSpec("openai", "gpt-4o-mini", settings=LLMSettings(retries=0))),
    ],
)
def test_parse_spec_good(spec, expected):
    s = parse_spec(spec)
    assert s == expected
    assert parse_spec(str(s)) == s  # str() round-trips


@pytest.mark.parametrize("spec", ["", "local", "gpt-4o", "remote:x", "local:", "openai:", "local:m@http://x"])
def test_parse_spec_bad(spec):
    with pytest.raises(LogicRouteError, match="bad LLM spec"):
        parse_spec(spec)


@pytest.mark.parametrize(
    "spec, match",
    [
        ("openai:m?timeout=soon", "timeout='soon'.*expected a number of seconds"),
        ("openai:m?timeout=0", "timeout must be a number of seconds > 0"),
        ("openai:m?retries=-1", "retries must be an integer >= 0"),
        ("openai:m?retries=1.5", "expected a whole number"),
        ("openai:m?speed=3", "bad LLM setting 'speed=3'.*expected timeout=SECONDS or retries=N"),
        ("local:qwen2.5-coder-1.5b?timeout=1", "a local model takes no @BASE_URL and no [?]settings"),
    ],
)
def test_parse_spec_bad_settings_say_what_is_wrong(spec, match):
    with pytest.raises(LogicRouteError, match=match):
        parse_spec(spec)


def test_make_llm_builds_backends_lazily_and_wraps_in_cache(tmp_path, monkeypatch):
    llm = make_llm("local:qwen2.5-coder-0.5b", cache=tmp_path / "c.sqlite")
    assert isinstance(llm, CachedLLM) and isinstance(llm.inner, LocalLLM)
    assert llm.name == "local:qwen2.5-coder-0.5b" and llm.path == tmp_path / "c.sqlite"
    assert not llm.path.exists()  # nothing opened before the first call
    assert make_llm().path == tmp_path / "cache" / "llm_cache.sqlite"

    remote = make_llm("openai:m@http://h:1/v1", cache=False)
    assert isinstance(remote, OpenAILLM) and remote.name == "openai:m@http://h:1/v1"
    assert remote._client is None

    monkeypatch.setenv("LOGICROUTE_NO_CACHE", "1")  # no longer read: cache=False (--no-cache) turns it off
    assert isinstance(make_llm("local:qwen2.5-coder-1.5b"), CachedLLM)
    assert isinstance(make_llm("local:qwen2.5-coder-1.5b", cache=False), LocalLLM)
    with pytest.raises(LogicRouteError):
        make_llm("nope")


def test_imports_stay_light():
    code = (
        "import sys, engine.floor.llm.base, engine.floor.llm.cache, engine.floor.llm.local, engine.floor.llm.openai_api, "
        "engine.floor.llm.model_files, engine.floor.llm.factory\n"
        "engine.floor.llm.factory.make_llm(); engine.floor.llm.factory.make_llm('openai:m@http://h:1/v1')\n"
        "print([m for m in ('openai', 'llama_cpp', 'jsonschema', 'tqdm') if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[2], check=True
    ).stdout
    assert out.strip() == "[]"
