"""bench reader: reader-style replies scored for containing a gold answer, citing, and saying
"not in the documents", wrongly so when a gold answer was among the passages shown."""

from __future__ import annotations

import json

from engine.floor.prompts.answer import NOT_IN_DOCUMENTS
from tests.fakes import ScriptedLLM, WordOverlapKB
from tests.samples import PASSAGES
from training.bench.bench_reader import run_bench_reader

ITEMS = [
    ("q1", "Where was Marie Curie born?", ["Warsaw"]),
    ("q2", "When was Christopher Nolan born?", ["30 July 1970"]),
    ("q3", "Who painted the Night Watch?", ["Rembrandt"]),
]


def test_the_report_counts_gold_citations_and_wrong_refusals(tmp_path):
    llm = ScriptedLLM(["Marie Curie was born in Warsaw [1].", NOT_IN_DOCUMENTS, NOT_IN_DOCUMENTS])
    report = run_bench_reader(ITEMS, WordOverlapKB.titled(PASSAGES), llm, tmp_path, k=1, progress=False)
    assert report["n"] == 3
    assert report["contains_gold"] == round(1 / 3, 3) and report["cites"] == round(1 / 3, 3)
    assert report["says_not_found"] == round(2 / 3, 3)
    assert report["wrongly_not_found"] == round(1 / 3, 3)  # Nolan's birth date was in its passage
    rows = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["wrongly_not_found"] for r in rows] == [False, True, False]
    assert "[2]" in llm.calls[0]["messages"][0]["content"]  # the reader system prompt was sent


def test_a_rerun_answers_only_what_is_missing(tmp_path):
    kb = WordOverlapKB.titled(PASSAGES)
    run_bench_reader(ITEMS[:2], kb, ScriptedLLM(["Warsaw [1].", "30 July 1970 [1]."]), tmp_path, progress=False)
    llm = ScriptedLLM([NOT_IN_DOCUMENTS])
    report = run_bench_reader(ITEMS, kb, llm, tmp_path, progress=False)
    assert len(llm.calls) == 1 and report["n"] == 3 and report["contains_gold"] == round(2 / 3, 3)


def test_a_routed_system_answers_as_ask_does_in_its_style(tmp_path, monkeypatch):
    """`routed` is the router's choice with the style's defaults (RoutedRAG.answer), one RAG per style."""
    from engine.floor.base.types import Answer, Usage

    made = []

    class RecordingRAG:
        def __init__(self, kb, llm, k, style):
            made.append(style)
            self.style = style

        def answer(self, question):
            return Answer(text=f"Warsaw ({self.style})", route="chunk", usage=Usage())

    monkeypatch.setattr("engine.core.pipeline.RoutedRAG", RecordingRAG)
    systems = ["routed", "short:routed"]
    report = run_bench_reader(
        ITEMS[:2], WordOverlapKB.titled(PASSAGES), ScriptedLLM([]), tmp_path, progress=False, systems=systems
    )
    assert made == ["reader", "short"]
    assert report["systems"]["routed"]["contains_gold"] == 0.5  # Warsaw is q1's answer, not q2's
    rows = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert {r["reply"] for r in rows if r["system"] == "short:routed"} == {"Warsaw (short)"}
