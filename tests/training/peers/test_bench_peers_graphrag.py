"""Microsoft GraphRAG's runner (training/peers/peer_runners/graphrag_runner.py) without graphrag: the calls
GraphRAG's registered completion and embedding models make reach the harness's LLM and embedder in
GraphRAG's message shapes, with the token limits they ask for, and every call is booked; what the
runner reads of GraphRAG's replies and tables; the adapter's venv, registry and pins. The package
itself runs only in the benchmark (its own venv), never here."""

from __future__ import annotations

import json
import sys
import textwrap

import numpy as np
import pytest

from engine.floor.base.errors import LLMError, LogicRouteError
from tests.fakes import ArangeEmbedder, ScriptedLLM, this_python_as_venv
from training.peers.bench_peers import PeerContext
from training.peers.bench_peers_subprocess import RUNNERS, WORK, GraphRAGAdapter, builtin_registry

EXTRACTION = (
    "-Goal-\nGiven a text document that is potentially relevant to this activity and a list of entity types, "
    "identify all entities of those types from the text and all relationships among the identified entities.\n"
)
GLEANING = "MANY entities and relationships were missed in the last extraction. Add them below using the same format:\n"
RECORDS = '("entity"<|>ANN<|>PERSON<|>founder)\n##\n("relationship"<|>ANN<|>ALPHA<|>founded<|>9)'
SUMMARY = "You are a helpful assistant responsible for generating a comprehensive summary of the data provided below."

# A runner that makes GraphRAG's calls through the real runner's Runner.complete and Runner.embed,
# the two functions its registered completion and embedding models call: per passage the extraction
# and the gleaning (the extraction as history; GraphRAG's extractor catches a failed call), a
# description summary as a bare prompt string with GraphRAG's own token limit, a community report
# (a structured reply), the embeddings, and the local search's streamed answer with content parts.
GRAPHRAG_CALLS_RUNNER = """
import sys
sys.path.insert(0, {runners!r})
from protocol import Channel, RemoteError, serve
from graphrag_runner import DEFAULTS, Runner

ch = Channel()
r = Runner(ch)
r.s = dict(DEFAULTS)

def hello(workdir, embedding_dim, settings):
    return {{"package": "graphrag-calls", "version": "1", "settings": {{}}}}

def index(passages):
    records = []
    for p in passages:
        prompt = {extraction!r} + "Text: " + p["text"]
        try:
            first = r.complete([{{"role": "user", "content": prompt}}])
        except RemoteError:
            records.append("")
            continue
        history = [{{"role": "user", "content": prompt}}, {{"role": "assistant", "content": first}}]
        records.append(first + r.complete(history + [{{"role": "user", "content": {gleaning!r}}}]))
    summary = r.complete({summary!r}, max_tokens=500)
    report = r.complete("write the community report", structured=True)
    vectors = r.embed(records)
    return {{"failed": [], "records": records, "summary": summary, "report": report,
             "shape": [len(vectors), len(vectors[0])], "calls": r.calls, **r.counts}}

def answer(question):
    parts = [{{"type": "text", "text": question}}]
    messages = [{{"role": "system", "content": "---Role--- tables"}}, {{"role": "user", "content": parts}}]
    return {{"text": r.complete(messages, stream=True)}}

serve(ch, {{"hello": hello, "index": index, "answer": answer, "close": lambda: {{}}}})
"""


@pytest.fixture
def graphrag_calls(tmp_path):
    """(peer, llm): the runner above behind GraphRAGAdapter, with this Python as its venv's."""
    this_python_as_venv(tmp_path)
    runner = tmp_path / "graphrag_calls_runner.py"
    source = GRAPHRAG_CALLS_RUNNER.format(
        runners=str(RUNNERS), extraction=EXTRACTION, gleaning=GLEANING, summary=SUMMARY
    )
    runner.write_text(textwrap.dedent(source))
    llm = ScriptedLLM(
        rules={
            "MANY entities": "##",
            "Text: Ann": RECORDS + "< |COMPLETE|>",
            "Text: Bo": LLMError("endpoint down"),
            "comprehensive summary": "Ann founded Alpha.",
            "community report": '```json\n{"title": "Ann"}\n```',
            "Who": "Ann",
        }
    )
    peer_cls = type("GraphRAGCalls", (GraphRAGAdapter,), {"runner": str(runner)})
    peer = peer_cls(PeerContext(llm, tmp_path, ArangeEmbedder(), options={"graphrag_venv": str(tmp_path / "venv")}))
    yield peer, llm
    peer.close()


def captured_index(peer, monkeypatch) -> dict:
    """What the runner's index returned, beside the cost the adapter made of it."""
    captured = {}
    original = peer._command

    def keep(op, **args):
        result, usage = original(op, **args)
        captured[op] = result
        return result, usage

    monkeypatch.setattr(peer, "_command", keep)
    return captured


