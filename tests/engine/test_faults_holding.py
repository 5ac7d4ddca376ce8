"""Fault cells that already held when the operator's fault matrix was run, kept as specs so they
keep holding: many threads on one RoutedRAG, a pickle posing as a router checkpoint, and an API
key that never reaches the disk."""

from __future__ import annotations

import pickle
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from engine.core.pipeline import RoutedRAG
from engine.floor.base.errors import CheckpointError
from router.checkpoint import load_checkpoint
from tests.engine.test_llm_faults import FakeEndpoint
from tests.fakes import FakeRouter, ScriptedLLM, WordOverlapKB, make_rag
from tests.samples import PASSAGES


def test_sixteen_threads_on_one_routedrag_each_get_their_own_answer_and_usage():
    def reply(messages):
        question = messages[-1]["content"].rsplit("Question: ", 1)[1].split("\n")[0]
        return f"answer to {question}"

    llm = ScriptedLLM([reply] * 64)
    rag = make_rag(llm)
    questions = [f"Where was person number {i} born?" for i in range(64)]
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda q: rag.answer(q, route="chunk"), questions))
    assert [a.text for a in answers] == [f"answer to {q}" for q in questions]
    assert all(a.usage.llm_calls == 1 and len(a.trace["llm_calls"]) == 1 for a in answers)


class _Payload:
    """Unpickling this would create the marker file: it must never happen."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_pickle_posing_as_a_router_checkpoint_is_refused_without_running_it(tmp_path):
    path, marker = tmp_path / "generalist.ckpt", tmp_path / "the-payload-ran"
    path.write_bytes(pickle.dumps(_Payload(marker)))
    with pytest.raises(CheckpointError, match="not a logicroute router checkpoint"):
        load_checkpoint(path)
    assert not marker.exists()


def test_the_api_key_never_reaches_the_disk_nor_the_answer(tmp_path, monkeypatch):
    key = "sk-the-secret-4f7c1e"
    monkeypatch.setenv("LOGICROUTE_API_KEY", key)
    monkeypatch.setenv("LOGICROUTE_CACHE_DIR", str(tmp_path / "cache"))
    with FakeEndpoint("30 July 1970") as server:
        rag = RoutedRAG(
            kb=WordOverlapKB.titled(PASSAGES), llm_spec=f"openai:m@{server.url}", router=FakeRouter(), cache=True
        )
        ans = rag.answer("When was Christopher Nolan born?", route="chunk")
        again = rag.answer("When was Christopher Nolan born?", route="chunk")
    assert ans.text == "30 July 1970" and again.usage.cached_calls == 1  # the cache was written and read
    assert key not in repr(ans.to_dict())
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and not [p for p in written if key.encode() in p.read_bytes()]
