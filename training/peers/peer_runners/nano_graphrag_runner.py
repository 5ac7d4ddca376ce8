"""nano-graphrag behind the peer protocol (protocol.py). Run by the harness with the nano-graphrag
venv's Python: `python nano_graphrag_runner.py`, commands on stdin.

nano-graphrag's GraphRAG takes its LLMs (best_model_func: extraction, community reports, the
answer; cheap_model_func: summaries of long entity descriptions) and its embedding_func as
arguments: all three call the harness here. Its own LLM response cache is off, so every call
reaches the harness and is counted. Concurrency 1 is an asyncio lock here, and nano-graphrag's
own limiters are left wide: they wait by polling every 0.1 ms, a busy loop that would take a
core from the model while a community level's reports queue behind one another.

tiktoken: nano-graphrag counts and cuts text with tiktoken's gpt-4o vocabulary, which tiktoken
downloads at first use (this machine cannot). tiktoken.encoding_for_model and get_encoding are
replaced by LightRAG's runner's tokenizer of regex pieces, which count a little under the LLM's
BPE tokens: the context budgets below were set to fit 4,096 tokens (the local model's own context;
`bench peers` gives it 8,192), so they leave room.

Incremental: nano-graphrag's insert skips documents whose content hash is already in its
full_docs store, and stores a batch's documents only once its extraction and community reports
are done: a batch cut short is extracted again (the harness's LLM call cache replays it). It
keeps no community report across inserts: each insert clusters the whole graph again and asks
for every community's report anew. With its own LLM cache (on by default) a community that did
not change costs no call; that cache is off here, so the runner keeps the index's report replies
by their prompt (reports.json in the store) and answers a repeated one itself: otherwise every
report would be counted once per batch, a cost that depends on the harness's batch size."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import sys

from lightrag_runner import PieceTokenizer, restore_delimiters
from protocol import Channel, RemoteError, messages_of, serve

DEFAULTS = {
    "mode": "local",  # nano-graphrag's GraphRAG-style local search (entities, relations, reports, chunks)
    "chunk_token_size": 1200,
    "chunk_overlap_token_size": 100,
    "entity_extract_max_gleaning": 1,
    "entity_summary_to_max_tokens": 500,
    "max_graph_cluster_size": 10,
    "reuse_community_reports": True,  # what nano-graphrag's own cache does for an unchanged community
    # what a community report's prompt may hold of the community (nano-graphrag: 32,768; the
    # report prompt's ~2,000 tokens + this fit the model's context)
    "community_report_max_tokens": 1200,
    "top_k": 10,  # entities a local query starts from (nano-graphrag: 20, each with its description)
    # a local query's context in pieces (nano-graphrag: 4,000 / 4,800 / 3,200, for 32k contexts)
    "local_max_token_for_text_unit": 1200,
    "local_max_token_for_local_context": 500,
    "local_max_token_for_community_report": 400,
    "max_tokens": 1024,  # per LLM call unless nano-graphrag asks for a number
    "llm_max_async": 1,
    "response_type": "a short phrase",
    "answer_instruction": "",
}

log = logging.getLogger("nano_graphrag_runner")


class PieceEncoding(PieceTokenizer):
    """The part of tiktoken.Encoding that nano-graphrag uses."""

    def encode_batch(self, texts: list[str], **_: object) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def decode_batch(self, batch: list[list[int]], **_: object) -> list[str]:
        return [self.decode(tokens) for tokens in batch]


def no_download_tokenizer() -> PieceEncoding:
    """Point tiktoken's two entry points, and nano-graphrag's cached encoder, at the pieces."""
    import nano_graphrag._utils as utils
    import tiktoken

    enc = PieceEncoding()
    tiktoken.encoding_for_model = lambda model_name: enc
    tiktoken.get_encoding = lambda encoding_name: enc
    utils.ENCODER = enc
    return enc


def doc_id(text: str) -> str:
    """nano-graphrag's key of a document in full_docs (graphrag.ainsert: md5 of the stripped text)."""
    return "doc-" + hashlib.md5(text.strip().encode()).hexdigest()


def passage_text(p: dict) -> str:
    return f"{p['title']}\n{p['text']}" if p.get("title") else p["text"]


def report_reader(counts: dict):
    """nano-graphrag's JSON reading of a community report; a reply that is not JSON is kept as the
    report's text, and counted (nano-graphrag would abort the whole insert, and a rerun would get
    the same reply from the cache). A closure, not a method: GraphRAG deep-copies its settings."""
    from nano_graphrag._utils import convert_response_to_json

    def read(response: str) -> dict:
        try:
            data = convert_response_to_json(response)
            if isinstance(data, dict):
                return data
        except (AssertionError, ValueError):
            pass
        counts["report_fallbacks"] += 1
        print(f"community report not JSON ({counts['report_fallbacks']} so far): kept as text", file=sys.stderr)
        return {"title": "Report", "summary": response.strip(), "findings": [], "rating": -1}

    return read


