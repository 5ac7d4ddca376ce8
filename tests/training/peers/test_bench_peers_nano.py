"""nano-graphrag's runner (training/peers/peer_runners/nano_graphrag_runner.py) without nano-graphrag: the
functions it hands GraphRAG as best_model_func, cheap_model_func and embedding func reach the
harness's LLM and embedder, in the calling conventions nano-graphrag uses, and every call is booked;
the tokenizer that stands in for tiktoken cuts and restores text. The package itself runs only in
the benchmark (its own venv), never here."""

from __future__ import annotations

import json
import textwrap

import pytest

from engine.floor.base.errors import LLMError
from tests.fakes import ArangeEmbedder, ScriptedLLM, this_python_as_venv
from training.peers.bench_peers import PeerContext
from training.peers.bench_peers_subprocess import RUNNERS, NanoGraphRAGAdapter

# A runner that makes nano-graphrag's calls with the real runner's functions: extraction, the
# gleaning call with the extraction as history, a community report asking for JSON, a description
# summary with its own token limit, the entities' embeddings, and the local query's answer.
NANO_CALLS_RUNNER = """
import asyncio, sys
sys.path.insert(0, {runners!r})
from protocol import Channel, serve
from nano_graphrag_runner import DEFAULTS, Runner

ch = Channel()
r = Runner(ch)
r.s = dict(DEFAULTS)
llm, embed = r.harness_functions()
loop = asyncio.new_event_loop()

def hello(workdir, embedding_dim, settings):
    return {{"package": "nano-calls", "version": "1", "settings": {{}}}}

async def extract(p):
    prompt = "-Goal- extract from: " + p["text"]
    first = await llm(prompt, hashing_kv=None)
    history = [{{"role": "user", "content": prompt}}, {{"role": "assistant", "content": first}}]
    glean = await llm("MANY entities were missed", history_messages=history, hashing_kv=None)
    return first + glean

async def index_all(passages):
    records = await asyncio.gather(*[extract(p) for p in passages])  # as nano-graphrag gathers chunks
    report = await llm("write the community report", response_format={{"type": "json_object"}}, hashing_kv=None)
    summary = await llm("summarize the descriptions", max_tokens=500, hashing_kv=None)
    vectors = await embed(records)
    return {{"failed": [], "records": records, "report": report, "summary": summary,
             "dtype": str(vectors.dtype), "shape": list(vectors.shape), **r.counts}}

def index(passages):
    r.indexing = True  # as the real runner's index does around nano-graphrag's insert
    try:
        return loop.run_until_complete(index_all(passages))
    finally:
        r.indexing = False

def answer(question):
    return {{"text": loop.run_until_complete(llm(question, system_prompt="---Role--- tables", hashing_kv=None))}}

serve(ch, {{"hello": hello, "index": index, "answer": answer, "close": lambda: {{}}}})
"""


@pytest.fixture
def nano_calls(tmp_path):
    """(peer, llm): the runner above behind NanoGraphRAGAdapter, with this Python as its venv's."""
    venv = this_python_as_venv(tmp_path)
    runner = tmp_path / "nano_calls_runner.py"
    runner.write_text(textwrap.dedent(NANO_CALLS_RUNNER.format(runners=str(RUNNERS))))
    llm = ScriptedLLM(
        rules={
            "-Goal- extract from: Ann": '("entity"<|>"ANN"<|>"person"<|>"founder")< |COMPLETE|>',
            "-Goal- extract from: Bo": LLMError("endpoint down"),
            "MANY entities": "##",
            "community report": '{"title": "Ann"}',
            "summarize": "Ann founded Alpha.",
            "Who": "Ann",
        }
    )
    peer_cls = type("NanoCalls", (NanoGraphRAGAdapter,), {"runner": str(runner)})
    peer = peer_cls(PeerContext(llm, tmp_path, ArangeEmbedder(), options={"nano-graphrag_venv": str(venv)}))
    yield peer, llm
    peer.close()


def test_nano_graphrags_calls_reach_the_harness_with_their_history_system_prompt_and_token_limit(nano_calls):
    from hierarchy.datasets import Passage

    peer, llm = nano_calls
    cost = peer.index([Passage("a", "", "Ann founded Alpha.")], lambda d, t: None)
    assert cost.llm_calls == 4 and cost.failed_calls == 0
    assert cost.prompt_tokens == sum(c.prompt_tokens for c in llm.completions) > 0
    extract, glean, report, summary = llm.calls
    assert [m["role"] for m in glean["messages"]] == ["user", "assistant", "user"]
    assert glean["messages"][0]["content"] == extract["messages"][0]["content"]
    assert report["schema"] is None  # a JSON request goes as free text: the peer parses it
    assert summary["max_tokens"] == 500 and extract["max_tokens"] == 1024  # its own limit, else the default
    a = peer.answer("Who founded Alpha?")
    assert a.text == "Ann" and a.llm_calls == 1 and a.error is None
    assert [m["role"] for m in llm.calls[-1]["messages"]] == ["system", "user"]


