"""A server is ready when it says so: it listens only once the embedder, the router and the local
model are loaded, so questions sent the moment /health answers wait in the queue for their
answers instead of being refused while a model loads. A remote endpoint has nothing to load and
gets no call at start."""

from __future__ import annotations

import threading
import time

import pytest
from click.testing import CliRunner

from engine.face.serve.run import ServerThread
from tests.engine.serve_helpers import SIMPLE_QUESTION, SchemaLLM, call, film_service
from tests.fakes import FakeRouter

LOAD_SECONDS = 2.0


@pytest.fixture(autouse=True)
def _env(isolated_llm_env):
    pass


class SlowLoading:
    """Sleeps LOAD_SECONDS the first time it is used, as a model file being read; counts loads."""

    def __init__(self):
        self.loads = 0
        self._lock = threading.Lock()

    def load(self) -> None:
        with self._lock:
            if not self.loads:
                time.sleep(LOAD_SECONDS)
                self.loads += 1


class SlowLoadingLLM(SchemaLLM):
    """A local model: its first call loads it."""

    name = "local:slow-loading"

    def __init__(self):
        super().__init__()
        self.loading = SlowLoading()

    def chat(self, messages, **kwargs):
        self.loading.load()
        return super().chat(messages, **kwargs)


class SlowLoadingRouter(FakeRouter):
    """A router whose checkpoint loads on its first question."""

    def __init__(self):
        super().__init__()
        self.loading = SlowLoading()

    def probs(self, questions):
        self.loading.load()
        return super().probs(questions)


def local_service(tmp_path, llm, router=None, **config):
    return film_service(tmp_path, llm, router=router, llm_spec="local:slow-loading", **config)


def burst(url: str, n: int, every: float) -> list:
    """`n` questions, one every `every` seconds, each on its own connection; their replies in order."""
    replies: list = [None] * n

    def ask(i: int) -> None:
        replies[i] = call("POST", f"{url}/query", {"question": SIMPLE_QUESTION})

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
        time.sleep(every)
    for t in threads:
        t.join(timeout=60)
    return replies


def test_a_burst_sent_the_moment_the_server_answers_health_is_queued_not_refused(tmp_path):
    """12 questions in 1.2 s against room for 6 (one answering, five waiting): behind a model
    loading for 2 s, half would be refused; with the models loaded before the server listens,
    none is."""
    llm, router = SlowLoadingLLM(), SlowLoadingRouter()
    with ServerThread(local_service(tmp_path, llm, router, workers=1, queue_size=5)) as s:
        assert call("GET", f"{s.url}/health").status == 200
        replies = burst(s.url, n=12, every=0.1)
        refused = call("GET", f"{s.url}/metrics").body["queue"]["refused"]
    assert [r.status for r in replies] == [200] * 12 and refused == 0
    assert (llm.loading.loads, router.loading.loads) == (1, 1)


def test_the_local_model_is_loaded_before_the_server_listens_and_its_first_answer_is_quick(tmp_path):
    llm = SlowLoadingLLM()
    with ServerThread(local_service(tmp_path, llm)) as s:
        assert llm.loading.loads == 1 and llm.calls == 1  # one 1-token call loaded it
        t0 = time.monotonic()
        first = call("POST", f"{s.url}/query", {"question": SIMPLE_QUESTION})
        assert first.status == 200 and time.monotonic() - t0 < LOAD_SECONDS  # it waited for no load
    assert first.body["usage"]["llm_calls"] == 1  # the warm-up call is no answer's


def test_the_model_loads_even_when_the_call_cache_holds_the_warm_up_call(tmp_path):
    """A warm-up through the cache would be a hit on the second start and load nothing."""
    from engine.floor.llm.cache import CachedLLM

    cache = tmp_path / "calls.sqlite"
    for run in ("first", "second"):
        (tmp_path / run).mkdir()
        llm = SlowLoadingLLM()
        with ServerThread(local_service(tmp_path / run, CachedLLM(llm, cache))):
            assert llm.loading.loads == 1, run


def test_a_remote_endpoint_gets_no_call_at_start(tmp_path):
    llm = SchemaLLM()
    service = film_service(tmp_path, llm, llm_spec="openai:m@http://127.0.0.1:9/v1")
    with ServerThread(service) as s:
        assert call("GET", f"{s.url}/health").status == 200
    assert llm.calls == 0


def test_serve_loads_the_local_model_before_it_listens(tmp_path, monkeypatch):
    import engine.face.serve.run
    from engine.face.cli import main
    from engine.face.serve.service import AnswerService

    llm = SlowLoadingLLM()
    service = local_service(tmp_path, llm)
    at_listen = {}
    monkeypatch.setattr(AnswerService, "open", classmethod(lambda cls, kb_dir, config=None, **o: service))
    monkeypatch.setattr(engine.face.serve.run, "run_server", lambda s, **kw: at_listen.update(loads=llm.loading.loads))
    r = CliRunner().invoke(main, ["serve", "--kb", str(tmp_path / "kb"), "--llm", "local:qwen2.5-coder-1.5b"])
    assert r.exit_code == 0, r.output
    assert at_listen == {"loads": 1}
    assert "the embedder, the router and the local model" in r.output


def test_the_embedders_model_runs_before_the_server_listens(tmp_path):
    """The router's vectors may all come from the embedding cache: the model itself is run once
    anyway, so the first question is as quick as the second (it took 7 s, the second 0.03 s)."""
    service = local_service(tmp_path, SlowLoadingLLM())
    warmed: list[str] = []
    service.base.kb.embedder.warm_up = lambda: warmed.append("model run")
    with ServerThread(service) as s:
        assert warmed == ["model run"] and call("GET", f"{s.url}/health").status == 200


def test_a_remote_endpoints_client_is_built_before_the_server_listens_with_no_call(tmp_path):
    """Importing the OpenAI SDK took a second of the first question's answer."""
    from engine.floor.llm.openai_api import OpenAILLM

    llm = OpenAILLM("m", base_url="http://127.0.0.1:9/v1")
    service = film_service(tmp_path, llm, llm_spec="openai:m@http://127.0.0.1:9/v1")
    with ServerThread(service):
        assert llm._client is not None
