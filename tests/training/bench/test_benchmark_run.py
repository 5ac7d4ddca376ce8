"""The routing benchmark run: the systems built from fixed-route rows, report files, resume,
which rows are reused (setup, logic settings, labels), fixed-route subsets and errors, overlap
with the router's training labels, distractor passages, the logreg system. Fakes only: no
model, no embedder."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from engine.core.pipeline import RoutedRAG
from engine.floor.base.types import Answer, Usage
from engine.floor.question.parse import text_of
from tests.fakes import FakeRouter, ScriptedLLM, WordOverlapKB
from tests.samples import PASSAGES
from training.bench.bench_data import BenchConfig
from training.bench.benchmark import RESULTS_FILE, run_benchmark
from training.common.jsonl_store import JsonlStore
from training.common.logic_experiment import LogicExperiment

# ---------------------------------------------------------------- a whole run with fakes


ALPHA = [
    ("Who founded Alpha Corp?", "Ann", 0.1, {"chunk", "summary", "logic"}),
    ("Where was the founder of Alpha Corp born?", "Oslo", 0.9, {"logic"}),
    ("What does Alpha Corp make overall?", "boats", 0.2, {"summary"}),
    ("Which came first, Alpha or Beta?", "Alpha", 0.8, {"chunk", "logic"}),
]


BETA = [
    ("Who runs Beta Ltd?", "Bo", 0.15, {"chunk"}),
    ("When was the town of Beta's founder born?", "1901", 0.7, {"logic"}),
    ("What is Beta known for?", "bridges", 0.3, set()),
]


def write_data(tmp_path):
    files = []
    for name, rows in (("alpha", ALPHA), ("beta", BETA)):
        f = tmp_path / f"{name}.jsonl"
        with open(f, "w") as fh:
            for i, (q, gold, p, _) in enumerate(rows):
                fh.write(
                    json.dumps(
                        {
                            "id": f"{name}{i}",
                            "question": f"{q} [p={p}]",
                            "answers": [gold],
                            "passages": [{"title": f"{name} {i}", "text": f"{q} The answer is {gold}."}],
                        }
                    )
                    + "\n"
                )
        files.append(str(f))
    return files


GOLD = {f"{q} [p={p}]": (gold, right) for q, gold, p, right in ALPHA + BETA}


COST = {"chunk": (1, 500), "summary": (1, 650), "logic": (4, 1800)}


class ScriptRAG(RoutedRAG):
    """Fixed routes answer from the table above; counts every route run."""

    runs: list = []
    lock = threading.Lock()

    def _run_route(self, q, route, budget=None):
        q = text_of(q)  # RoutedRAG hands its route runs the Question it read (engine.floor.question.parse)
        gold, right = GOLD[q]
        with self.lock:
            ScriptRAG.runs.append((route, q))
        calls, tokens = COST[route]
        u = Usage(llm_calls=calls, prompt_tokens=tokens, completion_tokens=5)
        wrong = "unknown" if route == "chunk" and "overall" in q else "wrong"
        retrieved = [{"chunk_id": c.chunk_id} for c in self.kb.search(q, k=1)]  # what the self-check reads
        trace = {"llm_calls": [], "flags": [], "retrieved": retrieved}
        return Answer(text=gold if route in right else wrong, route=route, usage=u, trace=trace)


def llm_router_reply(messages):
    q = messages[-1]["content"]
    return {"route": "logic" if ("founder" in q or "first" in q) else "chunk"}


def self_check_reply(messages):
    """The self-check: the passages answer the question when the proposed answer is the gold one."""
    q, proposed = messages[-1]["content"].split("\n\nQuestion: ")[1].split("\nProposed answer: ")
    return {"answered": proposed == GOLD[q][0]}


def scripted() -> ScriptedLLM:
    """The LLM of a run: router decisions and self-checks (answers come from ScriptRAG)."""
    return ScriptedLLM(rules={"Proposed answer": self_check_reply, "Question:": llm_router_reply})


def checks_asked(llm) -> list[str]:
    return [c["messages"][-1]["content"] for c in llm.calls if "Proposed answer" in c["messages"][-1]["content"]]


def make_cfg(tmp_path, files, **kw):
    kw.setdefault("plots", False)  # matplotlib only where the plots are checked
    return BenchConfig(
        data=files,
        out=str(tmp_path / "out"),
        n=None,
        kb_per_dataset=True,
        llm_spec="fake:scripted",
        show_progress=False,
        **kw,
    )


def run(tmp_path, files, llm=None, **kw):
    llm = llm or scripted()
    router = FakeRouter()
    report = run_benchmark(
        make_cfg(tmp_path, files, **kw),
        llm=llm,
        router=router,
        make_kb=lambda path, passages, show_progress=True: WordOverlapKB.titled({p.title: p.text for p in passages}),
        rag_factory=lambda kb: ScriptRAG(kb=kb, llm=llm, router=router),
        echo=lambda s: None,
    )
    return report, llm


@pytest.fixture(autouse=True)
def _reset_runs():
    ScriptRAG.runs = []


def test_run_builds_every_system_from_fixed_route_rows(tmp_path):
    files = write_data(tmp_path)
    report, llm = run(tmp_path, files)
    # only fixed routes answer: 7 questions x 3 routes, nothing re-run for routed systems
    assert len(ScriptRAG.runs) == 21
    # the LLM router: one decision per question; the self-check: the router's 3 cheap answers not "unknown"
    assert len(llm.calls) == 7 + 3 and len(checks_asked(llm)) == 3
    pooled = report["systems"]["pooled"]
    assert set(report["systems"]) == {"alpha", "beta", "pooled"}
    assert report["systems_order"] == [
        "chunk",
        "summary",
        "logic",
        "router",
        "router, no form policy",
        "router@0.25",
        "router@0.50",
        "router@0.75",
        "router+escalate",
        "router+check",
        "oracle",
        "random",
        "llm_router",
    ]
    assert pooled["chunk"]["em"] == pytest.approx(3 / 7)
    assert pooled["logic"]["em"] == pytest.approx(4 / 7)
    assert pooled["oracle"]["em"] == pytest.approx(6 / 7)  # one question no route answers
    # router argmax: P(logic) >= .7 -> logic (alpha1, alpha3, beta1), the rest chunk
    assert pooled["router"]["routes"] == pytest.approx({"chunk": 4 / 7, "summary": 0.0, "logic": 3 / 7})
    assert pooled["router"]["em"] == pytest.approx(5 / 7)
    assert pooled["router"]["llm_calls"] == pytest.approx((4 * 1 + 3 * 4) / 7)
    # a threshold of .25 also sends the P=.3 question to logic
    assert pooled["router@0.25"]["routes"]["logic"] == pytest.approx(4 / 7)
    # escalation replayed: the chunk answer "unknown" (alpha2) goes on to logic and pays for both
    esc = pooled["router+escalate"]
    assert esc["routes"]["logic"] == pytest.approx(4 / 7) and esc["em"] == pooled["router"]["em"]
    assert esc["llm_calls"] == pytest.approx(pooled["router"]["llm_calls"] + 4 / 7)
    # the cascade also escalates beta2 ("wrong", unsupported): the 3 checks + a logic answer (4 calls)
    # on top of the chunk one for alpha2 and beta2
    chk = pooled["router+check"]
    assert chk["routes"]["logic"] == pytest.approx(5 / 7) and chk["em"] == pooled["router"]["em"]
    assert chk["llm_calls"] == pytest.approx(pooled["router"]["llm_calls"] + (3 + 4 + 4) / 7)
    # the LLM router picks the router's routes here, and its own call is added to their cost
    assert pooled["llm_router"]["routes"] == pooled["router"]["routes"]
    assert pooled["llm_router"]["llm_calls"] == pytest.approx(pooled["router"]["llm_calls"] + 1)
    cq = report["cost_quality"]["pooled"]
    assert cq["weak"] == pytest.approx(3 / 7) and cq["strong"] == pytest.approx(4 / 7)
    # P(logic) order .9 .8 .7 .3 .2 .15 .1 gains +1 0 +1 0 0 -1 0 over chunk: quality 3,4,4,5,5,5,4,4 /7
    assert cq["router"]["apgr"] == pytest.approx((30.5 / 49 - 3 / 7) * 7)  # (AUC - weak) / gap
    assert cq["router"]["cpt50"] == pytest.approx(1 / 14)  # half the gap: halfway to the first point
    cm = report["confusion"]["pooled"]["router_vs_oracle"]
    assert sum(map(sum, cm["matrix"])) == 7
    assert report["llm_router"]["decisions"] == 7


def test_report_files_exist_and_parse(tmp_path):
    import matplotlib.image as mpimg

    files = write_data(tmp_path)
    run(tmp_path, files, plots=True)
    out = tmp_path / "out"
    data = json.loads((out / "report.json").read_text())
    assert data["systems"]["pooled"]["oracle"]["n"] == 7 and len(data["per_question"]) == 7
    md = (out / "report.md").read_text()
    assert "## pooled (7 questions)" in md and "| router@0.50 |" in md and "Cost-quality" in md
    assert "router vs oracle" in md
    for png in ("cost_quality.png", "route_distribution.png"):
        img = mpimg.imread(out / png)
        assert img.shape[0] > 100 and img.shape[1] > 100


def test_resume_skips_finished_rows(tmp_path):
    files = write_data(tmp_path)
    first, _ = run(tmp_path, files)
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 21 + 7 + 3  # answers, LLM router decisions, self-checks
    # an interrupted write leaves a torn line: ignored on resume
    with open(tmp_path / "out" / "results.jsonl", "a") as f:
        f.write('{"kind": "answer", "system": "chu')
    ScriptRAG.runs = []
    second, llm = run(tmp_path, files)
    assert ScriptRAG.runs == [] and llm.calls == [] and second["answered_this_run"] == 0

    def scores(rep):  # timings differ between runs; results must not
        return {
            sc: {
                s: {m: v[m] for m in ("em", "f1", "string_acc", "llm_calls", "prompt_tokens", "routes")}
                for s, v in t.items()
            }
            for sc, t in rep["systems"].items()
        }

    assert scores(second) == scores(first)
    # a row lost from the file is the only thing done again
    kept = [ln for ln in lines if not ('"system": "logic"' in ln and '"key": "beta:beta0"' in ln)]
    (tmp_path / "out" / "results.jsonl").write_text("\n".join(kept) + "\n")
    third, llm = run(tmp_path, files)
    assert len(ScriptRAG.runs) == 1 and ScriptRAG.runs[0][0] == "logic" and third["answered_this_run"] == 1


def test_rows_of_another_setup_are_not_reused(tmp_path):
    files = write_data(tmp_path)
    run(tmp_path, files)
    ScriptRAG.runs = []
    run(tmp_path, files, k=5)  # other top-k: other answers
    assert len(ScriptRAG.runs) == 21


def test_logic_rows_are_answered_again_when_the_logic_route_settings_change(tmp_path):

    class LastHopChunksRAG(ScriptRAG):
        def logic_config(self, budget=None, spent=None):
            return LogicExperiment(k=self.k, final_chunks=3)

    files = write_data(tmp_path)
    llm = scripted()
    run(tmp_path, files, llm=llm)
    ScriptRAG.runs = []
    run_benchmark(
        make_cfg(tmp_path, files),
        llm=llm,
        router=FakeRouter(),
        make_kb=lambda path, passages, show_progress=True: WordOverlapKB.titled({p.title: p.text for p in passages}),
        rag_factory=lambda kb: LastHopChunksRAG(kb=kb, llm=llm, router=FakeRouter()),
        echo=lambda s: None,
    )
    assert sorted({r for r, _ in ScriptRAG.runs}) == ["logic"] and len(ScriptRAG.runs) == 7


def test_fixed_routes_subset_and_errors(tmp_path):
    from engine.floor.base.errors import LLMError

    files = write_data(tmp_path)

    class Failing(ScriptRAG):
        def _run_route(self, q, route, budget=None):
            if "Beta known" in text_of(q):
                raise LLMError("endpoint down")
            return super()._run_route(q, route, budget)

    llm = scripted()
    router = FakeRouter()
    report = run_benchmark(
        make_cfg(tmp_path, files, routes=("chunk", "logic")),
        llm=llm,
        router=router,
        make_kb=lambda path, passages, show_progress=True: WordOverlapKB.titled(PASSAGES),
        rag_factory=lambda kb: Failing(kb=kb, llm=llm, router=router),
        echo=lambda s: None,
    )
    pooled = report["systems"]["pooled"]
    assert "summary" not in pooled and pooled["chunk"]["errors"] == 1
    assert set(pooled["router"]["routes"]) == {"chunk", "logic"}  # decisions restricted to the routes run
    assert any("routes not run: summary" in n for n in report["notes"])
    store = JsonlStore(tmp_path / "out" / RESULTS_FILE)
    errs = [r for r in store.rows if r.get("error")]
    assert len(errs) == 2 and all("endpoint down" in r["error"] for r in errs)


def test_labels_stand_in_for_fixed_route_runs(tmp_path):
    files = write_data(tmp_path)
    labels = tmp_path / "labels.jsonl"
    with open(labels, "w") as f:
        f.write(
            json.dumps(
                {
                    "id": "alpha0",
                    "dataset": "alpha",
                    "scorer": "answer",
                    "llm": "fake:scripted",
                    "k": 3,
                    "scores": {"chunk": 1.0, "logic": 1.0},
                    "answers_pred": {"chunk": "Ann", "logic": "Ann"},
                    "costs": {
                        "chunk": {"llm_calls": 1, "prompt_tokens": 400, "completion_tokens": 2, "seconds": 3.0},
                        "logic": {"llm_calls": 3, "prompt_tokens": 1500, "completion_tokens": 30, "seconds": 20.0},
                    },
                }
            )
            + "\n"
        )
    report, _ = run(tmp_path, files, labels=[str(labels)])
    assert len(ScriptRAG.runs) == 21 - 2
    assert any("2 route answers reused" in n for n in report["notes"])


def test_overlap_with_the_router_training_labels_is_reported(tmp_path):
    files = write_data(tmp_path)
    labels = tmp_path / "train.jsonl"
    labels.write_text(
        json.dumps({"id": "alpha1", "dataset": "alpha"}) + "\n" + json.dumps({"id": "zzz", "dataset": "alpha"}) + "\n"
    )
    router = FakeRouter()
    router.card = {"training": {"label_files": [{"path": str(labels)}]}}
    llm = scripted()
    report = run_benchmark(
        make_cfg(tmp_path, files),
        llm=llm,
        router=router,
        make_kb=lambda path, passages, show_progress=True: WordOverlapKB.titled(PASSAGES),
        rag_factory=lambda kb: ScriptRAG(kb=kb, llm=llm, router=router),
        echo=lambda s: None,
    )
    assert any(n.startswith("1 of 7 benchmark questions are in the router's training") for n in report["notes"])


def test_kb_questions_adds_the_passages_of_later_questions_as_distractors(tmp_path):
    files = write_data(tmp_path)
    seen: dict[str, list[str]] = {}

    def make_kb(path, passages, show_progress=True):
        seen[Path(path).name] = sorted(p.title for p in passages)
        return WordOverlapKB.titled({p.title: p.text for p in passages})

    llm = scripted()
    router = FakeRouter()
    cfg = make_cfg(tmp_path, files, kb_questions=3)
    cfg.n = 1
    report = run_benchmark(
        cfg,
        llm=llm,
        router=router,
        make_kb=make_kb,
        rag_factory=lambda kb: ScriptRAG(kb=kb, llm=llm, router=router),
        echo=lambda s: None,
    )
    assert seen == {"alpha": ["alpha 0", "alpha 1", "alpha 2"], "beta": ["beta 0", "beta 1", "beta 2"]}
    assert report["systems"]["pooled"]["chunk"]["n"] == 2  # still only the first question of each file
    assert report["datasets"]["alpha"]["passages"] == 1 and report["datasets"]["alpha"]["kb_passages"] == 3


def test_logreg_system_is_scored_beside_the_router(tmp_path, monkeypatch):
    import training.fitting.eval_router as ev

    monkeypatch.setattr(
        ev, "logreg_router_probs", lambda router, qs: [{"chunk": 0.1, "summary": 0.1, "logic": 0.8} for _ in qs]
    )  # always logic
    files = write_data(tmp_path)
    report, _ = run(tmp_path, files)
    pooled = report["systems"]["pooled"]
    assert "logreg" in report["systems_order"] and pooled["logreg"]["routes"]["logic"] == pytest.approx(1.0)
    assert pooled["logreg"]["em"] == pooled["logic"]["em"]


def test_answers_found_by_another_retrieval_are_not_reused(tmp_path):
    from types import SimpleNamespace

    from training.bench.bench_data import open_kbs

    def kb_of(mode):
        return lambda path, passages, show_progress: SimpleNamespace(retrieval=mode)

    passages = {"nq": {"p1": "Paris is the capital of France."}}
    _, dense = open_kbs(passages, kb_of("dense"), tmp_path, False, lambda _: None)
    _, hybrid = open_kbs(passages, kb_of("hybrid"), tmp_path, False, lambda _: None)
    assert hybrid["nq"] == dense["nq"] + "+hybrid"  # dense answers stored before keep their key
