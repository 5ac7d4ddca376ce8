"""router+check in the routing benchmark: the pipeline's structured self-check replayed on the
router's cheap answers (training/bench/bench_cascade.py), what it sends to logic and what that costs,
resume, and rows it cannot replay. One question per data file, so each dataset's table is that
question's result. Fakes only: no model, no embedder."""

from __future__ import annotations

import json
import threading

import pytest

from engine.core.pipeline import RoutedRAG
from engine.floor.base.types import Answer, Usage
from engine.floor.question.parse import text_of
from tests.fakes import FakeRouter, ScriptedLLM, WordOverlapKB
from training.bench.bench_data import BenchConfig
from training.bench.benchmark import RESULTS_FILE, run_benchmark
from training.common.jsonl_store import read_jsonl

# dataset -> (question with the router's P(logic), gold, each route's answer)
CASES = {
    "supported": ("Who founded Alpha Corp? [p=0.1]", "Ann", {"chunk": "Ann", "logic": "Ann"}),
    "unsupported": ("Where was the founder of Alpha Corp born? [p=0.2]", "Oslo", {"chunk": "Bergen", "logic": "Oslo"}),
    "routed_logic": ("Which came first, Alpha or Beta? [p=0.9]", "Alpha", {"chunk": "Beta", "logic": "Alpha"}),
    "says_unknown": ("What does Alpha Corp make? [p=0.3]", "boats", {"chunk": "unknown", "logic": "boats"}),
}
BY_QUESTION = {q: (gold, answers) for q, gold, answers in CASES.values()}
COST = {"chunk": (1, 500), "summary": (1, 650), "logic": (4, 1800)}
ROUTER_CHEAP_NOT_UNKNOWN = {CASES["supported"][0], CASES["unsupported"][0]}


class CascadeRAG(RoutedRAG):
    """Each route answers from CASES, from the KB's best chunk (the self-check's passages)."""

    runs: list = []
    lock = threading.Lock()

    def _run_route(self, q, route, budget=None):
        q = text_of(q)  # RoutedRAG hands its route runs the Question it read (engine.floor.question.parse)
        with self.lock:
            CascadeRAG.runs.append((route, q))
        calls, tokens = COST[route]
        text = BY_QUESTION[q][1].get(route, "wrong")
        trace = {"llm_calls": [], "flags": [], "retrieved": [{"chunk_id": c.chunk_id} for c in self.kb.search(q, k=1)]}
        u = Usage(llm_calls=calls, prompt_tokens=tokens, completion_tokens=5)
        return Answer(text=text, route=route, usage=u, trace=trace)


def self_check_reply(messages):
    """Supported when the proposed answer is the gold one."""
    q, proposed = messages[-1]["content"].split("\n\nQuestion: ")[1].split("\nProposed answer: ")
    return {"answered": proposed == BY_QUESTION[q][0]}


def checked(llm) -> list[str]:
    """The question of each self-check call made."""
    msgs = [c["messages"][-1]["content"] for c in llm.calls if "Proposed answer" in c["messages"][-1]["content"]]
    return [m.split("\n\nQuestion: ")[1].split("\nProposed answer: ")[0] for m in msgs]


def write_data(tmp_path) -> list[str]:
    files = []
    for name, (q, gold, _) in CASES.items():
        f = tmp_path / f"{name}.jsonl"
        passage = {"title": name, "text": f"{q.split(' [')[0]} The answer is {gold}."}
        f.write_text(json.dumps({"id": "q0", "question": q, "answers": [gold], "passages": [passage]}) + "\n")
        files.append(str(f))
    return files


def bench(tmp_path, llm=None, rag_class=None, **kw):
    llm = llm or ScriptedLLM(rules={"Proposed answer": self_check_reply})
    rag_class = rag_class or CascadeRAG
    router = FakeRouter()
    cfg = BenchConfig(
        data=write_data(tmp_path),
        out=str(tmp_path / "out"),
        n=None,
        kb_per_dataset=True,
        llm_spec="fake:scripted",
        show_progress=False,
        plots=False,
        llm_router=False,  # the only LLM calls left are the self-checks
        **kw,
    )
    report = run_benchmark(
        cfg,
        llm=llm,
        router=router,
        make_kb=lambda path, passages, show_progress=True: WordOverlapKB.titled({p.title: p.text for p in passages}),
        rag_factory=lambda kb: rag_class(kb=kb, llm=llm, router=router),
        echo=lambda s: None,
    )
    return report, llm


def check_rows(tmp_path) -> dict[str, dict]:
    return {r["dataset"]: r for r in read_jsonl(tmp_path / "out" / RESULTS_FILE) if r["kind"] == "self_check"}


@pytest.fixture(autouse=True)
def _reset_runs():
    CascadeRAG.runs = []


def test_the_self_check_is_asked_only_about_the_routers_cheap_answers(tmp_path):
    report, llm = bench(tmp_path)
    # not the question the router sends to logic, nor the cheap answer the text rule already escalates
    assert sorted(checked(llm)) == sorted(ROUTER_CHEAP_NOT_UNKNOWN)
    assert len(CascadeRAG.runs) == 4 * 3  # the check answers nothing again: fixed routes only
    assert set(check_rows(tmp_path)) == {"supported", "unsupported"}
    # the check read the passages the cheap route answered from, rebuilt from the stored chunk ids
    assert any("The answer is Oslo." in c["messages"][-1]["content"] for c in llm.calls)
    order = report["systems_order"]
    assert order.index("router+escalate") + 1 == order.index("router+check")