class Runner:
    def __init__(self, channel: Channel) -> None:
        self.ch = channel
        self.loop = asyncio.new_event_loop()
        self.rag = None
        self.s: dict = {}
        # community reports the model did not write as JSON, reports of an unchanged community
        # answered from self.reports, LLM calls the harness could not serve
        self.counts = {"report_fallbacks": 0, "reports_reused": 0, "failed_calls": 0}
        self.reports: dict[str, str] = {}  # md5 of a report request's messages -> the reply
        self.reports_file = ""
        self.indexing = False  # only the index's reports are reused, not a global query's map calls

    def harness_functions(self):
        """(llm, embed): async functions in nano-graphrag's signatures (best_model_func and
        cheap_model_func; the func of its EmbeddingFunc) that ask the harness over the channel."""
        import numpy as np

        ch, s, counts = self.ch, self.s, self.counts
        lock = asyncio.Lock()  # concurrency 1 (llm_max_async), without nano-graphrag's polling

        async def llm(prompt, system_prompt=None, history_messages=None, **kw):
            # kw: hashing_kv (its cache, off), max_tokens (summaries), response_format (reports)
            rf = kw.get("response_format")
            json_mode = isinstance(rf, dict) and rf.get("type") == "json_object"
            msgs = messages_of(prompt, system_prompt, history_messages)
            max_tokens = int(kw.get("max_tokens") or s["max_tokens"])
            key = hashlib.md5(json.dumps(msgs, sort_keys=True).encode()).hexdigest()
            reuse = json_mode and self.indexing and s["reuse_community_reports"]
            if reuse and key in self.reports:
                counts["reports_reused"] += 1
                return self.reports[key]
            async with lock:
                try:
                    text = await asyncio.to_thread(ch.llm, msgs, max_tokens, json_mode)
                except RemoteError as e:  # the harness counted it; nano-graphrag sees an empty reply
                    if str(e) == "the harness closed the channel":  # stopped: the batch must not be stored
                        raise  # as extracted from empty replies (a resumed build would skip it at no cost)
                    counts["failed_calls"] += 1
                    print(f"LLM call failed: {e}", file=sys.stderr)
                    return ""
            text = restore_delimiters(text)  # "<|COMPLETE|>" reaches the model as "< |COMPLETE|>"
            if reuse:
                self.reports[key] = text
            return text

        async def embed(texts):
            async with lock:
                vectors = await asyncio.to_thread(ch.embed, list(texts))
            return np.array(vectors, dtype=np.float32)

        return llm, embed

    def hello(self, workdir: str, embedding_dim: int, settings: dict) -> dict:
        import nano_graphrag
        from nano_graphrag import GraphRAG
        from nano_graphrag._utils import EmbeddingFunc

        logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
        logging.getLogger("nano-graphrag").setLevel(logging.INFO)
        no_download_tokenizer()
        self.s = s = {**DEFAULTS, **{k: v for k, v in settings.items() if k in DEFAULTS}}
        self.reports_file = os.path.join(workdir, "reports.json")
        if os.path.exists(self.reports_file):
            with open(self.reports_file, encoding="utf-8") as f:
                self.reports = json.load(f)
        llm, embed = self.harness_functions()
        wide = 1 << 20  # nano-graphrag's limiters never wait: the lock above serialises the calls
        self.rag = GraphRAG(
            working_dir=workdir,
            best_model_func=llm,
            cheap_model_func=llm,
            best_model_max_async=wide,
            cheap_model_max_async=wide,
            best_model_max_token_size=s["community_report_max_tokens"],
            cheap_model_max_token_size=s["community_report_max_tokens"],
            embedding_func=EmbeddingFunc(embedding_dim=embedding_dim, max_token_size=512, func=embed),
            embedding_func_max_async=wide,
            chunk_token_size=s["chunk_token_size"],
            chunk_overlap_token_size=s["chunk_overlap_token_size"],
            entity_extract_max_gleaning=s["entity_extract_max_gleaning"],
            entity_summary_to_max_tokens=s["entity_summary_to_max_tokens"],
            max_graph_cluster_size=s["max_graph_cluster_size"],
            convert_response_to_json_func=report_reader(self.counts),
            enable_llm_cache=False,
        )
        return {"package": "nano-graphrag", "version": nano_graphrag.__version__, "settings": s}

    def index(self, passages: list[dict]) -> dict:
        texts = [passage_text(p) for p in passages]
        if texts:
            self.indexing = True
            try:
                self.loop.run_until_complete(self.rag.ainsert(texts))
            finally:
                self.indexing = False
                self.save_reports()
        # filter_keys returns the keys its store lacks: a document nano-graphrag did not store (no
        # entity in its batch, or the insert failed)
        missing = self.loop.run_until_complete(self.rag.full_docs.filter_keys([doc_id(t) for t in texts]))
        failed = [p["id"] for p, t in zip(passages, texts) if doc_id(t) in missing]
        return {"failed": failed, **self.counts}

    def save_reports(self) -> None:
        tmp = self.reports_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.reports, f, ensure_ascii=False)
        os.replace(tmp, self.reports_file)  # atomic: an interrupted write leaves the old file

    def answer(self, question: str) -> dict:
        from nano_graphrag import QueryParam

        s = self.s
        param = QueryParam(
            mode=s["mode"],
            # the prompt's "Target response length and format": nano-graphrag has no other place
            response_type=f"{s['response_type']}. {s['answer_instruction']}".strip(),
            top_k=s["top_k"],
            local_max_token_for_text_unit=s["local_max_token_for_text_unit"],
            local_max_token_for_local_context=s["local_max_token_for_local_context"],
            local_max_token_for_community_report=s["local_max_token_for_community_report"],
        )
        text = self.loop.run_until_complete(self.rag.aquery(question, param=param))
        return {"text": text if isinstance(text, str) else str(text)}

    def close(self) -> dict:
        return {}


if __name__ == "__main__":
    ch = Channel()
    r = Runner(ch)
    serve(ch, {"hello": r.hello, "index": r.index, "answer": r.answer, "close": r.close})
