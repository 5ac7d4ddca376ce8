"""The server specs' setup: an LLM that answers by the call's JSON schema (so concurrent
requests need no shared script), a small knowledge base on disk with summary layers, a
service over them, and a plain HTTP client (urllib: the server is tested as any client sees it)."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from engine.face.serve.config import ServeConfig
from engine.face.serve.service import AnswerService
from engine.floor.base.types import Completion
from engine.floor.llm.structured import chat_structured
from hierarchy.documents import Document
from tests.engine.logic_scripts import CHAIN_PLAN, SUFFICIENT
from tests.fakes import FakeRouter, HashedBowEmbedder

FILMS = {
    "jaws": ("Jaws (film)", "Jaws is a 1975 thriller film directed by Steven Spielberg."),
    "spielberg": ("Steven Spielberg", "Steven Spielberg was born on December 18, 1946 in Cincinnati."),
    "vertigo": ("Vertigo (film)", "Vertigo is a 1958 film directed by Alfred Hitchcock."),
    "hitchcock": ("Alfred Hitchcock", "Alfred Hitchcock was born on 13 August 1899 in London."),
    "metropolis": ("Metropolis (film)", "Metropolis is a 1927 film directed by Fritz Lang."),
}
CHAIN_QUESTION = "When was the director of film Jaws born?"  # FakeRouter: 'director' -> logic
SIMPLE_QUESTION = "Where was Alfred Hitchcock born?"  # FakeRouter: chunk
ANSWER = "Steven Spielberg was born on December 18, 1946 [1]."


class SchemaLLM:
    """Replies by what each call asks for, the same for every request: the chain plan to a
    decomposition, an answer per sub-question to a step, 'sufficient' to a reflection, 'answered'
    to a self-check, ANSWER to a free-text call. `gate` (a threading.Event) holds every call
    until it is set; `active`/`max_active` count calls running at once."""

    name = "fake:by-schema"

    def __init__(self, answer: str = ANSWER, delay: float = 0.0, gate: threading.Event | None = None):
        self.answer, self.delay, self.gate = answer, delay, gate
        self.lock = threading.Lock()
        self.calls = 0
        self.active = 0
        self.max_active = 0

    def reply(self, schema: dict | None) -> str:
        required = set((schema or {}).get("required") or ())
        if "subquestions" in required:
            return json.dumps(CHAIN_PLAN)
        if "answers" in required:
            ids = schema["properties"]["answers"]["required"]
            answers = {i: {"q1": "Steven Spielberg", "q2": "December 18, 1946"}.get(i, "unknown") for i in ids}
            return json.dumps({"memory": "Jaws was directed by Steven Spielberg.", "answers": answers})
        if "sufficient" in required:
            return json.dumps(SUFFICIENT)
        if "answered" in required:
            return json.dumps({"answered": True})
        return self.answer

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0) -> Completion:
        def send(msgs: list[dict]) -> Completion:
            with self.lock:
                self.calls += 1
                self.active += 1
                self.max_active = max(self.max_active, self.active)
            try:
                if self.gate is not None:
                    self.gate.wait(timeout=30)
                if self.delay:
                    time.sleep(self.delay)
                text = self.reply(schema)
            finally:
                with self.lock:
                    self.active -= 1
            prompt = sum(len(m["content"].split()) for m in msgs)
            return Completion(text=text, prompt_tokens=prompt, completion_tokens=len(text.split()), seconds=0.0)

        return send(messages) if schema is None else chat_structured(send, messages, schema)


def film_kb(path, embedder=None, store: str | None = None):
    """FILMS on disk (one chunk each) with extractive summary layers: the KB every spec serves.
    `store`: its vector store (`--store`; default: the default store)."""
    from hierarchy.indexing import index_sources
    from hierarchy.vector_store.base import parse_store

    src = path.parent / f"{path.name}-films.jsonl"
    src.write_text("".join(json.dumps({"id": i, "title": t, "text": x}) + "\n" for i, (t, x) in FILMS.items()))
    return index_sources(
        path, [src], embedder=embedder or HashedBowEmbedder(), store=store and parse_store(store), show_progress=False
    ).kb


def film_service(
    tmp_path, llm=None, *, router=None, llm_spec: str = "fake:by-schema", store: str | None = None, **config
) -> AnswerService:
    """A service over film_kb (on `store`), a SchemaLLM (unless `llm`) and the FakeRouter (unless `router`);
    `llm_spec`: what the server is told its LLM is ('local:...' makes it load the model before it
    listens); `config`: ServeConfig's fields. It takes document writes (allow_writes=True, as
    `serve --allow-writes`): the specs of writes need them, and the spec of the default refusal
    says allow_writes=False."""
    kb = film_kb(tmp_path / "kb", store=store)
    from engine.core.pipeline import RoutedRAG

    rag = RoutedRAG(kb=kb, llm=llm or SchemaLLM(), router=router or FakeRouter(), cache=False)
    return AnswerService(rag, ServeConfig(**{"allow_writes": True, **config}), llm_spec=llm_spec)


def a_document(doc_id: str, text: str, title: str = "") -> Document:
    return Document(id=doc_id, title=title, text=text)


@dataclass
class Reply:
    status: int
    headers: dict
    body: dict | str

    @property
    def error(self) -> dict:
        return self.body["error"]


def call(method: str, url: str, body=None, *, headers: dict | None = None, raw: bytes | None = None) -> Reply:
    """One HTTP request (`raw`: these bytes as the body); any status comes back as a Reply
    (urllib raises on 4xx/5xx)."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    h = {"Content-Type": "application/json", **(headers or {})}
    req = urllib.request.Request(url, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return _reply(r.status, r.headers, r.read())
    except urllib.error.HTTPError as e:
        return _reply(e.code, e.headers, e.read())


def post_chunked(url: str, parts: list[bytes]) -> Reply:
    """A POST with a chunked body (no Content-Length), the whole request in one socket write.

    One write, so the client is never still sending when a server that refuses early closes
    the connection (urllib writes chunk by chunk and can hit a broken pipe)."""
    import socket
    import urllib.parse

    u = urllib.parse.urlsplit(url)
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"
    head = (
        f"POST {u.path} HTTP/1.1\r\nHost: {u.netloc}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection((u.hostname, u.port), timeout=30) as sock:
        sock.sendall(head + chunks)
        received = b""
        while block := sock.recv(65536):
            received += block
    head_part, _, payload = received.partition(b"\r\n\r\n")
    lines = head_part.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    if headers.get("transfer-encoding", headers.get("Transfer-Encoding", "")).lower() == "chunked":
        payload = _unchunk(payload)
    return _reply(status, headers, payload)


def _unchunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out, data = out + data[:size], data[size + 2 :]
    return out


def _reply(status: int, headers, payload: bytes) -> Reply:
    text = payload.decode("utf-8", "replace")
    try:
        body = json.loads(text)
    except json.JSONDecodeError:
        body = text
    return Reply(status, {k.lower(): v for k, v in headers.items()}, body)
