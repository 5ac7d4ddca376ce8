"""LLM calls a peer makes at the same time, decoded together: the harness serves an `llm_many`
request with engine.llm's chat_many and books every completion, and HippoRAG's runner gathers the
calls its threads make at once into such requests, handing each thread its own reply."""

from __future__ import annotations

import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from engine.base.errors import LLMError
from engine.base.types import Completion
from training.bench_peers import PeerContext
from training.bench_peers_subprocess import RUNNERS, SubprocessPeer

MANY_RUNNER = """
import sys
sys.path.insert(0, {runners!r})
from protocol import Channel, serve

ch = Channel()

def hello(workdir, embedding_dim, settings):
    return {{"package": "many", "version": "1", "settings": settings}}

def index(passages):
    reqs = [{{"messages": [{{"role": "user", "content": "extract " + p["text"]}}], "max_tokens": p.get("max", 64)}}
            for p in passages]
    reply = ch.request({{"rpc": "llm_many", "requests": reqs}})
    return {{"texts": reply["texts"], "errors": reply["errors"]}}

serve(ch, {{"hello": hello, "index": index, "close": lambda: {{}}}})
"""


class BatchingLLM:
    """An LLM with a chat_many of its own; "long" in a prompt fails that request."""

    name = "fake:batching"

    def __init__(self):
        self.batches: list[tuple[int, list[str]]] = []

    def chat(self, messages, **kw):
        raise AssertionError("llm_many must not go one call at a time")

    def chat_many(self, requests, *, max_tokens=256):
        self.batches.append((max_tokens, [m[-1]["content"] for m in requests]))
        return [
            LLMError("prompt too long")
            if "long" in m[-1]["content"]
            else Completion("re " + m[-1]["content"], 10, 4, 2.0)
            for m in requests
        ]


class Emb:
    dim, spec = 4, "fake-emb"

    def encode(self, texts):
        return np.ones((len(texts), 4))


def test_the_harness_serves_calls_made_together_as_one_batch_and_books_each(tmp_path):
    from hierarchy.datasets import Passage

    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(sys.executable)
    runner = tmp_path / "many_runner.py"
    runner.write_text(textwrap.dedent(MANY_RUNNER.format(runners=str(RUNNERS))))
    peer_cls = type("Many", (SubprocessPeer,), {"name": "many", "runner": str(runner)})
    llm = BatchingLLM()
    peer = peer_cls(PeerContext(llm, tmp_path, Emb(), options={"many_venv": str(tmp_path / "venv")}))
    sent = {}
    try:
        peer._start()
        texts = ["a", "long b", "c", "d"]
        batch = [{"id": t, "title": "", "text": t, "max": 64 if t != "d" else 32} for t in texts]
        result, usage = peer._command("index", passages=batch)
        sent = result
        cost = peer.index([Passage("x", "", "x"), Passage("y", "", "y")], lambda d, t: None)
    finally:
        peer.close()
    assert sent["texts"] == ["re extract a", None, "re extract c", "re extract d"]
    assert sent["errors"][1] == "LLMError: prompt too long" and sent["errors"][0] is None
    assert llm.batches[:2] == [(64, ["extract a", "extract long b", "extract c"]), (32, ["extract d"])]
    assert usage.llm_calls == 4 and usage.prompt_tokens == 30 and usage.completion_tokens == 12
    assert usage.llm_seconds == 6.0 and peer.failed_calls == 1
    assert (cost.llm_calls, cost.completion_tokens) == (2, 8)  # an index's cost counts them as well


@pytest.fixture
def runner_module(monkeypatch):
    monkeypatch.syspath_prepend(str(RUNNERS))
    monkeypatch.delitem(sys.modules, "hipporag_runner", raising=False)
    import hipporag_runner

    return hipporag_runner


class FakeChannel:
    """protocol.Channel's calls, answering after `delay` s; records what was sent."""

    def __init__(self, delay=0.05, fail=None):
        self.delay, self.fail = delay, fail
        self.sent: list[list[str]] = []
        self.lock = threading.Lock()  # one request in flight, as Channel

    def llm(self, messages, max_tokens, json_mode=False):
        with self.lock:
            self.sent.append([messages[-1]["content"]])
            time.sleep(self.delay)
        return "re " + messages[-1]["content"]

    def request(self, obj):
        from protocol import RemoteError

        with self.lock:
            assert obj["rpc"] == "llm_many"
            asked = [r["messages"][-1]["content"] for r in obj["requests"]]
            self.sent.append(asked)
            time.sleep(self.delay)
            if self.fail:
                raise RemoteError(self.fail)
        return {
            "texts": [None if "bad" in a else "re " + a for a in asked],
            "errors": ["LLMError: prompt too long" if "bad" in a else None for a in asked],
        }


def call_from_threads(gather, prompts):
    """Each prompt from a thread of its own, all at once; prompt -> its reply or error."""
    out = {}

    def one(p):
        try:
            out[p] = gather.llm([{"role": "user", "content": p}], 64)
        except Exception as e:
            out[p] = e

    threads = [threading.Thread(target=one, args=(p,)) for p in prompts]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in threads), "a call never came back"
    return out


def test_calls_made_together_go_as_few_batches_and_each_thread_gets_its_own_reply(runner_module):
    ch = FakeChannel()
    gather = runner_module.Gatherer(ch, size=4, quiet=0.2)
    prompts = [f"passage {i}" for i in range(6)]
    with gather.gathering():
        out = call_from_threads(gather, prompts)
    assert out == {p: "re " + p for p in prompts}
    assert sorted(p for b in ch.sent for p in b) == sorted(prompts)  # each sent once
    assert len(ch.sent) == 2 and max(len(b) for b in ch.sent) == 4


def test_a_failed_request_fails_only_its_own_caller_and_a_closed_channel_fails_every_caller(runner_module):
    from protocol import RemoteError

    gather = runner_module.Gatherer(FakeChannel(), size=8, quiet=0.2)
    with gather.gathering():
        out = call_from_threads(gather, ["good 1", "bad 2", "good 3"])
    assert out["good 1"] == "re good 1" and out["good 3"] == "re good 3"
    assert isinstance(out["bad 2"], RemoteError) and str(out["bad 2"]) == "LLMError: prompt too long"

    gone = runner_module.Gatherer(FakeChannel(fail="the harness closed the channel"), size=8, quiet=0.2)
    with gone.gathering():
        out = call_from_threads(gone, ["a", "b"])
    assert all(runner_module.harness_gone(e) for e in out.values())


def test_a_lone_call_goes_alone_once_no_other_came_and_outside_an_index_at_once(runner_module):
    ch = FakeChannel(delay=0.0)
    gather = runner_module.Gatherer(ch, size=8, quiet=0.2)
    t0 = time.perf_counter()
    with gather.gathering():
        assert gather.llm([{"role": "user", "content": "q"}], 16) == "re q"
    assert 0.2 <= time.perf_counter() - t0 < 2.0 and ch.sent == [["q"]]  # a plain llm request
    t0 = time.perf_counter()
    assert gather.llm([{"role": "user", "content": "r"}], 16) == "re r"  # not gathering: no wait
    assert time.perf_counter() - t0 < 0.1
