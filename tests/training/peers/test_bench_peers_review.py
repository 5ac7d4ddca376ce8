"""What `bench peers`' published figures rely on: the comparison tells logicroute's systems from
the peers by the settings they name, every system's answer is scored from its reply by the same
rule, a failed answer keeps its cost, a peer's store never outlives a harness that stopped in the
middle of a batch, and what signs a peer's rows also names the store they built."""

from __future__ import annotations

import sys
import textwrap
import time
import types
from concurrent.futures import ThreadPoolExecutor, as_completed
from types import SimpleNamespace

import pytest

from engine.floor.base.errors import LogicRouteError
from tests.fakes import ScriptedLLM, this_python_as_venv
from training.peers.bench_peers import PeerContext, route_adapter
from training.peers.bench_peers_report import summarize
from training.peers.bench_peers_run import PeersConfig, SystemRun
from training.peers.bench_peers_subprocess import RUNNERS, SubprocessPeer

GOLD = "October 5, 1987"
LIGHTRAG_REPLY = f"{GOLD}\n\n### References\n\n- [1] Get Low (song)\n- [2] Dillon Francis"


# ------------------------------------------------ which systems are logicroute's (the comparison)


def test_no_peer_runner_has_a_setting_named_route_so_the_comparison_never_takes_a_peer_for_logicroute(monkeypatch):
    import importlib

    monkeypatch.syspath_prepend(str(RUNNERS))
    runners = sorted(p.stem for p in RUNNERS.glob("*_runner.py"))
    assert {"lightrag_runner", "hipporag_runner", "nano_graphrag_runner"} <= set(runners)
    for name in runners:  # a peer's settings are its runner's DEFAULTS and the harness's three keys
        defaults = importlib.import_module(f"training.peers.peer_runners.{name}").DEFAULTS
        assert "route" not in defaults, name


def test_each_of_logicroutes_systems_names_its_route_in_its_settings(tmp_path):
    for route, name in (("chunk", None), ("logic", None), ("router", None), ("router", "router-adapted")):
        ctx = PeerContext(ScriptedLLM(), tmp_path / (name or route))
        assert "route" in route_adapter(route, name)(ctx).settings()


# ------------------------------------------------ scores: every reply by the same rule


def answer_row(key: str, pred: str, stored_f1: float) -> dict:
    """A row as bench_peers_run writes it: the scores of the code that wrote it."""
    return {
        "key": key,
        "pred": pred,
        "golds": [GOLD],
        "em": stored_f1,
        "f1": stored_f1,
        "string_acc": 1.0,
        "llm_calls": 2,
        "prompt_tokens": 900,
        "completion_tokens": 20,
        "seconds": 10.0,
        "error": None,
    }


def test_the_report_scores_each_answer_from_its_reply_not_from_the_scores_its_row_kept():
    peer = SystemRun("lightrag", {"package": "lightrag-hku==1.5.7"}, "s", [], [answer_row("q0", LIGHTRAG_REPLY, 0.35)])
    logic = SystemRun("logic", {"route": "logic"}, "s", [], [answer_row("q0", GOLD, 1.0)])
    report = summarize("2wiki", PeersConfig(data="2wiki", systems=()), [], [], [logic, peer], "llm", [], 0.0)
    assert [(s["system"], s["em"], s["f1"]) for s in report["systems"]] == [
        ("logic", 100.0, 100.0),
        ("lightrag", 100.0, 100.0),
    ]
    assert report["comparisons"][0]["f1_difference"] == 0.0


# ------------------------------------------------ a failed answer keeps its cost


def test_a_logicroute_answer_that_fails_keeps_the_seconds_it_took(tmp_path):
    class BrokenRoute:
        def answer(self, question, route, budget):
            time.sleep(0.05)
            raise LogicRouteError("the route broke")

    adapter = route_adapter("logic")(PeerContext(ScriptedLLM(), tmp_path))
    adapter.rag = BrokenRoute()
    a = adapter.answer("Who founded Alpha?")
    assert a.error and a.seconds >= 0.05


# ------------------------------------------------ HippoRAG when the harness stops mid-batch


