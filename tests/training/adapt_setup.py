"""What the adapt specs share: a KB of topic documents on a hashed embedder, a tiny generalist
trained on that embedder that routes every topic alike, a scripted question writer, and
routes that answer through a scripted LLM (chunk one call, logic two) so calls can be counted."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from engine.floor.base.trace import Trace
from engine.floor.base.types import Answer, Usage
from engine.floor.llm.base import call_llm
from hierarchy.datasets import Question
from tests.fakes import HashedBowEmbedder, ScriptedLLM
from tests.samples import TOPICS, make_docs
from training.adapt.adapt_questions import WritingReport, WrittenQuestion

ROUTES = ("chunk", "summary", "logic")
DIM = 64


def embedder() -> HashedBowEmbedder:
    return HashedBowEmbedder("adapt-bow", DIM)


def tiny_kb(path: Path, emb=None, docs_per_topic: int = 2):
    """A KB of make_docs' topic documents (one chunk each), no summary layers."""
    from hierarchy.kb import KnowledgeBase

    kb = KnowledgeBase.create(path, emb or embedder(), chunk_words=200, overlap_words=0)
    if docs_per_topic:
        kb.add(make_docs(docs_per_topic), show_progress=False)
    return kb


def small_generalist(path: Path, emb=None) -> Path:
    """A small generalist over ROUTES, trained on questions of the written questions' form over
    every topic (chunk and logic both right on each), with a guard over those questions: it
    routes the volcano and the bank questions alike."""
    from training.fitting.fit import TrainConfig
    from training.fitting.train import train_generalist
    from training.labels.label_scorers import LabelConfig
    from training.labels.labels import make_row

    cfg = LabelConfig(scorer="answer", routes=ROUTES, llm="fake")
    costs = {"chunk": {"tokens": 500, "llm_calls": 1}, "summary": {"tokens": 600, "llm_calls": 1}}
    costs["logic"] = {"tokens": 2000, "llm_calls": 4}
    rows = []
    for i, topic in enumerate(list(TOPICS) * 3):  # the questions' form over every topic: no input unseen
        q = Question(f"g{i}", f"Which {topic} {TOPICS[topic]} holds item {100 + i}?", ["x"], None, [], "general")
        rows.append(make_row(q, {"chunk": 1.0, "summary": 0.5, "logic": 1.0}, costs, cfg, index=i))
    labels = path.with_suffix(".jsonl")
    labels.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tc = TrainConfig(hidden=(16, 8), max_epochs=20, batch_size=8, features=())
    train_generalist([labels], path, tc, embedder=emb or embedder())
    return path


def question(i: int, topic: str, kind: str = "single") -> WrittenQuestion:
    """A written question about one of make_docs' topics, in the topic's own words; its answer
    is the topic's name and the item's number."""
    return WrittenQuestion(
        id=f"{kind}-{topic}-{i}",
        kind=kind,
        question=f"Which {topic} {TOPICS[topic]} holds item {i}?",
        answer=f"{topic} answer {i}",
        chunk_ids=(f"{topic}-{i}#0",),
        titles=(f"{topic.capitalize()} {i}",),
    )


class ScriptedWriter:
    """Stands in for training.adapt.adapt_questions.write_questions: returns `questions` (at most n),
    writes them to `out` and reports rejects; counts its calls."""

    def __init__(self, questions: list[WrittenQuestion], rejected: dict | None = None):
        self.questions, self.rejected, self.calls = questions, Counter(rejected or {}), 0

    def __call__(self, kb, llm, *, n, out, kinds=None, seed=0, minutes=None, progress=True):
        self.calls += 1
        kept = self.questions[:n]
        Path(out).write_text("".join(json.dumps({"id": q.id, "question": q.question}) + "\n" for q in kept))
        report = WritingReport(
            written=Counter(q.kind for q in kept) + Counter({"single": sum(self.rejected.values())}),
            kept=Counter(q.kind for q in kept),
            rejected=self.rejected,
            llm_calls=len(kept) + sum(self.rejected.values()),
        )
        return kept, report


def route_llm(right: dict[str, set[str]]) -> ScriptedLLM:
    """An LLM whose reply to '<route>: <question>' is the question's answer when the route is
    right for the question's topic (right[route] holds topics), else 'unknown'."""

    def reply(messages):
        route, q = messages[-1]["content"].split(": ", 1)
        topic, item = q.split()[1], q.rsplit(" ", 1)[1].rstrip("?")
        return f"{topic} answer {item}" if topic in right.get(route, set()) else "unknown"

    return ScriptedLLM(rules={": ": reply})


def runner(route, q, kb, llm, k=3, style="short", **_):
    """A route as the labels see it: chunk and summary one LLM call, logic two."""
    usage, trace = Usage(), Trace()
    for _ in range(2 if route == "logic" else 1):
        c = call_llm(llm, [{"role": "user", "content": f"{route}: {q}"}], purpose="answer", usage=usage, trace=trace)
    return Answer(text=c.text, route=route, usage=usage, trace=trace)
