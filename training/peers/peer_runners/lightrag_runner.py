"""LightRAG (lightrag-hku) behind the peer protocol (protocol.py). Run by the harness with the
peers' Python: `python lightrag_runner.py`, commands on stdin.

LightRAG gets the harness's LLM and embedder as its llm_model_func and embedding_func, and a
tokenizer of its own here (tiktoken would download its vocabulary, which this machine cannot):
pre-tokenizer pieces (a word or a punctuation mark with its leading space), which count a little
under the LLM's BPE tokens, so the token budgets below leave room in the model's context. Its
own LLM cache is off, so every call reaches the harness and is counted (the harness's cache
makes a rerun free); its document store in the working folder lets an interrupted build go on."""

from __future__ import annotations

import asyncio
import re
import sys
import threading

from protocol import Channel, messages_of, serve

DEFAULTS = {
    "mode": "hybrid",  # the mode the LightRAG paper and the LogicRAG comparison report
    "chunk_token_size": 1200,
    "chunk_overlap_token_size": 100,
    "top_k": 40,
    "chunk_top_k": 10,
    "max_entity_tokens": 1500,
    "max_relation_tokens": 1500,
    "max_total_tokens": 4500,  # the query's whole context, prompt included, in pieces
    "entity_extract_max_gleaning": 1,
    "max_tokens": 1024,  # per LLM call unless LightRAG asks for a number
    "llm_max_async": 1,  # the local model answers one call at a time
    "llm_timeout_s": 3600,
    # the harness serves one request at a time: an embedding may wait behind a long LLM call
    "embedding_timeout_s": 3600,
    "response_type": "a short phrase",
    "answer_instruction": "",
}


def restore_delimiters(text: str) -> str:
    """LightRAG's record delimiters as it wrote them. The harness's LLM breaks every "<|...|>"
    sequence in a prompt into "< |...|>" (engine/floor/llm/control_tokens.py: no text may become a chat
    template's control token), so the model copies "< |#|>" from the examples and LightRAG's
    parser, which looks for "<|#|>" and "<|COMPLETE|>", would find no entity."""
    return text.replace("< |", "<|")


async def clear_unfinished(rag, statuses) -> list[str]:
    """Delete the documents an interrupted build left half done (`statuses`: failed, processing,
    pending), so the harness's next batch extracts them again and books what that costs. Without
    this LightRAG keeps them: a document id inserted again is taken for a duplicate (recorded as a
    failed "dup-" document) and never extracted, and its cost is missing from the index figures.
    Deleting a document no extraction finished for makes no LLM call. Returns the ids deleted."""
    unfinished = sorted(await rag.doc_status.get_docs_by_statuses(list(statuses)))
    for doc_id in unfinished:
        await rag.adelete_by_doc_id(doc_id)
    return unfinished


class PieceTokenizer:
    """encode/decode over regex pieces, ids given on first sight; thread-safe and shared by
    deepcopy (LightRAG's requirements of an injected tokenizer)."""

    _PIECE = re.compile(r"\s*\w+|\s*[^\w\s]|\s+")

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._pieces: list[str] = []
        self._lock = threading.Lock()

    def encode(self, content: str, **_: object) -> list[int]:
        out = []
        with self._lock:
            for p in self._PIECE.findall(content):
                i = self._ids.get(p)
                if i is None:
                    i = self._ids[p] = len(self._pieces)
                    self._pieces.append(p)
                out.append(i)
        return out

    def decode(self, tokens: list[int]) -> str:
        with self._lock:
            return "".join(self._pieces[i] for i in tokens)

    def __deepcopy__(self, memo: dict) -> "PieceTokenizer":
        return self


