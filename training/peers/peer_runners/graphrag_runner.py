"""Microsoft GraphRAG (PyPI `graphrag`, 3.x) behind the peer protocol (protocol.py). Run by the
harness with the GraphRAG venv's Python: `python graphrag_runner.py`, commands on stdin.

Models: GraphRAG 3 makes every completion, embedding and tokenizer through graphrag_llm's
factories (register_completion, register_embedding, register_tokenizer), keyed by the `type` of
a model config. The runner registers a completion and an embedding type that ask the harness over
the channel, and its tokenizer under the two built-in tokenizer types ("litellm", "tiktoken"), so
LiteLLM and tiktoken are never called: tiktoken would download its o200k_base vocabulary at first
use and LiteLLM's model cost map at import, which this machine cannot (LITELLM_LOCAL_MODEL_COST_MAP
makes LiteLLM, which graphrag_llm imports, read its bundled copy). The tokenizer is LightRAG's
runner's regex pieces, which count a little under the LLM's BPE tokens: the budgets below leave room.

GraphRAG's LLM cache is off (type "none"; the registered completion ignores the cache it is
handed): every call reaches the harness and is counted. Concurrency 1 (asyncio).

One build over every passage (the adapter is not incremental): GraphRAG 3's update run indexes
new documents as a delta graph with communities of its own, which would never span two batches.
A build cut short starts again, and every LLM call it had made comes back from the harness's call
cache (counted as cached, timed at its first run).

A community report (a pydantic-shaped reply) comes as free text, as every peer's JSON here: the
runner reads its JSON object, fenced or not; one that does not parse is counted, unreported."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import sys

from lightrag_runner import PieceTokenizer, restore_delimiters
from protocol import Channel, RemoteError, serve

HARNESS = "logicroute_harness"  # the model type the runner registers in graphrag_llm's factories

DEFAULTS = {
    "method": "standard",  # LLM extraction ("fast" extracts noun phrases with NLTK/spaCy models: downloads)
    "search": "local",  # entity-centred: entities found by MiniLM, their relations, reports and text units
    "chunk_size": 1200,
    "chunk_overlap": 100,
    "entity_types": ["organization", "person", "geo", "event"],
    "max_gleanings": 1,
    "summary_max_length": 500,  # words of a merged entity/relationship description
    "summary_max_input_tokens": 4000,
    "max_cluster_size": 10,
    "use_lcc": True,  # GraphRAG clusters the largest connected component only
    # a report's prompt (~2,000 tokens) + its input + its reply fit the model's 8,192 tokens
    # (GraphRAG: 8,000 input tokens and 2,000 words for 128k-context models)
    "report_max_input_length": 2500,
    "report_max_length": 1000,
    "report_max_tokens": 2048,
    "community_level": 2,  # the CLI's default for local search
    "top_k_entities": 10,
    "top_k_relationships": 10,
    "text_unit_prop": 0.5,
    "community_prop": 0.15,
    # a local query's context in pieces (GraphRAG: 12,000; its own note: ~5,000 for an 8k model)
    "max_context_tokens": 4500,
    "max_tokens": 1024,  # per LLM call unless GraphRAG or the kind of call asks for another
    "concurrent_requests": 1,
    "response_type": "a short phrase",
    "answer_instruction": "",
}

# What a call is, told by its prompt (GraphRAG's own prompts; the counts go to runner.log)
KINDS = ("extraction", "gleaning", "loop", "summary", "report", "answer", "other")


def call_kind(messages: list[dict], structured: bool, stream: bool) -> str:
    if stream:
        return "answer"  # only the search streams its reply
    if structured:
        return "report"  # only community reports ask for a pydantic-shaped reply
    last = messages[-1]["content"]
    if last.startswith("MANY entities and relationships were missed"):
        return "gleaning"
    if last.startswith("It appears some entities and relationships may have still been missed"):
        return "loop"
    if "identify all entities of those types from the text and all relationships" in last:
        return "extraction"
    if "comprehensive summary of the data provided below" in last:
        return "summary"
    return "other"


def plain_messages(messages) -> list[dict]:
    """GraphRAG's messages (a prompt string, or OpenAI-style messages whose content may be a list
    of parts) as the protocol's [{role, content}]."""
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    out = []
    for m in messages:
        content = m.get("content") or ""
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        out.append({"role": m["role"], "content": content})
    return out


