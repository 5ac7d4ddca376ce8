"""Entries into our modules while RoutedRAG answers one question: an entry is a call into one of
logicroute's modules (engine, hierarchy, router, training) from another module, seen with
sys.setprofile. Scripted LLM, the tests' word-overlap KB and router (tests.fakes); the RAG is
built and the question answered once before the measured answer, so imports are not counted.

    PYTHONPATH=. python docs/results/design/module_entries.py

Cases: a chunk answer kept; a chunk answer that says it has none climbing to logic
(keep_absence=false); the same weighed by engine.core.absence (keep_absence=true: a passage read holds
every key term, so "not in the documents" is kept); a lookup whose terms the KB holds apart, whose
chunk answer says it has none and is weighed, then answered on the next passage by rank."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from engine.floor.prompts.answer import NOT_IN_DOCUMENTS
from tests.engine.test_absence import ferry_rag
from tests.fakes import ScriptedLLM, make_rag

OURS = ("engine", "hierarchy", "router", "training", "logicroute")
QUESTION = "Where was Marie Curie born?"


def entries(answer) -> Counter:
    """{module: entries} while `answer()` runs."""
    counted: Counter = Counter()

    def hook(frame, event, arg):
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
        if module.split(".")[0] in OURS and module != caller:
            counted[module] += 1

    sys.setprofile(hook)
    try:
        answer()
    finally:
        sys.setprofile(None)
    return counted


def measured(replies: list[str], question: str = QUESTION, make=make_rag, **options) -> tuple[Counter, str]:
    make(ScriptedLLM(replies=list(replies)), **options).answer(question)  # imports, caches
    rag = make(ScriptedLLM(replies=list(replies)), **options)
    out = {}
    counted = entries(lambda: out.setdefault("answer", rag.answer(question)))
    return counted, out["answer"].route


# the logic route's plan call gets no JSON twice (a one-node plan), then its final answer
CLIMB = [NOT_IN_DOCUMENTS, "no plan", "no plan", "Warsaw"]
# a lookup whose terms the ferry KB holds apart: the chunk route reads the next passage once
FURTHER = [NOT_IN_DOCUMENTS, "The harbour office sells them [1]."]
CASES = {
    "chunk answer kept": (["Warsaw"], {}),
    "chunk says none, climbs to logic": (CLIMB, {"keep_absence": False}),
    "chunk says none, weighed and kept": (CLIMB, {"keep_absence": True}),
    "chunk says none, weighed, looks further": (
        FURTHER,
        {"question": "Which office sells tickets for the Lowen Ferry?", "make": ferry_rag, "k": 1},
    ),
}

if __name__ == "__main__":
    for name, (replies, options) in CASES.items():
        counted, route = measured(replies, **options)
        print(
            f"{name} (answered by {route}): {len(counted)} modules entered; engine.core.escalation "
            f"{counted['engine.core.escalation']}, engine.core.absence {counted['engine.core.absence']}, "
            f"engine.core.pipeline {counted['engine.core.pipeline']}"
        )
        print("   ", ", ".join(f"{m} {n}" for m, n in sorted(counted.items())))