def test_graphrags_calls_reach_the_harness_with_their_history_and_token_limits_and_are_booked(graphrag_calls):
    from hierarchy.datasets import Passage

    peer, llm = graphrag_calls
    cost = peer.index([Passage("a", "", "Ann founded Alpha.")], lambda d, t: None)
    assert cost.llm_calls == 4 and cost.failed_calls == 0
    assert cost.prompt_tokens == sum(c.prompt_tokens for c in llm.completions) > 0
    extract, glean, summary, report = llm.calls
    assert [m["role"] for m in glean["messages"]] == ["user", "assistant", "user"]
    assert glean["messages"][0]["content"] == extract["messages"][0]["content"]
    assert summary["messages"] == [{"role": "user", "content": SUMMARY}]  # GraphRAG's bare prompt string
    # GraphRAG's own limit where it asks for one, a report's limit for a report, else the default
    assert (summary["max_tokens"], report["max_tokens"], extract["max_tokens"]) == (500, 2048, 1024)
    assert report["schema"] is None  # a structured request goes as free text: the runner reads the JSON
    a = peer.answer("Who founded Alpha?")
    assert a.text == "Ann" and a.llm_calls == 1 and a.error is None
    assert llm.calls[-1]["messages"][-1] == {"role": "user", "content": "Who founded Alpha?"}  # parts flattened


def test_the_extraction_reads_its_completion_delimiter_and_every_call_is_counted_by_kind(graphrag_calls, monkeypatch):
    from hierarchy.datasets import Passage

    peer, _ = graphrag_calls
    captured = captured_index(peer, monkeypatch)
    peer.index([Passage("a", "", "Ann founded Alpha.")], lambda d, t: None)
    got = captured["index"]
    # the harness's LLM breaks "<|COMPLETE|>" in prompts, so the model writes "< |COMPLETE|>" back
    assert got["records"] == [
        '("entity"<|>ANN<|>PERSON<|>founder)\n##\n("relationship"<|>ANN<|>ALPHA<|>founded<|>9)<|COMPLETE|>##'
    ]
    assert got["shape"] == [1, 4]  # the harness's embedder, one vector a text
    assert {k: v for k, v in got["calls"].items() if v} == {"extraction": 1, "gleaning": 1, "summary": 1, "report": 1}


def test_a_failed_call_reaches_graphrag_as_an_endpoints_error_and_is_counted(graphrag_calls, monkeypatch):
    from hierarchy.datasets import Passage

    peer, llm = graphrag_calls
    captured = captured_index(peer, monkeypatch)
    passages = [Passage("a", "", "Ann founded Alpha."), Passage("b", "", "Bo was born in Rome.")]
    cost = peer.index(passages, lambda d, t: None)
    assert cost.failed_calls == 1 and cost.llm_calls == 5  # Ann's two calls, Bo's failed one, summary, report
    assert captured["index"]["failed_calls"] == 1 and captured["index"]["records"][1] == ""
    assert sum(1 for c in llm.calls if "Bo was born" in c["messages"][-1]["content"]) == 1


@pytest.fixture
def runner_module(monkeypatch):
    monkeypatch.syspath_prepend(str(RUNNERS))
    from training.peers.peer_runners import graphrag_runner

    return graphrag_runner


def test_each_of_graphrags_prompts_is_told_for_the_kind_of_call_it_is(runner_module):
    kind = runner_module.call_kind

    def user(text):
        return [{"role": "user", "content": text}]

    assert kind(user(EXTRACTION + "Text: Ann founded Alpha."), False, False) == "extraction"
    assert kind(user(EXTRACTION) + [{"role": "assistant", "content": "x"}] + user(GLEANING), False, False) == "gleaning"
    assert (
        kind(user("It appears some entities and relationships may have still been missed. Y or N"), False, False)
        == "loop"
    )
    assert kind(user(SUMMARY + '\nEntities: "ANN"'), False, False) == "summary"
    assert kind(user("You are an AI assistant ... community ..."), True, False) == "report"
    assert kind([{"role": "system", "content": "---Role---"}, *user("Who?")], False, True) == "answer"
    assert kind(user("something GraphRAG asks elsewhere"), False, False) == "other"


def test_a_reply_asked_for_json_is_read_fenced_or_after_a_sentence_and_nothing_else_passes(runner_module):
    read = runner_module.json_object
    assert read('{"title": "Ann"}') == {"title": "Ann"}
    assert read('Here is the report:\n```json\n{"title": "Ann", "findings": []}\n```') == {
        "title": "Ann",
        "findings": [],
    }
    with pytest.raises(ValueError):
        read("Ann founded Alpha.")
    with pytest.raises(ValueError):
        read('["Ann"]')