def json_object(text: str) -> dict:
    """The JSON object of a reply asked for JSON: the reply itself, or the span from its first "{"
    to its last "}" (a fenced block, a sentence before it). ValueError when there is none."""
    try:
        data = json.loads(text)
    except ValueError:
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            raise
        data = json.loads(text[start : end + 1])
    if not isinstance(data, dict):
        raise ValueError("the reply is JSON but not an object")
    return data


def passage_text(p: dict) -> str:
    return f"{p['title']}\n{p['text']}" if p.get("title") else p["text"]


def document_rows(passages: list[dict]) -> list[dict]:
    """GraphRAG's documents table (what its input reader writes), one row a passage, keyed by its id."""
    return [
        {
            "id": p["id"],
            "human_readable_id": i,
            "title": p.get("title") or p["id"],
            "text": passage_text(p),
            "creation_date": "",
            "raw_data": None,
        }
        for i, p in enumerate(passages)
    ]


def unextracted(passages: list[dict], text_units: list[dict]) -> list[str]:
    """Passages no entity came from: none of their text units (rows of text_units.parquet:
    document_id, entity_ids) names an entity (the extraction found none, or its call failed)."""
    found = {u["document_id"] for u in text_units if u.get("entity_ids") is not None and len(u["entity_ids"])}
    return [p["id"] for p in passages if p["id"] not in found]


def write_json(path: str, obj) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)
    os.replace(tmp, path)  # atomic: an interrupted write leaves the old file