class Runner:
    def __init__(self, channel: Channel) -> None:
        self.ch = channel
        self.loop = asyncio.new_event_loop()
        self.rag = None
        self.s: dict = {}

    def hello(self, workdir: str, embedding_dim: int, settings: dict) -> dict:
        import lightrag

        self.s = {**DEFAULTS, **{k: v for k, v in settings.items() if k in DEFAULTS}}
        from lightrag.base import DocStatus

        self.loop.run_until_complete(self._open(workdir, embedding_dim))
        # the harness runs one batch at a time, so at open no document can be in flight
        unfinished = (DocStatus.FAILED, DocStatus.PROCESSING, DocStatus.PENDING)
        cleared = self.loop.run_until_complete(clear_unfinished(self.rag, unfinished))
        if cleared:
            print(f"cleared {len(cleared)} unfinished documents of an interrupted build: {cleared}", file=sys.stderr)
        return {"package": "lightrag-hku", "version": lightrag.__version__, "settings": self.s}

    async def _open(self, workdir: str, dim: int) -> None:
        import numpy as np
        from lightrag import LightRAG
        from lightrag.utils import EmbeddingFunc, Tokenizer

        s, ch = self.s, self.ch

        async def llm_func(prompt, system_prompt=None, history_messages=None, keyword_extraction=False, **kw):
            rf = kw.get("response_format")
            json_mode = bool(keyword_extraction) or (isinstance(rf, dict) and rf.get("type") == "json_object")
            msgs = messages_of(prompt, system_prompt, history_messages)
            text = await asyncio.to_thread(ch.llm, msgs, int(kw.get("max_tokens") or s["max_tokens"]), json_mode)
            return restore_delimiters(text)

        async def embed(texts, **_):
            return np.array(await asyncio.to_thread(ch.embed, list(texts)), dtype=np.float32)

        self.rag = LightRAG(
            working_dir=workdir,
            llm_model_func=llm_func,
            llm_model_name="harness",
            llm_model_max_async=s["llm_max_async"],
            default_llm_timeout=s["llm_timeout_s"],
            default_embedding_timeout=s["embedding_timeout_s"],
            embedding_func=EmbeddingFunc(embedding_dim=dim, max_token_size=512, func=embed),
            tokenizer=Tokenizer("pieces", PieceTokenizer()),
            chunk_token_size=s["chunk_token_size"],
            chunk_overlap_token_size=s["chunk_overlap_token_size"],
            entity_extract_max_gleaning=s["entity_extract_max_gleaning"],
            enable_llm_cache=False,
            enable_llm_cache_for_entity_extract=False,
        )
        await self.rag.initialize_storages()

    def index(self, passages: list[dict]) -> dict:
        return self.loop.run_until_complete(self._index(passages))

    async def _index(self, passages: list[dict]) -> dict:
        from lightrag.base import DocStatus

        if passages:
            ids = [p["id"] for p in passages]
            texts = [f"{p['title']}\n{p['text']}" if p.get("title") else p["text"] for p in passages]
            await self.rag.ainsert(texts, ids=ids, file_paths=ids)
        failed = await self.rag.doc_status.get_docs_by_statuses([DocStatus.FAILED])
        return {"failed": sorted(failed)}

    def answer(self, question: str) -> dict:
        from lightrag import QueryParam

        s = self.s
        param = QueryParam(
            mode=s["mode"],
            response_type=s["response_type"],
            top_k=s["top_k"],
            chunk_top_k=s["chunk_top_k"],
            max_entity_tokens=s["max_entity_tokens"],
            max_relation_tokens=s["max_relation_tokens"],
            max_total_tokens=s["max_total_tokens"],
            enable_rerank=False,
            user_prompt=s["answer_instruction"] or None,
        )
        text = self.loop.run_until_complete(self.rag.aquery(question, param=param))
        return {"text": text if isinstance(text, str) else str(text)}

    def close(self) -> dict:
        if self.rag is not None:
            self.loop.run_until_complete(self.rag.finalize_storages())
        return {}


if __name__ == "__main__":
    ch = Channel()
    r = Runner(ch)
    serve(ch, {"hello": r.hello, "index": r.index, "answer": r.answer, "close": r.close})
