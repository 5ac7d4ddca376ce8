"""HippoRAG 2 (hipporag) behind the peer protocol (protocol.py). Run by the harness with the
HippoRAG venv's Python: `python hipporag_runner.py`, commands on stdin.

HippoRAG picks its LLM (an OpenAI client) and its embedding model (NV-Embed-v2, GritLM,
Contriever: GPU models) by name; here both factories in hipporag.HippoRAG are replaced by
classes that call the harness, so HippoRAG runs on the harness's LLM and MiniLM with no
download. Its own QA prompt already asks for a short answer after "Answer:" (the one HippoRAG
uses on MuSiQue and 2Wiki), so the harness's answer rule is not added. Its OpenIE results and
embedding stores live in the working folder: a second `index` call extracts only new passages."""

from __future__ import annotations

import hashlib
import json
import os
import sys

from protocol import Channel, RemoteError, serve

DEFAULTS = {
    "retrieval_top_k": 200,
    "linking_top_k": 5,
    "qa_top_k": 5,
    # every peer's call is capped at 1024 new tokens (the other runners' cap); HippoRAG's own 2048
    # only doubles the length of a reply the local model loops in, which HippoRAG repairs either way
    "max_new_tokens": 1024,
    "dataset": "musique",  # which of HippoRAG's QA prompt templates (musique, 2wikimultihopqa, hotpotqa)
    "embedding_batch_size": 16,
    "synonymy_edge_sim_threshold": 0.8,
    "damping": 0.5,
    "passage_node_weight": 0.05,
}


class HarnessGone(BaseException):
    """The harness closed the channel (it was stopped) while HippoRAG indexed. HippoRAG's OpenIE
    catches every Exception around an LLM call and saves the passage as extracted, with no triple,
    and a later index skips it: its triples and its cost would be missing with no error anywhere.
    Raised past those handlers, this ends the batch before HippoRAG saves anything of it."""


def harness_gone(e: Exception) -> bool:
    """A pipe the harness no longer reads, or the end of its replies (protocol.Channel.request)."""
    return isinstance(e, OSError) or str(e) == "the harness closed the channel"


def _harness_classes(ch: Channel, dim: int):
    """(LLM class, embedding model class) in HippoRAG's interfaces that call the harness."""
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
            try:
                limit = int(kwargs.get("max_tokens") or self.global_config.max_new_tokens)
                # the reply's finish reason ("length": cut at the cap) rides beside its text
                reply = ch.request({"rpc": "llm", "messages": msgs, "max_tokens": limit, "json": json_mode})
            except (RemoteError, OSError) as e:
                if harness_gone(e):
                    raise HarnessGone(str(e)) from None
                raise  # a call the harness could not serve: HippoRAG keeps the passage, the harness counts it
            # HippoRAG's OpenIE repairs the JSON of a reply cut at the cap only when told "length"
            meta = {"prompt_tokens": 0, "completion_tokens": 0, "finish_reason": reply.get("finish_reason") or "stop"}
            return reply["text"], meta, False

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

    def hello(self, workdir: str, embedding_dim: int, settings: dict) -> dict:
        from importlib.metadata import version

        import hipporag  # noqa: F401 - loads hipporag.HippoRAG, whose factories are replaced below
        from hipporag.utils.config_utils import BaseConfig

        module = sys.modules["hipporag.HippoRAG"]
        llm_cls, emb_cls = _harness_classes(self.ch, embedding_dim)
        module._get_llm_class = lambda config: llm_cls(config)
        module._get_embedding_model_class = lambda embedding_model_name=None: emb_cls
        self.s = {**DEFAULTS, **{k: v for k, v in settings.items() if k in DEFAULTS}}
        config = BaseConfig(
            save_dir=workdir, llm_name="harness", embedding_model_name="harness-minilm", openie_mode="online"
        )
        for k, v in self.s.items():
            setattr(config, k, v)
        self.rag = module.HippoRAG(global_config=config)
        return {"package": "hipporag", "version": version("hipporag"), "settings": self.s}

    def index(self, passages: list[dict]) -> dict:
        docs = [f"{p['title']}\n{p['text']}" if p.get("title") else p["text"] for p in passages]
        if docs:
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