@pytest.fixture
def hipporag_runner(monkeypatch):
    """hipporag_runner with stand-ins for the two hipporag base classes it subclasses."""
    for name in ("hipporag", "hipporag.llm", "hipporag.embedding_model"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))

    class Config:
        @classmethod
        def from_dict(cls, d):
            return d

    class Base:
        def __init__(self, global_config=None, **_):
            self.global_config = global_config

    llm_base = types.ModuleType("hipporag.llm.base")
    llm_base.BaseLLM, llm_base.LLMConfig = Base, Config
    emb_base = types.ModuleType("hipporag.embedding_model.base")
    emb_base.BaseEmbeddingModel, emb_base.EmbeddingConfig = Base, Config
    monkeypatch.setitem(sys.modules, "hipporag.llm.base", llm_base)
    monkeypatch.setitem(sys.modules, "hipporag.embedding_model.base", emb_base)
    monkeypatch.syspath_prepend(str(RUNNERS))
    monkeypatch.delitem(sys.modules, "hipporag_runner", raising=False)
    import hipporag_runner

    return hipporag_runner


def openie_batch(llm, passages: int) -> list[str]:
    """HippoRAG's batch_openie in small: one call per passage in threads, each inside an `except
    Exception` that keeps the passage with no triple; what it returns HippoRAG saves as extracted."""

    def ner(i: int) -> str:
        try:
            return llm.infer([{"role": "user", "content": f"passage {i}"}])[0]
        except Exception as e:
            return f"no triple ({e})"

    with ThreadPoolExecutor() as pool:
        return [f.result() for f in as_completed([pool.submit(ner, i) for i in range(passages)])]


def test_hipporag_saves_nothing_of_a_batch_when_the_harness_stops_in_its_middle(hipporag_runner):
    from protocol import RemoteError

    class Closed:  # protocol.Channel once the harness has gone
        def request(self, *a, **k):
            raise RemoteError("the harness closed the channel")

    llm = hipporag_runner._harness_classes(Closed(), 4)[0](SimpleNamespace(max_new_tokens=16))
    with pytest.raises(BaseException) as stopped:
        openie_batch(llm, passages=5)
    assert not isinstance(stopped.value, Exception)  # past HippoRAG's handlers: the batch is not saved


def test_a_call_the_harness_could_not_serve_stays_hipporags_own_failure(hipporag_runner):
    from protocol import RemoteError

    class Refusing:
        def request(self, *a, **k):
            raise RemoteError("LLMError: prompt too long")

    llm = hipporag_runner._harness_classes(Refusing(), 4)[0](SimpleNamespace(max_new_tokens=16))
    assert openie_batch(llm, passages=1) == ["no triple (LLMError: prompt too long)"]


def test_hipporag_is_told_a_reply_was_cut_at_the_cap_so_it_repairs_the_json(hipporag_runner):
    class Cut:  # the harness's reply to a call the model ran to max_tokens in
        def request(self, obj):
            return {"text": '{"triples": [["Ann", "founded", "Alpha"], ["Ann", "fo', "finish_reason": "length"}

    llm = hipporag_runner._harness_classes(Cut(), 4)[0](SimpleNamespace(max_new_tokens=16))
    text, meta, _ = llm.infer([{"role": "user", "content": "extract"}])
    assert meta["finish_reason"] == "length"  # HippoRAG's OpenIE runs fix_broken_generated_json on it


# ------------------------------------------------ what signs a peer's rows names its store


VERSIONED_RUNNER = """
import sys
sys.path.insert(0, {runners!r})
from protocol import Channel, serve

ch = Channel()

def hello(workdir, embedding_dim, settings):
    return {{"package": "echo", "version": open({version!r}).read(), "settings": settings}}

serve(ch, {{"hello": hello, "close": lambda: {{}}}})
"""


def test_a_peer_upgraded_in_its_venv_does_not_reuse_the_store_its_former_version_built(tmp_path):
    this_python_as_venv(tmp_path)
    version = tmp_path / "venv" / "version"
    runner = tmp_path / "versioned_runner.py"
    runner.write_text(textwrap.dedent(VERSIONED_RUNNER.format(runners=str(RUNNERS), version=str(version))))
    peer_cls = type("Versioned", (SubprocessPeer,), {"name": "echo", "runner": str(runner)})

    def settings() -> dict:
        emb = SimpleNamespace(dim=4, spec="fake-emb")
        peer = peer_cls(PeerContext(ScriptedLLM(), tmp_path, emb, options={"echo_venv": str(tmp_path / "venv")}))
        try:
            return peer.settings()
        finally:
            peer.close()

    version.write_text("1.0")
    before = settings()
    (tmp_path / before["store"].split("#")[0] / "index.json").write_text("{}")  # the peer built its index
    version.write_text("2.0")
    try:
        after = settings()
    except LogicRouteError:
        return  # refusing the store is a fix too
    assert after["package"] != before["package"] and after["store"] != before["store"]