def test_an_unsupported_cheap_answer_goes_to_logic_and_pays_for_the_check_and_both_answers(tmp_path):
    report, _ = bench(tmp_path)
    check = check_rows(tmp_path)["unsupported"]
    assert check["reason"].startswith("self-check") and check["llm_calls"] == 1 and check["prompt_tokens"] > 0
    t = report["systems"]["unsupported"]
    res = t["router+check"]
    assert res["routes"]["logic"] == 1.0 and res["em"] == 1.0  # Bergen (chunk) -> Oslo (logic)
    assert res["llm_calls"] == 1 + 1 + 4
    assert res["prompt_tokens"] == check["prompt_tokens"] + 500 + 1800
    assert res["completion_tokens"] == check["completion_tokens"] + 5 + 5
    # the text rule alone keeps the wrong cheap answer
    assert t["router+escalate"]["routes"]["chunk"] == 1.0 and t["router+escalate"]["em"] == 0.0
    q = next(p for p in report["per_question"] if p["dataset"] == "unsupported")
    assert q["choices"]["router"] == "chunk" and q["choices"]["router+check"] == "logic"
    assert any("self-check sent 1 of the router's 3 cheap answers to logic" in n for n in report["notes"])
    assert any("logic beat the cheap answer's f1 on 1 of them" in n for n in report["notes"])


def test_a_supported_cheap_answer_stays_and_pays_for_the_check(tmp_path):
    report, _ = bench(tmp_path)
    check = check_rows(tmp_path)["supported"]
    assert check["reason"] is None
    res = report["systems"]["supported"]["router+check"]
    assert res["routes"]["chunk"] == 1.0 and res["em"] == 1.0
    assert res["llm_calls"] == 1 + 1 and res["prompt_tokens"] == 500 + check["prompt_tokens"]
    # unchecked questions cost what the router's pick costs (text-rule escalation: both answers)
    assert report["systems"]["routed_logic"]["router+check"]["llm_calls"] == 4
    assert report["systems"]["says_unknown"]["router+check"]["llm_calls"] == 1 + 4


def test_a_rerun_reuses_the_self_check_rows(tmp_path):
    first, _ = bench(tmp_path)
    CascadeRAG.runs = []
    second, llm = bench(tmp_path)
    assert llm.calls == [] and CascadeRAG.runs == []
    assert len(check_rows(tmp_path)) == 2 and len(read_jsonl(tmp_path / "out" / RESULTS_FILE)) == 4 * 3 + 2
    for scope in first["systems"]:
        assert (
            second["systems"][scope]["router+check"]["llm_calls"]
            == first["systems"][scope]["router+check"]["llm_calls"]
        )
        assert second["systems"][scope]["router+check"]["routes"] == first["systems"][scope]["router+check"]["routes"]


def test_rows_without_chunk_ids_are_skipped_with_a_note(tmp_path):
    bench(tmp_path)
    path = tmp_path / "out" / RESULTS_FILE
    # a results file of an older run: answer rows without `retrieved`, no self-check rows
    old = [{k: v for k, v in r.items() if k != "retrieved"} for r in read_jsonl(path) if r["kind"] == "answer"]
    path.write_text("".join(json.dumps(r) + "\n" for r in old))
    CascadeRAG.runs = []
    report, llm = bench(tmp_path)
    assert checked(llm) == [] and CascadeRAG.runs == []
    assert any(n.startswith("router+check: 2 router cheap answer(s) have no stored chunk ids") for n in report["notes"])
    # nothing checked: only the text rule escalates, as in router+escalate
    q = {p["dataset"]: p["choices"] for p in report["per_question"]}
    assert all(c["router+check"] == c["router+escalate"] for c in q.values())
    assert report["systems"]["pooled"]["router+check"] == report["systems"]["pooled"]["router+escalate"]


def test_the_cascade_is_left_out_when_self_check_is_off(tmp_path):
    report, llm = bench(tmp_path, self_check=False)
    assert "router+check" not in report["systems_order"] and checked(llm) == []
    assert check_rows(tmp_path) == {}


class SureRAG(CascadeRAG):
    """CascadeRAG whose cheap answers carry the model's certainty: sure of the right ones."""

    def _run_route(self, q, route, budget=None):
        ans = super()._run_route(q, route, budget)
        if route != "logic":
            ans.trace.confidence = 0.95 if ans.text == BY_QUESTION[text_of(q)][0] else 0.3
        return ans


def test_router_confidence_sends_the_unsure_cheap_answer_to_logic_and_pays_for_both(tmp_path):
    report, llm = bench(tmp_path, rag_class=SureRAG, self_check=False, escalate_below=0.63)
    t = report["systems"]
    unsure = t["unsupported"]["router+confidence"]
    assert unsure["routes"]["logic"] == 1.0 and unsure["em"] == 1.0  # Bergen at 0.3 -> Oslo
    assert unsure["prompt_tokens"] == 500 + 1800 and unsure["llm_calls"] == 1 + 4  # no check call: both answers
    sure = t["supported"]["router+confidence"]
    assert sure["routes"]["chunk"] == 1.0 and sure["prompt_tokens"] == 500
    assert t["says_unknown"]["router+confidence"]["routes"]["logic"] == 1.0  # the text rule still applies
    assert "router+check" not in report["systems_order"] and "router+confidence" in report["systems_order"]
    assert not checked(llm)  # the certainty costs no call
