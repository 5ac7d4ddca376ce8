"""`logicroute bench peers`: the harness on a tiny corpus with fake peers. Every system gets the
same passages and questions; the report has the paper's columns and each system's settings; an
interrupted index build or answer run continues without indexing a passage or answering a
question twice; a failed answer or a system that cannot start is counted, not dropped; the
subprocess protocol books every LLM call a runner makes. No model, no embedder, no peer package."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from engine.floor.base.errors import LLMError, LogicRouteError
from tests.fakes import Cut, ScriptedLLM, this_python_as_venv
from training.common.jsonl_store import read_jsonl
from training.peers.bench_peers import IndexCost, PeerAdapter, PeerAnswer, PeerContext
from training.peers.bench_peers_report import COLUMNS, report_markdown
from training.peers.bench_peers_run import RESULTS_FILE, PeersConfig, run_peers
from training.peers.bench_peers_subprocess import RUNNERS, SubprocessPeer

FACTS = [  # question, gold, the passage that answers it, a distractor
    ("Who founded Alpha Corp?", "Ann", "Alpha Corp was founded by Ann.", "Beta Ltd makes bridges."),
    ("Where was Ann born?", "Oslo", "Ann was born in Oslo.", "Bo was born in Rome."),
    ("What does Gamma sell?", "boats", "Gamma sells boats.", "Delta sells cars."),
    ("Who is Delta run by?", "Dee", "Delta is run by Dee.", "Epsilon is run by Eve."),
]


def write_set(tmp_path) -> str:
    f = tmp_path / "tiny.jsonl"
    with open(f, "w") as fh:
        for i, (q, gold, text, distractor) in enumerate(FACTS):
            passages = [{"title": f"fact {i}", "text": text}, {"title": f"other {i}", "text": distractor}]
            fh.write(json.dumps({"id": f"q{i}", "question": q, "answers": [gold], "passages": passages}) + "\n")
    return str(f)


class Stop(BaseException):
    """An interruption (Ctrl-C, a killed job): not an error any layer may catch."""


class FakePeer(PeerAdapter):
    """Indexes by keeping the passages (one LLM call each, as an extracting peer would make);
    answers with the last word of the indexed passage sharing most words with the question.
    `log` keeps what reached it; `stop_after` interrupts the run after so many calls."""

    name = "fake"
    log: dict = {}
    stop_after: dict = {}
    fail_on = "Gamma"

    def __init__(self, ctx: PeerContext):
        super().__init__(ctx)
        self.store = ctx.workdir / "store.json"  # a peer keeps its index in its folder
        self.passages: dict = json.loads(self.store.read_text()) if self.store.exists() else {}

    def _tick(self, what: str) -> None:
        n = self.stop_after.get(what)
        if n is not None:
            if n == 0:
                raise Stop()
            self.stop_after[what] = n - 1

    def index(self, passages, progress):
        self._tick("index")
        self.log.setdefault("indexed", []).extend(p.id for p in passages)
        cost = IndexCost(passages=len(passages))
        for p in passages:
            c = self.ctx.llm.chat([{"role": "user", "content": f"extract: {p.text}"}])
            cost.llm_calls, cost.prompt_tokens = cost.llm_calls + 1, cost.prompt_tokens + c.prompt_tokens
            cost.completion_tokens += c.completion_tokens
            self.passages[p.id] = p.text
        self.store.write_text(json.dumps(self.passages))
        return cost

    def answer(self, question):
        self._tick("answer")
        self.log.setdefault("asked", []).append(question)
        if self.fail_on in question:
            return PeerAnswer("", llm_calls=1, error="the extraction left no entity")
        words = set(question.lower().strip("?").split())
        best = max(self.passages.values(), key=lambda t: len(words & set(t.lower().strip(".").split())))
        return PeerAnswer(best.strip(".").split()[-1], llm_calls=2, prompt_tokens=30, completion_tokens=3, seconds=0.5)

    def settings(self):
        return {"mode": "overlap"}


@pytest.fixture
def fake():
    FakePeer.log, FakePeer.stop_after = {}, {}
    return FakePeer


def run(tmp_path, systems=("fake",), registry=None, **kw):
    cfg = PeersConfig(data=write_set(tmp_path), systems=systems, out=str(tmp_path / "out"), n=4, index_batch=3, **kw)
    cfg.show_progress = False
    llm = ScriptedLLM(rules={"extract": "entities: none"})
    return run_peers(cfg, registry or {"fake": FakePeer}, llm, echo=lambda s: None)


def test_a_system_indexes_every_passage_of_the_questions_and_their_distractors_once_and_answers_each_question(
    tmp_path, fake
):
    report = run(tmp_path)
    assert sorted(fake.log["indexed"]) == sorted(set(fake.log["indexed"])) and len(fake.log["indexed"]) == 8
    assert sorted(fake.log["asked"]) == sorted(q for q, *_ in FACTS)
    row = report["systems"][0]
    assert row["questions"] == 4 and row["index_passages"] == 8
    assert row["index_llm_calls"] == 8 and row["index_prompt_tokens"] > 0  # what the LLM counted, summed over batches
    assert row["llm_calls_per_q"] == pytest.approx((2 + 2 + 1 + 2) / 4)
    assert row["em"] == 75.0 and row["f1"] == 75.0  # Ann, Oslo, Dee right; the Gamma question failed


def test_a_failed_answer_is_counted_and_scored_zero_not_dropped_and_retry_errors_asks_it_again(tmp_path, fake):
    report = run(tmp_path)
    row = report["systems"][0]
    assert row["errors"] == 1 and row["questions"] == 4
    md = report_markdown(report, "logicroute bench peers tiny")
    assert "- fake: 1 of 4 answers failed" in md
    fake.fail_on = "nothing matches this"
    try:
        again = run(tmp_path, retry_errors=True)
    finally:
        fake.fail_on = "Gamma"
    assert fake.log["asked"].count("What does Gamma sell?") == 2
    assert again["systems"][0]["errors"] == 0 and again["systems"][0]["em"] == 100.0


def test_an_interrupted_index_build_continues_with_the_passages_no_batch_finished(tmp_path, fake):
    fake.stop_after["index"] = 1  # the second batch of 3 is interrupted before it starts
    with pytest.raises(Stop):
        run(tmp_path)
    assert len(fake.log["indexed"]) == 3
    fake.stop_after.clear()
    report = run(tmp_path)
    assert sorted(fake.log["indexed"]) == sorted(set(fake.log["indexed"])) and len(fake.log["indexed"]) == 8
    assert report["systems"][0]["index_passages"] == 8 and report["systems"][0]["index_llm_calls"] == 8


def test_an_interrupted_answer_run_answers_no_question_twice(tmp_path, fake):
    fake.stop_after["answer"] = 2
    with pytest.raises(Stop):
        run(tmp_path)
    assert len(fake.log["asked"]) == 2
    fake.stop_after.clear()
    report = run(tmp_path)
    assert sorted(fake.log["asked"]) == sorted(q for q, *_ in FACTS)  # each once, over both runs
    rows = [r for r in read_jsonl(tmp_path / "out" / "tiny" / RESULTS_FILE) if r["kind"] == "answer"]
    assert len(rows) == 4 and report["systems"][0]["questions"] == 4


def test_changed_settings_answer_again_instead_of_reusing_rows(tmp_path, fake):
    run(tmp_path)

    class Other(FakePeer):
        def settings(self):
            return {"mode": "other"}

    run(tmp_path, registry={"fake": Other})
    assert len(fake.log["asked"]) == 8 and len(fake.log["indexed"]) == 16


def test_a_system_that_cannot_start_is_a_report_row_with_its_reason(tmp_path, fake):
    def missing(ctx):
        raise LogicRouteError("no Python at /nowhere/bin/python")

    report = run(tmp_path, systems=("fake", "absent"), registry={"fake": FakePeer, "absent": missing})
    absent = report["systems"][1]
    assert absent["system"] == "absent" and absent["questions"] == 0 and "no Python at" in absent["error"]
    md = report_markdown(report, "cmd")
    assert "- absent: start: no Python at /nowhere/bin/python" in md


def test_the_report_has_the_papers_columns_and_every_systems_settings(tmp_path, fake):
    report = run(tmp_path)
    md = report_markdown(report, "logicroute bench peers tiny --n 4")
    header = next(line for line in md.splitlines() if line.startswith("| system"))
    assert [c.strip() for c in header.strip("|").split("|")] == list(COLUMNS)
    assert '- **fake**: `{"mode": "overlap"}`' in md
    assert "8 passages" in md and "`logicroute bench peers tiny --n 4`" in md
    assert "- fake per passage indexed: 1.0 LLM calls" in md  # what sizes a longer run


def test_an_unknown_system_is_an_error_naming_the_choices(tmp_path, fake):
    with pytest.raises(LogicRouteError, match="unknown system.*choose from fake"):
        run(tmp_path, systems=("nope",))


def test_logicroutes_own_rows_index_with_no_llm_call_and_book_each_answers_usage(tmp_path, fake, monkeypatch):
    from hierarchy.documents import Chunk
    from tests.fakes import WordOverlapKB
    from training.peers.bench_peers_subprocess import builtin_registry

    def kb_of(path, passages, show_progress=True):
        return WordOverlapKB(Chunk(p.id, p.id, p.title, p.text, 0) for p in passages)

    monkeypatch.setattr("training.bench.bench_data.build_or_open_kb", kb_of)
    llm = ScriptedLLM(rules={q: gold for q, gold, *_ in FACTS})
    cfg = PeersConfig(data=write_set(tmp_path), systems=("chunk",), out=str(tmp_path / "out"), n=4)
    cfg.show_progress = False
    report = run_peers(cfg, {"chunk": builtin_registry()["chunk"]}, llm, echo=lambda s: None)
    row = report["systems"][0]
    assert row["index_llm_calls"] == 0 and row["index_passages"] == 8
    assert row["questions"] == 4 and row["em"] == 100.0 and row["llm_calls_per_q"] == 1.0
    assert row["prompt_tokens_per_q"] == pytest.approx(llm.reported_tokens[0] / 4, abs=0.1)
    assert row["settings"]["route"] == "chunk" and row["settings"]["k"] == 3


def test_the_router_row_keeps_the_shipped_generalist_and_router_adapted_takes_the_kbs_own(tmp_path):
    from types import SimpleNamespace

    from router.checkpoint import DEFAULT_CHECKPOINT
    from router.kb_router import MANIFEST_ENTRY
    from training.peers.bench_peers import router_checkpoint

    bare = SimpleNamespace(path=tmp_path, manifest={})
    with pytest.raises(LogicRouteError, match="logicroute adapt --kb"):
        router_checkpoint(bare, "router-adapted")
    (tmp_path / "router").mkdir()
    (tmp_path / "router" / "adapted.ckpt").write_bytes(b"x")
    adapted = SimpleNamespace(path=tmp_path, manifest={MANIFEST_ENTRY: {"checkpoint": "router/adapted.ckpt"}})
    assert router_checkpoint(adapted, "router") == str(DEFAULT_CHECKPOINT)
    assert router_checkpoint(adapted, "router-adapted") == str(tmp_path / "router" / "adapted.ckpt")


# ------------------------------------------------------------- the subprocess protocol

ECHO_RUNNER = """
import sys
sys.path.insert(0, {runners!r})
from protocol import Channel, RemoteError, serve