def test_a_report_that_does_not_fill_graphrags_model_is_counted_and_fails_as_graphrag_expects(runner_module):
    class Report:  # a model with required fields, as GraphRAG's pydantic CommunityReportResponse
        def __init__(self, title, summary):
            self.title, self.summary = title, summary

    runner = runner_module.Runner(channel=None)
    assert runner.structured('```json\n{"title": "T", "summary": "S"}\n```', Report).summary == "S"
    with pytest.raises(TypeError):
        runner.structured('{"title": "T"}', Report)  # a field missing
    with pytest.raises(ValueError):
        runner.structured("The community is about Ann.", Report)  # no JSON at all
    assert runner.counts["reports_unparsed"] == 2
    runner.loop.close()


def test_the_documents_graphrag_indexes_are_the_passages_keyed_by_id_with_the_title_in_the_text(runner_module):
    rows = runner_module.document_rows(
        [{"id": "p1", "title": "Ann", "text": "Ann founded Alpha."}, {"id": "p2", "title": "", "text": "Bo."}]
    )
    assert [(r["id"], r["title"], r["text"]) for r in rows] == [
        ("p1", "Ann", "Ann\nAnn founded Alpha."),
        ("p2", "p2", "Bo."),
    ]
    assert [r["human_readable_id"] for r in rows] == [0, 1]


def test_a_passage_no_entity_came_from_is_reported_as_failed(runner_module):
    passages = [{"id": "a"}, {"id": "b"}, {"id": "c"}]
    units = [
        {"document_id": "a", "entity_ids": np.array(["e1", "e2"])},  # parquet gives arrays
        {"document_id": "b", "entity_ids": np.array([])},
        {"document_id": "c", "entity_ids": None},
        {"document_id": "c", "entity_ids": []},
    ]
    assert runner_module.unextracted(passages, units) == ["b", "c"]


def test_a_finished_index_reopened_builds_nothing(runner_module, tmp_path):
    runner = runner_module.Runner(channel=None)
    runner.workdir = str(tmp_path)
    assert runner.index([]) == {"failed": []}  # an empty store and no passage: nothing to build
    (tmp_path / "indexed.json").write_text(json.dumps(["a", "b"]))
    # graphrag is not installed here: any build would fail on its import
    assert runner.index([{"id": "b", "title": "", "text": "Bo."}, {"id": "a", "title": "", "text": "Ann."}]) == {
        "failed": []
    }
    runner.loop.close()


def test_an_index_over_other_passages_forgets_the_finished_one_before_it_builds(runner_module, tmp_path, monkeypatch):
    import types

    async def build_index(**_):  # GraphRAG's build, cut short
        raise RuntimeError("cut short")

    monkeypatch.setitem(sys.modules, "graphrag", types.ModuleType("graphrag"))
    monkeypatch.setitem(sys.modules, "graphrag.api", types.SimpleNamespace(build_index=build_index))
    runner = runner_module.Runner(channel=None)
    runner.workdir, runner.s = str(tmp_path), dict(runner_module.DEFAULTS)
    (tmp_path / "indexed.json").write_text(json.dumps(["a"]))
    with pytest.raises(RuntimeError, match="cut short"):
        runner.index([{"id": "b", "title": "", "text": "Bo."}])
    assert not (tmp_path / "indexed.json").exists()  # the next run builds again, not taking it for finished
    runner.loop.close()


def test_a_search_other_than_local_is_refused_when_the_runner_starts_not_answered_as_local(
    runner_module, tmp_path, monkeypatch
):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # hello sets it; the test's environment stays
    runner = runner_module.Runner(channel=None)
    with pytest.raises(ValueError, match="'global'.*local search only"):
        runner.hello(str(tmp_path), 4, {"search": "global"})
    runner.loop.close()


def test_graphrag_is_a_registered_peer_in_a_venv_of_its_own_sent_every_passage_at_once(monkeypatch, tmp_path):
    assert builtin_registry()["graphrag"] is GraphRAGAdapter
    assert GraphRAGAdapter.incremental is False  # one build: GraphRAG's update run makes a graph per batch
    assert GraphRAGAdapter.venv_default == WORK / "peers-venv-graphrag"
    assert "lightrag_runner.py" in GraphRAGAdapter.runner_modules  # its tokenizer: a change to it is a new store
    monkeypatch.setenv("LOGICROUTE_GRAPHRAG_VENV", str(tmp_path / "elsewhere"))
    peer = GraphRAGAdapter(PeerContext(ScriptedLLM(), tmp_path, ArangeEmbedder()))
    with pytest.raises(LogicRouteError, match=r"elsewhere/bin/python.*pip install 'graphrag==3\.3\.0'"):
        peer.python()


def test_graphrags_pin_is_the_one_its_extra_installs():
    import tomllib
    from pathlib import Path

    extras = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert extras["peers-graphrag"] == list(GraphRAGAdapter.requirements)
