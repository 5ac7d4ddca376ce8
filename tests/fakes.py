"""Fakes at the real interfaces, for tests that need no model: an LLM with scripted replies, a
hashed bag-of-words embedder, a word-overlap knowledge base, keyword routers, and a stand-in for
the logic route with a RoutedRAG built on them."""

from __future__ import annotations

import json
import re
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

import numpy as np

from engine.core.pipeline import RoutedRAG
from engine.floor.base.errors import KBEmptyError
from engine.floor.base.trace import Trace
from engine.floor.base.types import Answer, Completion, RetrievedChunk, Usage
from engine.floor.llm.base import call_llm
from engine.floor.llm.structured import chat_structured
from engine.floor.question.parse import text_of
from hierarchy.documents import Chunk
from tests.samples import PASSAGES, make_docs

Reply = str | dict | list | Exception | Callable[[list[dict]], "str | dict | list"]


class Cut(str):
    """A scripted reply the backend cut off at max_tokens (finish_reason "length")."""


class ScriptedLLM:
    """Returns scripted replies in order, or by the first rule whose substring occurs in the
    last user message. dict/list replies are JSON-encoded; an Exception reply is raised; a Cut
    reply comes back as cut off at the token limit.
    Schema calls go through engine.floor.llm.structured.chat_structured, as every real backend does.

    Each call sleeps `delay` seconds yet reports 0 seconds, so a test can tell a wall-clock
    measurement from a sum of the calls' own seconds. `completions` keeps what each call
    reported, for comparing against the usage the code booked."""

    name = "fake:scripted"

    def __init__(
        self, replies: list[Reply] | None = None, rules: dict[str, Reply] | None = None, *, delay: float = 0.0
    ):
        self.replies = list(replies or [])
        self.rules = dict(rules or {})
        self.delay = delay
        self.calls: list[dict] = []
        self.completions: list[Completion] = []

    @property
    def reported_tokens(self) -> tuple[int, int]:
        """(prompt, completion) tokens summed over every call made."""
        return sum(c.prompt_tokens for c in self.completions), sum(c.completion_tokens for c in self.completions)

    def _next(self, messages: list[dict]) -> str:
        last = messages[-1]["content"]
        reply: Reply | None = None
        for needle, r in self.rules.items():
            if needle in last:
                reply = r
                break
        if reply is None:
            if not self.replies:
                raise AssertionError(f"ScriptedLLM ran out of replies at: {last[:200]!r}")
            reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        if callable(reply):
            reply = reply(messages)
        return reply if isinstance(reply, str) else json.dumps(reply)

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0) -> Completion:
        def send(msgs: list[dict]) -> Completion:
            self.calls.append({"messages": msgs, "schema": schema, "max_tokens": max_tokens})
            text = self._next(msgs)
            cut = isinstance(text, Cut)
            if self.delay:
                time.sleep(self.delay)
            c = Completion(
                text=text,
                prompt_tokens=sum(len(m["content"].split()) for m in msgs),
                completion_tokens=len(text.split()),
                seconds=0.0,
                model=self.name,
                finish_reason="length" if cut else "stop",
            )
            self.completions.append(replace(c))  # a copy: chat_structured sums attempts into the last one
            return c

        # Structured output goes through the backends' own code path: same retry prompt, same token sums.
        return send(messages) if schema is None else chat_structured(send, messages, schema)


_PUNCTUATION = str.maketrans(dict.fromkeys(".,:?", " "))


