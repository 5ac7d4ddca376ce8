"""HippoRAG 2 (hipporag) behind the peer protocol (protocol.py). Run by the harness with the
HippoRAG venv's Python: `python hipporag_runner.py`, commands on stdin.

HippoRAG picks its LLM (an OpenAI client) and its embedding model (NV-Embed-v2, GritLM,
Contriever: GPU models) by name; here both factories in hipporag.HippoRAG are replaced by
classes that call the harness, so HippoRAG runs on the harness's LLM and MiniLM with no
download. Its own QA prompt already asks for a short answer after "Answer:" (the one HippoRAG
uses on MuSiQue and 2Wiki), so the harness's answer rule is not added. Its OpenIE results and
embedding stores live in the working folder: a second `index` call extracts only new passages.

HippoRAG's OpenIE makes its calls from a pool of threads, one passage each: while it indexes,
the calls that arrive together go to the harness as one `llm_many` request (Gatherer), which the
local model decodes in one batch (engine.llm.local_batched; docs/results/llm/batched_decode.md
measures it). The setting llm_batch=1 sends each call alone. Answers make one call at a time and
send it at once."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
from contextlib import contextmanager

from protocol import Channel, RemoteError, serve

DEFAULTS = {
    "retrieval_top_k": 200,
    "linking_top_k": 5,
    "qa_top_k": 5,
    "max_new_tokens": 2048,
    "dataset": "musique",  # which of HippoRAG's QA prompt templates (musique, 2wikimultihopqa, hotpotqa)
    "embedding_batch_size": 16,
    "synonymy_edge_sim_threshold": 0.8,
    "damping": 0.5,
    "passage_node_weight": 0.05,
    # the harness's, not HippoRAG's: up to this many LLM calls made together while indexing are
    # sent as one request, decoded in one batch (Gatherer); 1 sends each call alone
    "llm_batch": 8,
}


class HarnessGone(BaseException):
    """The harness closed the channel (it was stopped) while HippoRAG indexed. HippoRAG's OpenIE
    catches every Exception around an LLM call and saves the passage as extracted, with no triple,
    and a later index skips it: its triples and its cost would be missing with no error anywhere.
    Raised past those handlers, this ends the batch before HippoRAG saves anything of it."""


def harness_gone(e: Exception) -> bool:
    """A pipe the harness no longer reads, or the end of its replies (protocol.Channel.request)."""
    return isinstance(e, OSError) or str(e) == "the harness closed the channel"


class _Call:
    def __init__(self, messages: list[dict], max_tokens: int) -> None:
        self.messages, self.max_tokens = messages, max_tokens
        self.text: str | None = None
        self.error: Exception | None = None
        self.done = False


class Gatherer:
    """Free-text LLM calls from several threads, sent together while `gathering`: a caller
    finding no leader leads; it waits until `size` calls are pending or none came for `quiet`
    seconds, sends them as one llm_many request (one alone as a plain llm request), hands each
    caller its text or error, and steps down; the next pending caller then leads. Every pending
    call is either in the batch being sent or will be led by its own caller, so no call waits for
    one that never comes. Outside `gathering` each call goes straight to the channel."""

    def __init__(self, ch: Channel, size: int = 8, quiet: float = 0.3) -> None:
        # up to 8: the harness decodes 4 at a time and starts a waiting call as soon as one ends
        self.ch, self.size, self.quiet = ch, size, quiet
        self.on = False
        self._cond = threading.Condition()
        self._pending: list[_Call] = []
        self._leading = False

    @contextmanager
    def gathering(self):
        self.on = True
        try:
            yield
        finally:
            self.on = False

    def llm(self, messages: list[dict], max_tokens: int) -> str:
        if not self.on:
            return self.ch.llm(messages, max_tokens, False)
        mine = _Call(messages, max_tokens)
        with self._cond:
            self._pending.append(mine)
            self._cond.notify_all()
            while not mine.done:
                if self._leading:
                    self._cond.wait()
                    continue
                self._leading = True
                batch = self._gather()
                self._cond.release()
                try:
                    self._send(batch)
                finally:
                    self._cond.acquire()
                    self._leading = False
                    self._cond.notify_all()
        if mine.error is not None:
            raise mine.error
        return mine.text or ""

    def _gather(self) -> list[_Call]:
        """The first `size` pending calls, once `size` are pending or none came for `quiet` s
        (called with the lock held; waiting releases it)."""
        seen, until = len(self._pending), time.monotonic() + self.quiet
        while len(self._pending) < self.size and time.monotonic() < until:
            self._cond.wait(until - time.monotonic())
            if len(self._pending) > seen:
                seen, until = len(self._pending), time.monotonic() + self.quiet
        batch, self._pending[: self.size] = self._pending[: self.size], []
        return batch

    def _send(self, batch: list[_Call]) -> None:
        try:
            if len(batch) == 1:
                batch[0].text = self.ch.llm(batch[0].messages, batch[0].max_tokens, False)
            else:
                requests = [{"messages": c.messages, "max_tokens": c.max_tokens} for c in batch]
                reply = self.ch.request({"rpc": "llm_many", "requests": requests})
                for c, text, error in zip(batch, reply["texts"], reply["errors"], strict=True):
                    c.text, c.error = text, None if error is None else RemoteError(error)
        except Exception as e:  # the channel failed (the harness gone, a broken pipe): every call of the batch did
            for c in batch:
                c.error = e
        finally:
            for c in batch:
                c.done = True


def _harness_classes(ch: Channel, dim: int, gather: Gatherer | None = None):
    """(LLM class, embedding model class) in HippoRAG's interfaces that call the harness; free-text
    LLM calls go through `gather` (by default one that sends each at once)."""
    gather = gather or Gatherer(ch)
    import numpy as np
    from hipporag.embedding_model.base import BaseEmbeddingModel, EmbeddingConfig
    from hipporag.llm.base import BaseLLM, LLMConfig

    class HarnessLLM(BaseLLM):
        def __init__(self, global_config=None):
            super().__init__(global_config)
            self._init_llm_config()

        def _init_llm_config(self) -> None:
            params = {"max_tokens": self.global_config.max_new_tokens}
            self.llm_config = LLMConfig.from_dict({"generate_params": params})

        def infer(self, messages, **kwargs):
            # only a call that asks for JSON: HippoRAG's own OpenAI client never sends the config's
            # response_format, so its QA prompt's "Thought: ... Answer: ..." stays free text
            rf = kwargs.get("response_format")
            json_mode = isinstance(rf, dict) and rf.get("type") == "json_object"
            msgs = [{"role": m["role"], "content": m["content"]} for m in messages]
            max_tokens = int(kwargs.get("max_tokens") or self.global_config.max_new_tokens)
            try:  # a JSON call goes alone: a batch is free text only
                text = ch.llm(msgs, max_tokens, True) if json_mode else gather.llm(msgs, max_tokens)
            except (RemoteError, OSError) as e:
                if harness_gone(e):
                    raise HarnessGone(str(e)) from None
                raise  # a call the harness could not serve: HippoRAG keeps the passage, the harness counts it
            return text, {"prompt_tokens": 0, "completion_tokens": 0, "finish_reason": "stop"}, False

    class HarnessEmbedding(BaseEmbeddingModel):
        def __init__(self, global_config=None, embedding_model_name=None):
            super().__init__(global_config=global_config)
            self.embedding_model_name = embedding_model_name or "harness"
            self.embedding_dim = dim
            self.embedding_config = EmbeddingConfig.from_dict({"embedding_model_name": self.embedding_model_name})

        def batch_encode(self, texts, **kwargs):
            # the query instruction ("Given a question, retrieve ...") is left out, as HippoRAG's own
            # classes for models not trained with one (Contriever, OpenAI) leave it out: MiniLM is one
            # (prefixed, its recall@5 of bench peers' 2Wiki supporting passages falls from 70.8 to 67.5)
            texts = [texts] if isinstance(texts, str) else list(texts)
            vecs = np.array(ch.embed(texts))
            return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)

    return HarnessLLM, HarnessEmbedding


def without_triples(openie_file: str, passages: list[dict], docs: list[str]) -> list[str]:
    """The passages HippoRAG keeps with no triple: a failed call, or a reply it could not parse
    (it logs a warning and goes on); such a passage is only a passage node of the graph."""
    if not docs or not os.path.exists(openie_file):
        return []
    with open(openie_file, encoding="utf-8") as f:
        saved = json.load(f).get("docs", [])

    def key(text: str) -> str:  # hipporag.utils.misc_utils.compute_mdhash_id(text, "chunk-")
        return "chunk-" + hashlib.md5(text.encode()).hexdigest()

    empty = {key(d["passage"]) for d in saved if not d.get("extracted_triples")}
    return [p["id"] for p, text in zip(passages, docs) if key(text) in empty]


class Runner:
    def __init__(self, channel: Channel) -> None:
        self.ch = channel
        self.rag = None
        self.s: dict = {}
        self.gather = Gatherer(channel)

    def hello(self, workdir: str, embedding_dim: int, settings: dict) -> dict:
        from importlib.metadata import version

        import hipporag  # noqa: F401 - loads hipporag.HippoRAG, whose factories are replaced below
        from hipporag.utils.config_utils import BaseConfig

        module = sys.modules["hipporag.HippoRAG"]
        llm_cls, emb_cls = _harness_classes(self.ch, embedding_dim, self.gather)
        module._get_llm_class = lambda config: llm_cls(config)
        module._get_embedding_model_class = lambda embedding_model_name=None: emb_cls
        self.s = {**DEFAULTS, **{k: v for k, v in settings.items() if k in DEFAULTS}}
        config = BaseConfig(
            save_dir=workdir, llm_name="harness", embedding_model_name="harness-minilm", openie_mode="online"
        )
        for k, v in self.s.items():
            if k != "llm_batch":
                setattr(config, k, v)
        self.gather.size = max(1, int(self.s["llm_batch"]))
        self.rag = module.HippoRAG(global_config=config)
        return {"package": "hipporag", "version": version("hipporag"), "settings": self.s}

    def index(self, passages: list[dict]) -> dict:
        docs = [f"{p['title']}\n{p['text']}" if p.get("title") else p["text"] for p in passages]
        if docs and self.gather.size > 1:
            with self.gather.gathering():
                self.rag.index(docs)
        elif docs:
            self.rag.index(docs)
        return {"failed": without_triples(self.rag.openie_results_path, passages, docs)}

    def answer(self, question: str) -> dict:
        solutions, *_ = self.rag.rag_qa([question])
        return {"text": str(solutions[0].answer or "")}

    def close(self) -> dict:
        return {}


if __name__ == "__main__":
    ch = Channel()
    r = Runner(ch)
    serve(ch, {"hello": r.hello, "index": r.index, "answer": r.answer, "close": r.close})