ch = Channel()
print("a peer printing to stdout must not break the protocol")

def hello(workdir, embedding_dim, settings):
    return {{"package": "echo", "version": "1", "settings": settings}}

def index(passages):
    failed = []
    for p in passages:
        vec = ch.embed([p["text"]])[0]
        try:
            ch.llm([{{"role": "user", "content": "extract " + p["text"]}}], 64, json_mode=p["id"] == "j")
        except RemoteError:
            failed.append(p["id"])
    return {{"failed": failed, "dim": len(vec)}}

def answer(question):
    if "crash" in question:
        raise ValueError("no entities")
    try:
        r = ch.request({{"rpc": "llm", "messages": [{{"role": "user", "content": question}}], "max_tokens": 16,
                        "json": "json" in question}})
        return {{"text": r["text"] + ("..." if r["finish_reason"] == "length" else "")}}  # a cut reply, marked
    except RemoteError:
        return {{"text": "None"}}  # as LightRAG does: the failed call swallowed

serve(ch, {{"hello": hello, "index": index, "answer": answer, "close": lambda: {{}}}})
"""


class Emb:
    dim, spec = 4, "fake-emb"

    def encode(self, texts):
        return np.ones((len(texts), 4))


def echo_peer(tmp_path, llm):
    this_python_as_venv(tmp_path)
    runner = tmp_path / "echo_runner.py"
    runner.write_text(textwrap.dedent(ECHO_RUNNER.format(runners=str(RUNNERS))))
    peer_cls = type("Echo", (SubprocessPeer,), {"name": "echo", "runner": str(runner), "requirements": ("echo",)})
    ctx = PeerContext(llm, tmp_path, Emb(), options={"echo_venv": str(tmp_path / "venv")})
    return peer_cls(ctx)


def test_a_runner_reaches_the_harness_llm_and_embedder_and_every_call_it_makes_is_booked(tmp_path):
    from hierarchy.datasets import Passage

    rules = {"extract a": "x", "extract b": LLMError("endpoint down"), "extract j": "{}", "Who": "Ann"}
    llm = ScriptedLLM(rules={**rules, "Where": Cut("in the north of")})
    peer = echo_peer(tmp_path, llm)
    try:
        assert peer.settings()["package"] == "echo==1" and peer.settings()["embedder"] == "fake-emb"
        assert peer.settings()["store"].startswith("store-")  # the rows' signature names the store they built
        passages = [Passage("a", "", "a text"), Passage("b", "", "b text"), Passage("j", "", "j text")]
        cost = peer.index(passages, lambda d, t: None)
        assert cost.passages == 3 and cost.llm_calls == 3  # b's call failed, and is counted
        assert cost.failed_calls == 1 and cost.errors == 1  # the runner reported b's document failed
        ok = [c for c in llm.completions if "extract b" not in c.text]
        assert cost.prompt_tokens == sum(c.prompt_tokens for c in ok) > 0
        a = peer.answer("Who founded Alpha?")
        assert a.text == "Ann" and a.llm_calls == 1 and a.error is None
        assert peer.answer("Where is Alpha?").text == "in the north of..."  # the runner learns it was cut
        bad = peer.answer("crash now")
        assert bad.error == "ValueError: no entities" and bad.text == ""
    finally:
        peer.close()
    assert peer.proc is None


class TimedLLM(ScriptedLLM):
    """Every call reports 7 seconds, as a slow local model's would."""

    def chat(self, messages, **kw):
        c = super().chat(messages, **kw)
        c.seconds = 7.0
        return c