def test_the_extraction_reads_its_completion_delimiter_and_the_embeddings_are_the_harnesss(nano_calls, monkeypatch):
    from hierarchy.datasets import Passage

    peer, _ = nano_calls
    captured = {}
    original = peer._command

    def keep(op, **args):
        result, usage = original(op, **args)
        captured[op] = result
        return result, usage

    monkeypatch.setattr(peer, "_command", keep)
    peer.index([Passage("a", "", "Ann founded Alpha.")], lambda d, t: None)
    got = captured["index"]
    # the harness's LLM breaks "<|COMPLETE|>" in prompts, so the model writes "< |COMPLETE|>" back
    assert got["records"] == ['("entity"<|>"ANN"<|>"person"<|>"founder")<|COMPLETE|>##']
    assert got["dtype"] == "float32" and got["shape"] == [1, 4]


def test_a_failed_call_reaches_nano_graphrag_as_an_empty_reply_and_is_counted_not_fatal(nano_calls):
    from hierarchy.datasets import Passage

    peer, llm = nano_calls
    passages = [Passage("a", "", "Ann founded Alpha."), Passage("b", "", "Bo was born in Rome.")]
    cost = peer.index(passages, lambda d, t: None)
    assert cost.failed_calls == 1 and cost.llm_calls == 6  # both passages' two calls, the report, the summary
    assert sum(1 for c in llm.calls if "Bo was born" in c["messages"][-1]["content"]) == 1


def test_an_unchanged_communitys_report_costs_one_call_however_many_batches_the_build_takes(nano_calls):
    from hierarchy.datasets import Passage

    peer, llm = nano_calls
    first = peer.index([Passage("a", "", "Ann founded Alpha.")], lambda d, t: None)
    second = peer.index([Passage("c", "", "Ann founded Alpha too.")], lambda d, t: None)
    reports = [c for c in llm.calls if "community report" in c["messages"][-1]["content"]]
    assert len(reports) == 1  # nano-graphrag asks again on every insert; its own cache would answer
    assert (first.llm_calls, second.llm_calls) == (4, 3)


def test_the_tokenizer_that_stands_in_for_tiktoken_cuts_text_into_pieces_that_decode_back(monkeypatch):
    monkeypatch.syspath_prepend(str(RUNNERS))
    from training.peers.peer_runners.nano_graphrag_runner import PieceEncoding

    enc = PieceEncoding()
    docs = ["Alpha Corp was founded by Ann in 1990.", "Ann was born in Oslo, Norway."]
    tokens = enc.encode_batch(docs, num_threads=16)
    assert enc.decode_batch(tokens) == docs
    # nano-graphrag's chunking decodes windows of a document's tokens: each is a span of the text
    cut = enc.decode_batch([tokens[0][:4], tokens[0][4:]])
    assert "".join(cut) == docs[0] and cut[0] == "Alpha Corp was founded"


def test_the_index_reports_as_failed_exactly_the_passages_nano_graphrag_did_not_store(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(RUNNERS))
    from training.peers.peer_runners.nano_graphrag_runner import Runner, doc_id

    class FullDocs:  # nano-graphrag's JsonKVStorage: filter_keys returns the keys it does NOT hold
        def __init__(self):
            self.data = {}

        async def filter_keys(self, keys):
            return {k for k in keys if k not in self.data}

    class Rag:  # stores a document unless its extraction found no entity, as GraphRAG.ainsert does
        full_docs = FullDocs()

        async def ainsert(self, texts):
            self.full_docs.data |= {doc_id(t): {"content": t.strip()} for t in texts if "nothing" not in t}

    runner = Runner(channel=None)
    runner.rag, runner.reports_file = Rag(), str(tmp_path / "reports.json")
    runner.reports = {"k": "a kept report"}
    batch = [{"id": "a", "title": "Ann", "text": "Ann founded Alpha."}, {"id": "b", "title": "", "text": "nothing"}]
    assert runner.index(batch)["failed"] == ["b"]
    assert runner.index([])["failed"] == []  # an empty batch opens the index and stores nothing
    assert json.loads((tmp_path / "reports.json").read_text()) == {"k": "a kept report"}
    runner.loop.close()