class HashedBowEmbedder:
    """The Embedder interface without a model: each word (lowercased, split at spaces and
    .,:?) adds 1 to dimension crc32(word) % dim, then rows are L2-normalized. Records every
    batch it encodes."""

    spec = None  # no model folder: nothing to reopen it from

    def __init__(self, id: str = "fake-bow", dim: int = 64):
        self.id, self.dim = id, dim
        self.calls: list[list[str]] = []

    @property
    def encoded(self) -> list[str]:
        """Every text encoded so far, in order."""
        return [t for c in self.calls for t in c]

    def encode(self, texts, show_progress=False):
        texts = [texts] if isinstance(texts, str) else list(texts)
        self.calls.append(texts)
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().translate(_PUNCTUATION).split():
                out[i, zlib.crc32(w.encode()) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def segment_file(kb_path, kind: str):
    """The newest segment's file of this kind ("chunks", "vectors" or "deleted") in a KB folder."""
    from pathlib import Path

    return sorted(Path(kb_path).glob(f"seg-*.{kind}.*"))[-1]


def layered_kb(path, embedder, docs_per_topic: int = 2, store=None):
    """A KnowledgeBase of make_docs(docs_per_topic) (one chunk a document) with extractive summary
    layers of 4-chunk clusters: what the KB lifecycle tests (check, repair, read-only,
    transactions, concurrency) start from."""
    from hierarchy.kb import KnowledgeBase
    from hierarchy.layers.update import build_layers

    kb = KnowledgeBase.create(path, embedder, chunk_words=200, overlap_words=0, store=store)
    kb.add(make_docs(docs_per_topic), show_progress=False)
    build_layers(kb, show_progress=False, cluster_size=4)
    return kb


class WordOverlapKB:
    """The KnowledgeBase interface over a few chunks in memory, without vectors: a chunk scores
    the number of words its title + text shares with the query, ties keep the chunks' order,
    and a chunk id in `exclude` never comes back. Records every search."""

    embedder = None  # no vectors: a route that embeds the question cannot run on it
    path = Path("(in memory)")  # no folder: no summary layers, so the summary route answers on chunks

    def __init__(self, chunks: Iterable[Chunk]):
        self.chunks = {c.id: c for c in chunks}
        self.chunk_ids = list(self.chunks)
        self.searches: list[dict] = []  # {"query", "k", "exclude"} of each call

    def require_chunks(self) -> None:
        if not self.chunk_ids:
            raise KBEmptyError("the knowledge base (in memory) is empty (no chunks)")

    @classmethod
    def titled(cls, texts: dict[str, str]) -> WordOverlapKB:
        """Title -> text: one chunk c<i> of document d<i> each."""
        return cls(Chunk(f"c{i}", f"d{i}", title, text, 0) for i, (title, text) in enumerate(texts.items()))

    def __len__(self) -> int:
        return len(self.chunks)

    @property
    def doc_ids(self) -> list[str]:
        return list(dict.fromkeys(c.doc_id for c in self.chunks.values()))

    def chunks_of(self, doc_id: str) -> list[Chunk]:
        return [c for c in self.chunks.values() if c.doc_id == doc_id]

    def search(self, query, k=3, exclude=()):
        exclude = list(exclude)
        self.searches.append({"query": query, "k": k, "exclude": exclude})
        words = _words(str(query))
        scored = [(len(words & _words(c.title + " " + c.text)), c) for c in self.chunks.values() if c.id not in exclude]
        scored.sort(key=lambda t: -t[0])
        return [RetrievedChunk(c.id, c.doc_id, c.title, c.text, float(s)) for s, c in scored[:k]]

    def search_batch(self, queries, k=3):
        return [self.search(q, k=k) for q in queries]

    def lexical_index(self):
        """The real BM25 index over these chunks (what engine.core.absence weighs evidence with)."""
        from hierarchy.lexical import LexicalIndex, Postings, lexical_text

        chunks = [self.chunks[c] for c in self.chunk_ids]
        postings = Postings.of_texts(self.chunk_ids, [lexical_text(c) for c in chunks])
        return LexicalIndex([postings], self.chunk_ids)


class FakeRouter:
    """P(logic) high for questions with 'director' or 'first', P(summary) for 'overview'.
    A question may also carry an explicit P(logic) as '[p=0.7]'. Counts batches."""

    routes = ("chunk", "summary", "logic")

    def __init__(self):
        self.batches: list[list[str]] = []
        self.card: dict = {}  # a real Router's card lists its label files

    def probs(self, questions):
        self.batches.append(list(questions))
        out = []
        for q in questions:
            if "[p=" in q:
                p = float(q.split("[p=")[1].split("]")[0])
                out.append({"chunk": (1 - p) * 0.7, "summary": (1 - p) * 0.3, "logic": p})
            elif "director" in q or "first" in q:
                out.append({"chunk": 0.2, "summary": 0.1, "logic": 0.7})
            elif "overview" in q:
                out.append({"chunk": 0.2, "summary": 0.6, "logic": 0.2})
            else:
                out.append({"chunk": 0.7, "summary": 0.2, "logic": 0.1})
        return out

    def ood(self, questions):
        """No guard, as a real Router whose checkpoint has no reference set."""
        return [None] * len(questions)

    def probs_and_ood(self, questions):
        return self.probs(questions), self.ood(questions)


class FakeGuardedRouter(FakeRouter):
    """FakeRouter with the out-of-distribution guard of a real Router: a question holding
    '[far]' is far (similarity 0.1, threshold 0.5), any other near (0.9). Records each `ood` batch."""

    def __init__(self):
        super().__init__()
        self.ood_batches: list[list[str]] = []

    def ood(self, questions):
        self.ood_batches.append(list(questions))
        return [{"similarity": 0.1 if "[far]" in q else 0.9, "threshold": 0.5, "far": "[far]" in q} for q in questions]


def fake_logic(calls_log: list | None = None, reply: str = "30 July 1970"):
    """A stand-in for answer_logic: two LLM calls booked like the real route."""

    def answer_logic(question, kb, llm, config=None, style="short", budget=None):
        question = text_of(question)  # the pipeline hands the route a Question (engine.floor.question.parse)
        if calls_log is not None:
            calls_log.append({"question": question, "config": config, "budget": budget})
        usage, trace = Usage(), Trace(route="logic", dag={"nodes": []})
        read = [c.chunk_id for c in kb.search(question, k=3)] if hasattr(kb, "search") else []
        trace.details["steps"] = [{"nodes": ["q1"], "query": question, "chunk_ids": read}]  # what the route read
        call_llm(
            llm, [{"role": "user", "content": f"Decompose: {question}"}], purpose="decompose", usage=usage, trace=trace
        )
        c = call_llm(
            llm, [{"role": "user", "content": f"Final answer: {question}"}], purpose="answer", usage=usage, trace=trace
        )
        return Answer(text=c.text or reply, route="logic", usage=usage, trace=trace)

    return answer_logic


def make_rag(llm, **kw) -> RoutedRAG:
    """RoutedRAG over PASSAGES in a word-overlap KB, routed by a FakeRouter unless `router` is given."""
    return RoutedRAG(kb=WordOverlapKB.titled(PASSAGES), llm=llm, router=kw.pop("router", FakeRouter()), **kw)


class ArangeEmbedder:
    """A 4-dimensional embedder whose vectors number the texts in order (0..3, 4..7, ...): a
    peer runner's embedding request can be checked for shape and order."""

    dim, spec = 4, "fake-emb"

    def encode(self, texts):
        return np.arange(len(texts) * 4, dtype=np.float64).reshape(len(texts), 4)


def this_python_as_venv(tmp_path):
    """A venv folder under tmp_path whose bin/python is this Python: a peer adapter started on it
    runs its runner script here, with no peer package installed."""
    import sys

    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(sys.executable)
    return tmp_path / "venv"