def test_a_build_replayed_from_the_llm_cache_reports_the_seconds_its_calls_first_took(tmp_path):
    from engine.floor.llm.cache import CachedLLM
    from hierarchy.datasets import Passage

    llm = CachedLLM(TimedLLM(rules={"extract": "x"}), tmp_path / "cache.sqlite")
    passages = [Passage("a", "", "a text"), Passage("c", "", "c text")]
    costs = []
    for run in ("first", "resumed"):
        (tmp_path / run).mkdir()
        peer = echo_peer(tmp_path / run, llm)
        try:
            costs.append(peer.index(passages, lambda d, t: None))
        finally:
            peer.close()
    first, resumed = costs
    assert (first.cached_calls, resumed.cached_calls) == (0, 2) and first.llm_calls == resumed.llm_calls == 2
    assert resumed.seconds >= 14.0 and resumed.prompt_tokens == first.prompt_tokens


def test_a_failed_call_the_peer_swallowed_makes_its_answer_an_error_and_json_goes_as_free_text(tmp_path):
    llm = ScriptedLLM(rules={"json": '{"keywords": ["Ann"]}', "Who": LLMError("endpoint down")})
    peer = echo_peer(tmp_path, llm)
    try:
        swallowed = peer.answer("Who founded Alpha?")
        assert swallowed.text == "None" and swallowed.error.startswith("1 LLM call(s) failed: LLMError: endpoint down")
        asked = peer.answer("keywords as json?")
        assert asked.text == '{"keywords": ["Ann"]}' and asked.error is None and asked.llm_calls == 1
        assert llm.calls[-1]["schema"] is None  # llama.cpp's server rejects a schema: no backend gets one
    finally:
        peer.close()