class Runner:
    def __init__(self, channel: Channel) -> None:
        self.ch = channel
        self.loop = asyncio.new_event_loop()
        self.s: dict = {}
        self.workdir = ""
        self.config = None
        self.tables: dict | None = None  # the finished index's tables, read at the first answer
        self.calls = dict.fromkeys(KINDS, 0)
        # community reports whose reply held no JSON object of the report's shape, calls the
        # harness could not serve (GraphRAG sees an endpoint's error)
        self.counts = {"reports_unparsed": 0, "failed_calls": 0}

    # --- the harness's LLM, as GraphRAG's completion and embedding models call it ----------

    def complete(self, messages, max_tokens: int | None = None, structured: bool = False, stream: bool = False) -> str:
        msgs = plain_messages(messages)
        kind = call_kind(msgs, structured, stream)
        if max_tokens is None:
            max_tokens = self.s["report_max_tokens"] if kind == "report" else self.s["max_tokens"]
        self.calls[kind] += 1
        try:
            text = self.ch.llm(msgs, int(max_tokens), structured)
        except RemoteError as e:  # the harness counted it; GraphRAG handles it as an endpoint's error
            self.counts["failed_calls"] += 1
            print(f"call {sum(self.calls.values())} {kind} failed: {e}", file=sys.stderr)
            raise
        # "<|COMPLETE|>" reaches the model as "< |COMPLETE|>" (the harness breaks control sequences)
        text = restore_delimiters(text)
        digest = hashlib.md5(text.encode()).hexdigest()[:10]
        print(f"call {sum(self.calls.values())} {kind} max_tokens={max_tokens} reply={digest}", file=sys.stderr)
        return text

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self.ch.embed(list(texts))

    def structured(self, text: str, model):
        """GraphRAG's pydantic reply model filled from the reply; counted when it cannot be."""
        try:
            return model(**json_object(text))
        except (ValueError, TypeError):
            self.counts["reports_unparsed"] += 1
            raise

    # --- the commands -------------------------------------------------------------------

    def hello(self, workdir: str, embedding_dim: int, settings: dict) -> dict:
        os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # before graphrag imports LiteLLM
        from importlib.metadata import version

        self.s = {**DEFAULTS, **{k: v for k, v in settings.items() if k in DEFAULTS}}
        if self.s["search"] != "local":  # global, drift and basic search would need budgets of their own
            raise ValueError(f"search {self.s['search']!r}: the runner answers with GraphRAG's local search only")
        self.workdir = workdir
        register_harness(self)
        self.config = graphrag_config(self.s, workdir, embedding_dim)
        return {"package": "graphrag", "version": version("graphrag"), "settings": self.s}

    def index(self, passages: list[dict]) -> dict:
        ids = sorted(p["id"] for p in passages)
        done = os.path.join(self.workdir, "indexed.json")  # the passages of the finished index
        if os.path.exists(done):
            with open(done, encoding="utf-8") as f:
                if set(ids) <= set(json.load(f)):
                    return {"failed": []}  # the finished index reopened: nothing to do
            os.remove(done)  # a build over other passages replaces it
        if not passages:
            return {"failed": []}
        import pandas as pd
        from graphrag.api import build_index

        # a build is whole: tables an interrupted build left are not this one's (its calls replay)
        shutil.rmtree(os.path.join(self.workdir, "output"), ignore_errors=True)
        docs = pd.DataFrame(document_rows(passages))
        results = self.loop.run_until_complete(
            build_index(config=self.config, method=self.s["method"], input_documents=docs)
        )
        errors = [f"{r.workflow}: {type(r.error).__name__}: {r.error}" for r in results if r.error is not None]
        print(f"index: calls {self.calls}, {self.counts}", file=sys.stderr)
        if errors:
            raise RuntimeError(f"GraphRAG's build stopped at {errors[0]}")
        units = pd.read_parquet(os.path.join(self.workdir, "output", "text_units.parquet"))
        write_json(done, ids)
        self.tables = None
        return {"failed": unextracted(passages, units.to_dict("records")), "calls": self.calls, **self.counts}

    def answer(self, question: str) -> dict:
        import pandas as pd
        from graphrag.api import local_search

        s = self.s
        if self.tables is None:
            out = os.path.join(self.workdir, "output")
            names = ("entities", "communities", "community_reports", "text_units", "relationships")
            self.tables = {n: pd.read_parquet(os.path.join(out, f"{n}.parquet")) for n in names}
        response, _ = self.loop.run_until_complete(
            local_search(
                config=self.config,
                **self.tables,
                covariates=None,  # claims are off by default in GraphRAG
                community_level=s["community_level"],
                # the prompt's "Target response length and format": the short answer rule goes here
                response_type=f"{s['response_type']}. {s['answer_instruction']}".strip(),
                query=question,
            )
        )
        return {"text": response if isinstance(response, str) else json.dumps(response)}

    def close(self) -> dict:
        return {}


def register_harness(runner: Runner) -> None:
    """GraphRAG's hook for custom models: graphrag_llm's factories. A completion and an embedding
    type that call the runner (so the harness), and the runner's tokenizer under both built-in
    tokenizer types, registered before GraphRAG creates any (a built-in type is registered by its
    factory only when missing)."""
    from graphrag_llm.completion import LLMCompletion, register_completion
    from graphrag_llm.embedding import LLMEmbedding, register_embedding
    from graphrag_llm.types import (
        LLMChoiceChunk,
        LLMChoiceDelta,
        LLMCompletionChunk,
        LLMEmbeddingResponse,
        LLMEmbeddingUsage,
    )
    from graphrag_llm.types import LLMEmbedding as EmbeddingRow
    from graphrag_llm.utils import create_completion_response

    class HarnessModel:
        def __init__(self, *, tokenizer, metrics_store, **_: object) -> None:
            self._tokenizer, self._metrics_store = tokenizer, metrics_store  # `cache` is ignored: no GraphRAG cache

        @property
        def metrics_store(self):
            return self._metrics_store

        @property
        def tokenizer(self):
            return self._tokenizer

    class HarnessCompletion(HarnessModel, LLMCompletion):
        def completion(self, /, **kw):
            fmt, stream = kw.get("response_format"), bool(kw.get("stream"))
            limit = kw.get("max_completion_tokens") or kw.get("max_tokens")
            text = runner.complete(kw["messages"], limit, structured=fmt is not None, stream=stream)
            if stream:  # the search reads the reply as chunks: one chunk, the whole reply
                delta = LLMChoiceDelta(role="assistant", content=text)
                choice = LLMChoiceChunk(index=0, delta=delta, finish_reason="stop")
                return iter(
                    [
                        LLMCompletionChunk(
                            id="harness", object="chat.completion.chunk", created=0, model="harness", choices=[choice]
                        )
                    ]
                )
            response = create_completion_response(text)
            if fmt is not None:
                response.formatted_response = runner.structured(text, fmt)
            return response

        async def completion_async(self, /, **kw):
            result = self.completion(**kw)
            if not kw.get("stream"):
                return result

            async def chunks():
                for c in result:
                    yield c

            return chunks()

    class HarnessEmbedding(HarnessModel, LLMEmbedding):
        def embedding(self, /, **kw):
            vectors = runner.embed(kw["input"])
            rows = [EmbeddingRow(object="embedding", embedding=v, index=i) for i, v in enumerate(vectors)]
            usage = LLMEmbeddingUsage(prompt_tokens=0, total_tokens=0)
            return LLMEmbeddingResponse(object="list", data=rows, model="harness", usage=usage)

        async def embedding_async(self, /, **kw):
            return self.embedding(**kw)

    register_tokenizers()
    register_completion(HARNESS, HarnessCompletion)
    register_embedding(HARNESS, HarnessEmbedding)


