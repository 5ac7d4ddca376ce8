"""HippoRAG 2 (hipporag) behind the peer protocol (protocol.py). Run by the harness with the
HippoRAG venv's Python: `python hipporag_runner.py`, commands on stdin.

HippoRAG picks its LLM (an OpenAI client) and its embedding model (NV-Embed-v2, GritLM,
Contriever: GPU models) by name; here both factories in hipporag.HippoRAG are replaced by
classes that call the harness, so HippoRAG runs on the harness's LLM and MiniLM with no
download. Its own QA prompt already asks for a short answer after "Answer:" (the one HippoRAG
uses on MuSiQue and 2Wiki), so the harness's answer rule is not added. Its OpenIE results and
embedding stores live in the working folder: a second `index` call extracts only new passages."""

from __future__ import annotations

import sys

from protocol import Channel, serve

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
}


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
            text = ch.llm(msgs, int(kwargs.get("max_tokens") or self.global_config.max_new_tokens), json_mode)
            return text, {"prompt_tokens": 0, "completion_tokens": 0, "finish_reason": "stop"}, False

    class HarnessEmbedding(BaseEmbeddingModel):
        def __init__(self, global_config=None, embedding_model_name=None):
            super().__init__(global_config=global_config)
            self.embedding_model_name = embedding_model_name or "harness"
            self.embedding_dim = dim
            self.embedding_config = EmbeddingConfig.from_dict({"embedding_model_name": self.embedding_model_name})

        def batch_encode(self, texts, **kwargs):
            texts = [texts] if isinstance(texts, str) else list(texts)
            instruction = kwargs.get("instruction") or ""
            vecs = np.array(ch.embed([f"{instruction} {t}".strip() if instruction else t for t in texts]))
            return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)

    return HarnessLLM, HarnessEmbedding


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
        return {"failed": []}  # HippoRAG keeps a passage whose extraction failed, with no triples

    def answer(self, question: str) -> dict:
        solutions, *_ = self.rag.rag_qa([question])
        return {"text": str(solutions[0].answer or "")}

    def close(self) -> dict:
        return {}


if __name__ == "__main__":
    ch = Channel()
    r = Runner(ch)
    serve(ch, {"hello": r.hello, "index": r.index, "answer": r.answer, "close": r.close})