def test_a_peer_whose_venv_is_missing_names_the_install_command(tmp_path):
    peer = echo_peer(tmp_path, ScriptedLLM())
    peer.ctx.options["echo_venv"] = str(tmp_path / "absent")
    with pytest.raises(LogicRouteError, match="python -m venv .*absent && .*pip install 'echo'"):
        peer.settings()


def test_the_peers_pins_are_the_ones_the_extras_install():
    import tomllib
    from pathlib import Path

    from training.peers.bench_peers_subprocess import HippoRAGAdapter, LightRAGAdapter, NanoGraphRAGAdapter

    extras = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert extras["peers"] == list(LightRAGAdapter.requirements)
    assert extras["peers-hipporag"] == list(HippoRAGAdapter.requirements)
    assert extras["peers-nano"] == list(NanoGraphRAGAdapter.requirements)


def test_lightrag_reads_its_own_record_delimiters_in_replies_to_prompts_the_harness_neutralised(monkeypatch):
    from engine.floor.llm.control_tokens import neutralise_messages

    monkeypatch.syspath_prepend(str(RUNNERS))
    from training.peers.peer_runners.lightrag_runner import restore_delimiters

    sent = neutralise_messages([{"role": "user", "content": "entity<|#|>Ann<|#|>person\n<|COMPLETE|>"}])
    copied = sent[0]["content"]  # what a model that copies the example writes back
    assert "<|#|>" not in copied
    assert restore_delimiters(copied) == "entity<|#|>Ann<|#|>person\n<|COMPLETE|>"


def test_lightrag_deletes_the_documents_an_interrupted_build_left_half_done_so_they_are_extracted_again(monkeypatch):
    import asyncio

    monkeypatch.syspath_prepend(str(RUNNERS))
    from training.peers.peer_runners.lightrag_runner import clear_unfinished

    class Status:
        async def get_docs_by_statuses(self, statuses):
            return {d: s for d, s in docs.items() if s in statuses}

    class Rag:
        doc_status = Status()

        async def adelete_by_doc_id(self, doc_id):
            docs.pop(doc_id)

    docs = {"a": "processed", "b": "processing", "dup-1": "failed", "c": "pending"}
    assert asyncio.run(clear_unfinished(Rag(), ["failed", "processing", "pending"])) == ["b", "c", "dup-1"]
    assert docs == {"a": "processed"}
