"""The logic route benchmark script (training.bench.bench_logic): runs, resumes, reports, and its
deep-hops sample. The LLM is a fake that answers every logic-route schema."""

from __future__ import annotations

import json

import pytest

from tests.engine.logic_scripts import SUFFICIENT, plan


class _AutoLLM:
    """Answers any logic-route schema with a fixed valid object (pipeline test, no model)."""

    name = "fake:auto"

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0):
        import json

        from engine.floor.base.types import Completion

        props = (schema or {}).get("properties", {})
        if "subquestions" in props:
            data = plan(("q1", "Who is it?", []), ("q2", "Where is #q1?", ["q1"]))
        elif "answers" in props:
            data = {"answers": {i: "ans" for i in props["answers"]["required"]}}
            if "memory" in props:
                data["memory"] = "mem"
        elif "sufficient" in props:
            data = SUFFICIENT
        else:
            data = None
        text = json.dumps(data) if data is not None else "x"
        return Completion(text, 10, 2, 0.0, data=data, model=self.name)


@pytest.mark.embedder
@pytest.mark.shared_data
def test_bench_logic_runs_resumes_and_reports(tmp_path, shared_data):
    from training.bench.bench_logic import main

    kw = dict(
        systems=["chunk", "logic", "logic-no-merge"],
        datasets=["2wiki"],
        data_dir=shared_data,
        llm=_AutoLLM(),
        show_progress=False,
        kb_n=1,
    )
    report = main(1, tmp_path, **kw)
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert len(lines) == 3
    main(1, tmp_path, **kw)  # resumed: nothing is run twice
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 3
    o = report["datasets"]["2wiki"]["overall"]
    assert o["chunk"]["llm_calls"] == 1 and o["logic"]["retrieval_rounds"] == 2
    # where the tokens go: every call of a row is counted under its kind (the fake sends 10 tokens)
    by_call = report["datasets"]["2wiki"]["by_call"]
    assert by_call["chunk"] == {"n": 1, "answer": {"calls": 1.0, "prompt_tokens": 10.0}}
    logic = by_call["logic"]
    assert logic["decompose"]["calls"] == 1.0 and logic["step"] == {"calls": 2.0, "prompt_tokens": 20.0}
    assert sum(v["calls"] for k, v in logic.items() if k != "n") == o["logic"]["llm_calls"]
    md = (tmp_path / "report.md").read_text()
    assert (
        "Prompt tokens sent per question, by call" in md
        and "| logic | 1 | 10 (1.0) | 10 (1.0) | 10 (1.0) | 20 (2.0) |" in md  # answer, decompose, reflect, step
    )
    # rows made under other route settings are not reused: a changed default is answered again
    rows = [json.loads(x) for x in lines]
    for r in rows:
        r["cfg"] = "older" if r["system"] == "logic" else r["cfg"]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    main(1, tmp_path, **kw)
    redone = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()[3:]]
    assert [r["system"] for r in redone] == ["logic"]
    assert (tmp_path / "report.md").read_text().startswith("# Logic route benchmark")


def test_calls_by_kind_counts_each_attempt_of_a_retried_structured_reply():
    from training.bench.bench_logic import calls_by_kind

    calls = [
        {"purpose": "decompose", "prompt_tokens": 300, "completion_tokens": 40, "attempts": 2},
        {"purpose": "step q1,q2", "prompt_tokens": 500, "completion_tokens": 90},
        {"purpose": "step q3", "prompt_tokens": 400, "completion_tokens": 50, "error": "bad JSON"},
        {"purpose": "reflect 1", "prompt_tokens": 200, "completion_tokens": 5},
    ]
    assert calls_by_kind(calls) == {"decompose": [2, 300, 40], "step": [2, 900, 140], "reflect": [1, 200, 5]}


@pytest.mark.shared_data
def test_bench_logic_deep_hops_sample_takes_3_and_4_hop_questions_with_their_passages(shared_data):
    from training.bench.bench_logic import DATASETS, _deep_hops

    kb, asked = _deep_hops(shared_data / DATASETS["musique-34hop"], 6)
    assert sorted(q.type for q in asked.questions) == ["3hop"] * 3 + ["4hop"] * 3
    assert {q.type for q in kb.questions} == {"3hop", "4hop"} and len(kb.questions) == 55
    have = {p.id for p in kb.passages}
    assert all(set(q.supporting) <= have for q in asked.questions)