def register_tokenizers() -> None:
    """The runner's tokenizer under both built-in tokenizer types: GraphRAG never asks tiktoken."""
    from graphrag_llm.tokenizer import Tokenizer, register_tokenizer

    pieces = PieceTokenizer()  # one vocabulary of pieces for every tokenizer GraphRAG asks for

    class HarnessTokenizer(Tokenizer):
        def __init__(self, **_: object) -> None:
            pass

        def encode(self, text: str) -> list[int]:
            return pieces.encode(text)

        def decode(self, tokens: list[int]) -> str:
            return pieces.decode(tokens)

    register_tokenizer("litellm", HarnessTokenizer)
    register_tokenizer("tiktoken", HarnessTokenizer)


def graphrag_config(s: dict, workdir: str, embedding_dim: int):
    """GraphRagConfig for a store folder: the harness's models, no cache, the settings `s`."""
    from graphrag.config.models.graph_rag_config import GraphRagConfig

    def folder(name: str) -> str:
        return os.path.join(workdir, name)

    model = {"type": HARNESS, "model_provider": "logicroute", "model": "harness", "metrics": None}
    return GraphRagConfig(
        completion_models={"default_completion_model": model},
        embedding_models={"default_embedding_model": model},
        concurrent_requests=s["concurrent_requests"],
        async_mode="asyncio",
        input_storage={"base_dir": folder("input")},
        output_storage={"base_dir": folder("output")},
        update_output_storage={"base_dir": folder("update_output")},
        cache={
            "type": "none",
            "storage": {"base_dir": folder("cache")},
        },  # no LLM cache: every call reaches the harness
        reporting={"base_dir": folder("logs")},
        vector_store={"db_uri": folder("output/lancedb"), "vector_size": embedding_dim},
        chunking={"size": s["chunk_size"], "overlap": s["chunk_overlap"]},
        extract_graph={"entity_types": s["entity_types"], "max_gleanings": s["max_gleanings"]},
        summarize_descriptions={
            "max_length": s["summary_max_length"],
            "max_input_tokens": s["summary_max_input_tokens"],
        },
        cluster_graph={"max_cluster_size": s["max_cluster_size"], "use_lcc": s["use_lcc"]},
        community_reports={"max_length": s["report_max_length"], "max_input_length": s["report_max_input_length"]},
        local_search={
            "text_unit_prop": s["text_unit_prop"],
            "community_prop": s["community_prop"],
            "top_k_entities": s["top_k_entities"],
            "top_k_relationships": s["top_k_relationships"],
            "max_context_tokens": s["max_context_tokens"],
        },
    )


if __name__ == "__main__":
    ch = Channel()
    r = Runner(ch)
    serve(ch, {"hello": r.hello, "index": r.index, "answer": r.answer, "close": r.close})
