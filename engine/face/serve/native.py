"""The native endpoints:

  POST   /query            {question, route, style, escalate, budget, trace} -> the answer (payloads.answer_json)
  POST   /route            {question, budget} -> the decision only (no LLM call)
  POST   /documents        {documents: [{id, title, text, format, source}]} -> what was indexed
  DELETE /documents/{id}   -> what was deleted (404 for an unknown id)
  GET    /health           the KB, the LLM spec, the queue
  GET    /metrics          counts, latencies and tokens per route (engine.face.serve.metrics)

Answers go through the bounded queue; route decisions and document writes do not (they make
no LLM call), and run on threads so the event loop keeps serving.
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request  # at module level: FastAPI resolves a handler's annotations here

from engine.face.serve.payloads import answer_json
from engine.face.serve.schemas import DocumentBody, DocumentsBody, QueryBody, RouteBody
from engine.face.serve.service import AnswerService, QueryOptions


def document_of(body: DocumentBody):
    from hierarchy.chunking import MARKDOWN
    from hierarchy.datasets import passage_id
    from hierarchy.documents import Document

    meta: dict = {}
    if body.format == "markdown":
        meta["format"] = MARKDOWN
    if body.source:
        meta["source"] = body.source
    doc_id = body.id if body.id is not None else passage_id(body.title, body.text)
    return Document(id=doc_id, title=body.title, text=body.text, meta=meta)


def register(app, service: AnswerService, start_answer) -> None:
    @app.post("/query")
    async def query(body: QueryBody, request: Request) -> dict:
        options = QueryOptions(
            route=body.route,
            style=body.style,
            escalate=body.escalate,
            limits=body.budget.model_dump(exclude_none=True) if body.budget else None,
        )
        ans = await start_answer(body.question, options, None, request.receive)
        return answer_json(ans, with_trace=body.trace)

    @app.post("/route")
    async def route(body: RouteBody) -> dict:
        limits = body.budget.model_dump(exclude_none=True) if body.budget else None
        return await asyncio.to_thread(service.decide, body.question, limits)

    @app.post("/documents")
    async def add_documents(body: DocumentsBody) -> dict:
        docs = [document_of(d) for d in body.documents]
        return await asyncio.to_thread(service.add_documents, docs)

    @app.delete("/documents/{doc_id:path}")
    async def delete_document(doc_id: str) -> dict:
        return await asyncio.to_thread(service.delete_document, doc_id)

    @app.get("/health")
    async def health() -> dict:
        return service.health()

    @app.get("/metrics")
    async def metrics() -> dict:
        return service.metrics_dict()
