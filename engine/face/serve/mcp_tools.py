"""`logicroute mcp`: the knowledge base as Model Context Protocol tools, on the official SDK (the
`mcp` extra), over stdio or streamable HTTP.

Tools (each with the JSON schema of its type hints; errors come back as tool errors, one line):
  ask               the answer, its numbered sources and the route taken (LLM calls)
  search            the chunks nearest a query, with their scores (no LLM call)
  route             the router's decision and probabilities (no LLM call)
  list_documents    the documents of the knowledge base, a page at a time
  add_documents     only with --allow-writes
  delete_documents  only with --allow-writes

It stands on AnswerService as the HTTP server does: answers take a place in the same bounded
queue under the same deadline, and writes take the KB's writer lock and swap the readers'
snapshot. Over HTTP the SDK's application sits behind the HTTP server's Guard (engine.face.serve.app):
the same key ($LOGICROUTE_SERVER_KEY), the same Host rule without one, JSON bodies only, the same
size caps. A frame that is no JSON-RPC message gets its JSON-RPC error on both transports
(engine.face.serve.mcp_framing). The write tools need --allow-writes even with a key: an agent
decides its own calls, and deleting documents should be a choice made when the server starts.
"""

import asyncio
import contextlib
import importlib.util
import logging
import time
from typing import Annotated, Any, Literal

from pydantic import Field

from engine.core.routes import ROUTE_CHOICES
from engine.face.serve.errors import INTERNAL, ServeError, error_body, kind_of
from engine.face.serve.payloads import answer_json
from engine.face.serve.schemas import MAX_DOCUMENTS, MAX_TEXT_CHARS, DocumentBody
from engine.face.serve.service import AnswerService, QueryOptions
from engine.floor.base.errors import LogicRouteError, MissingExtraError
from engine.floor.base.types import RetrievedChunk, Source
from engine.floor.sources_text import format_source

MCP_EXTRA = "pip install 'logicroute[mcp]'"
MCP_PATH = "/mcp"
READ_TOOLS = ("ask", "search", "route", "list_documents")
WRITE_TOOLS = ("add_documents", "delete_documents")
INSTRUCTIONS = (
    "A logicroute knowledge base. `search` finds passages with no LLM call; `ask` answers a question "
    "from the passages, with numbered sources (file, page, heading path) and the route the router chose: "
    "chunk (one retrieval), summary (a topic overview) or logic (multi-hop reasoning, slower)."
)
log = logging.getLogger("logicroute.mcp")

Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]
RouteName = Literal[ROUTE_CHOICES]  # "auto" or a route of the registry
StyleName = Literal["reader", "short"]


def require_sdk() -> None:
    """MissingExtraError naming the install command when the SDK is not installed."""
    if importlib.util.find_spec("mcp") is None:
        raise MissingExtraError(f"`logicroute mcp` needs the mcp extra: {MCP_EXTRA}")


def build_server(service: AnswerService, *, allow_writes: bool = False):
    """The MCPServer with the tools over `service`; the write tools only with `allow_writes`."""
    require_sdk()
    root = logging.getLogger()
    if not root.handlers:
        # MCPServer calls logging.basicConfig: every library's INFO lines would reach stderr, and
        # ours twice (the CLI's own handler, then the root's). A handler here makes that a no-op.
        root.addHandler(logging.NullHandler())
    from mcp.server import MCPServer
    from mcp.types import ToolAnnotations

    server = MCPServer("logicroute", instructions=INSTRUCTIONS)
    tools = _tools(service)
    reading = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
    for name in READ_TOOLS:
        server.add_tool(tools[name], name=name, annotations=reading)
    if allow_writes:
        server.add_tool(tools["add_documents"], name="add_documents", annotations=ToolAnnotations(openWorldHint=False))
        destructive = ToolAnnotations(destructiveHint=True, idempotentHint=True, openWorldHint=False)
        server.add_tool(tools["delete_documents"], name="delete_documents", annotations=destructive)
    return server


