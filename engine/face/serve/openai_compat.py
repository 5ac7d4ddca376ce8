"""The OpenAI-compatible endpoints: POST /v1/chat/completions and GET /v1/models.

The model name picks the route (as RouteLLM's server takes a router as the model):
logicroute-auto (the trained router), logicroute-chunk, logicroute-summary, logicroute-logic.
The last user message is the question; earlier turns are not used (the routes answer one
question from the knowledge base). The reply is a chat.completion whose `usage` sums every LLM
call the answer made, plus a `logicroute` object (engine.face.serve.payloads: route, probabilities,
sources, flags, the DAG).

stream: true sends server-sent events in OpenAI's chunk format: a first chunk with the role,
one chunk per LLM call while the answer is computed (choices empty, `logicroute.progress` set:
the logic route's steps), the answer's text in pieces, a last chunk with finish_reason and the
`logicroute` object, a usage chunk when stream_options.include_usage asks, then [DONE]. An error
after the stream started is sent as an `error` event, which the OpenAI client raises.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator

from starlette.requests import Request  # at module level: FastAPI resolves a handler's annotations here

from engine.core.routes import ROUTE_CHOICES
from engine.face.serve.errors import BadRequest, NotFound, error_body, kind_of
from engine.face.serve.payloads import answer_json
from engine.face.serve.schemas import ChatBody
from engine.face.serve.service import AnswerService, QueryOptions

MODEL_PREFIX = "logicroute-"
MODEL_ROUTES = {f"{MODEL_PREFIX}{r}": r for r in ROUTE_CHOICES}
OWNER = "logicroute"
_PIECES = re.compile(r"\S+\s*|\s+")  # words with their trailing space: streamed text joins back exactly
log = logging.getLogger("logicroute.serve")


def models_body(created: int) -> dict:
    return {
        "object": "list",
        "data": [{"id": m, "object": "model", "created": created, "owned_by": OWNER} for m in MODEL_ROUTES],
    }


def route_of_model(model: str) -> str:
    if model not in MODEL_ROUTES:
        raise NotFound(f"unknown model {model!r}: choose one of {', '.join(MODEL_ROUTES)} (GET /v1/models)")
    return MODEL_ROUTES[model]


def question_of(body: ChatBody) -> str:
    """The last user message's text (a list of content parts: its text parts joined)."""
    for m in reversed(body.messages):
        if m.role != "user":
            continue
        if isinstance(m.content, str):
            return m.content
        if isinstance(m.content, list):
            parts = [p.get("text", "") for p in m.content if isinstance(p, dict) and p.get("type") == "text"]
            return " ".join(p for p in parts if p)
        break
    raise BadRequest("no user message with text content: the last user message is the question")


def options_of(body: ChatBody) -> QueryOptions:
    extra = body.logicroute
    return QueryOptions(
        route=route_of_model(body.model),
        style=extra.style if extra else None,
        escalate=extra.escalate if extra else None,
        limits=extra.budget.model_dump(exclude_none=True) if extra and extra.budget else None,
    )


def usage_body(ans) -> dict:
    u = ans.usage
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens, "total_tokens": u.total_tokens}


def completion_body(ans, model: str) -> dict:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": ans.text},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": usage_body(ans),
        "logicroute": answer_json(ans),
    }


class ChunkWriter:
    """The chat.completion.chunk events of one stream (one id, one created time)."""

    def __init__(self, model: str):
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model

    def event(self, choices: list, **extra) -> str:
        body = {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model}
        return sse({**body, "choices": choices, **extra})

    def delta(self, delta: dict, finish_reason: str | None = None, **extra) -> str:
        return self.event([{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}], **extra)


def sse(data: dict) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


async def stream_answer(
    job: asyncio.Future, progress: asyncio.Queue, model: str, include_usage: bool, on_error
) -> AsyncIterator[str]:
    """The events of a streamed answer: `job` is the running answer, `progress` receives its
    progress events (from the answering thread, through the event loop)."""
    out = ChunkWriter(model)
    yield out.delta({"role": "assistant", "content": ""})
    while not job.done():
        getter = asyncio.ensure_future(progress.get())
        await asyncio.wait({job, getter}, return_when=asyncio.FIRST_COMPLETED)
        if getter.done():
            yield out.event([], logicroute={"progress": getter.result()})
        else:
            getter.cancel()
    while not progress.empty():  # what the thread reported just before it finished
        yield out.event([], logicroute={"progress": progress.get_nowait()})
    exc = job.exception()
    if exc is not None:
        on_error(exc)
        yield sse(error_body(exc) | {"status": kind_of(exc).status})
        return
    ans = job.result()
    for piece in _PIECES.findall(ans.text):
        yield out.delta({"content": piece})
    yield out.delta({}, "stop", logicroute=answer_json(ans))
    if include_usage:
        yield out.event([], usage=usage_body(ans))
    yield "data: [DONE]\n\n"


def register(app, service: AnswerService, start_answer, on_error) -> None:
    """Add the endpoints to `app`. start_answer(question, options, sink, receive) admits a request
    (or raises ServerBusy at once) and returns the future of its Answer (engine.face.serve.app);
    on_error(exc) books a failure that happens after a stream started."""
    from fastapi.responses import StreamingResponse

    started = int(time.time())

    @app.get("/v1/models")
    async def list_models() -> dict:
        return models_body(started)

    @app.get("/v1/models/{model}")
    async def get_model(model: str) -> dict:
        route_of_model(model)
        return {"id": model, "object": "model", "created": started, "owned_by": OWNER}

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatBody, request: Request):
        question, options = question_of(body), options_of(body)
        if not body.stream:
            return completion_body(await start_answer(question, options, None, request.receive), body.model)
        loop = asyncio.get_running_loop()
        progress: asyncio.Queue = asyncio.Queue()

        def sink(event: dict) -> None:  # called on the answering thread
            loop.call_soon_threadsafe(progress.put_nowait, event)

        # admitted before the response starts: a full queue is still a 503, not an error event
        job = start_answer(question, options, sink, request.receive)
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        events = stream_answer(job, progress, body.model, include_usage, on_error)
        return StreamingResponse(events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