def _tools(service: AnswerService) -> dict:
    """The tool functions: their signatures are the tools' input schemas, their docstrings the
    descriptions an agent reads."""

    async def ask(
        question: Annotated[Text, Field(description="the question, in the words of the documents if you can")],
        route: Annotated[
            RouteName, Field(description="auto: the router picks the cheapest route that answers")
        ] = "auto",
        style: Annotated[
            StyleName | None, Field(description="reader: sentences citing passages [n]; short: the answer phrase")
        ] = None,
    ) -> dict[str, Any]:
        """Answer a question from the knowledge base. Returns the answer, its numbered sources (each with a
        line like "[2] report.pdf p. 14 > Results", its text and score), the route taken (chunk, summary or
        logic) with the router's probabilities, flags and the cost. Makes LLM calls: seconds, minutes on the
        logic route. When the documents lack the answer it says so."""
        with _tool_errors():
            ans = await _answer(service, question, QueryOptions(route=route, style=style))
            out = answer_json(ans)
            for source, shown in zip(out["sources"], ans.sources):
                source["line"] = format_source(shown)
            return {k: v for k, v in out.items() if v is not None}

    async def search(
        query: Annotated[Text, Field(description="what to look for: a question or key words")],
        k: Annotated[int, Field(ge=1, le=50, description="how many chunks")] = 5,
    ) -> dict[str, Any]:
        """Find the chunks of the knowledge base nearest a query, best first, with their scores, file,
        page(s) and heading path. No LLM call: fast, and the way to read the documents yourself."""
        with _tool_errors():
            from engine.core.routes.common import check_question

            q = check_question(query)
            hits = await asyncio.to_thread(service.base.kb.search, q, k)
            return {"query": q, "results": [_hit(n, h) for n, h in enumerate(hits, 1)]}

    async def route(question: Annotated[Text, Field(description="the question to route")]) -> dict[str, Any]:
        """The router's decision for a question, without answering it: the probability of each route
        (chunk, summary, logic), the route it picks, and whether the question is far from the router's
        training questions. No LLM call."""
        with _tool_errors():
            return await asyncio.to_thread(service.decide, question)

    async def list_documents(
        offset: Annotated[int, Field(ge=0, description="skip this many documents")] = 0,
        limit: Annotated[int, Field(ge=1, le=1000, description="at most this many documents")] = 100,
    ) -> dict[str, Any]:
        """The documents of the knowledge base, by id: title, source file and number of chunks, a page at
        a time (`total` says how many there are)."""
        with _tool_errors():
            return _documents(service.base.kb, offset, limit)

    async def add_documents(
        documents: Annotated[
            list[DocumentBody],
            Field(min_length=1, max_length=MAX_DOCUMENTS, description="the documents: id, title, text, format"),
        ],
    ) -> dict[str, Any]:
        """Add documents to the knowledge base (a document whose id is there already is replaced) and
        bring its summary layers up to date. Markdown ("format": "markdown") is cut along its headings."""
        from engine.face.serve.native import document_of

        with _tool_errors():
            return await asyncio.to_thread(service.add_documents, [document_of(d) for d in documents])

    async def delete_documents(
        ids: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1, max_length=MAX_DOCUMENTS)],
    ) -> dict[str, Any]:
        """Delete documents from the knowledge base by id (list_documents shows the ids). Says which ids
        were deleted and which were not there."""
        with _tool_errors():
            return await asyncio.to_thread(_delete, service, ids)

    return {f.__name__: f for f in (ask, search, route, list_documents, add_documents, delete_documents)}


async def _answer(service: AnswerService, question: str, options: QueryOptions):
    """One answer through the server's queue and deadline (ServerBusy when the queue is full). A
    call the client cancels stops its answer: no LLM call starts after."""
    import threading

    deadline = time.monotonic() + service.config.deadline_seconds
    service.admission.admit()
    cancel = threading.Event()
    try:
        return await service.admission.run(lambda: service.answer(question, options, deadline, None, cancel), deadline)
    except asyncio.CancelledError:
        cancel.set()
        raise


def _hit(n: int, hit: RetrievedChunk) -> dict[str, Any]:
    return {
        "n": n,
        "line": format_source(Source.of(n, hit)),
        "score": round(float(hit.score), 4),
        "doc_id": hit.doc_id,
        "title": hit.title,
        "path": hit.source,
        "pages": hit.pages,
        "heading_path": hit.heading_path,
        "text": hit.text,
    }


def _documents(kb, offset: int, limit: int) -> dict[str, Any]:
    ids = kb.doc_ids
    page = []
    for doc_id in ids[offset : offset + limit]:
        chunks = kb.chunks_of(doc_id)
        first = chunks[0] if chunks else None
        page.append(
            {
                "id": doc_id,
                "title": first.title if first else "",
                "source": first.source if first else "",
                "chunks": len(chunks),
            }
        )
    return {"total": len(ids), "offset": offset, "documents": page}


def _delete(service: AnswerService, ids: list[str]) -> dict[str, Any]:
    from engine.floor.base.errors import DocumentNotFoundError

    deleted, missing, chunks = [], [], 0
    for doc_id in dict.fromkeys(ids):
        try:
            chunks += service.delete_document(doc_id)["deleted_chunks"]
            deleted.append(doc_id)
        except DocumentNotFoundError:
            missing.append(doc_id)
    return {"deleted": deleted, "not_found": missing, "deleted_chunks": chunks, "kb": service.kb_summary()}


@contextlib.contextmanager
def _tool_errors():
    """Our errors as the SDK's ToolError, one line each (an endpoint's password never shown); an
    unexpected one is logged with its traceback and told as an internal error only."""
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        yield
    except (ServeError, LogicRouteError) as e:
        raise ToolError(error_body(e)["error"]["message"]) from None
    except Exception as e:
        if kind_of(e) is INTERNAL:
            log.error("internal error in a tool", exc_info=e)
        raise ToolError(error_body(e)["error"]["message"]) from None


# ---------------------------------------------------------------- transports


def http_app(server, service: AnswerService, *, allow_writes: bool = False):
    """The SDK's streamable HTTP application at /mcp, behind the HTTP server's Guard. The SDK's
    own Host check is off: the Guard applies serve's rule (its names, --allowed-host, or a key)."""
    import dataclasses

    from mcp.server.transport_security import TransportSecuritySettings

    from engine.face.serve.app import Guard
    from engine.face.serve.mcp_framing import http_framing

    config = service.config
    if allow_writes:  # documents arrive in a tool call's body: the cap of POST /documents applies
        config = dataclasses.replace(config, max_body_bytes=config.max_document_bytes)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=config.max_body_bytes,
        host=config.host,
    )
    return Guard(http_framing(app, MCP_PATH), config=config, on_refusal=service.metrics.failed)
