"""Request bodies, validated by pydantic before anything runs (a bad body is a 400 with the
field's name, never a half-done request). Sizes are capped twice: the body in bytes by the
guard middleware (engine.face.serve.app), the fields here."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.core.routes import ROUTE_CHOICES

Route = Literal[ROUTE_CHOICES]  # "auto" or a route of the registry
Style = Literal["reader", "short"]
MAX_TEXT_CHARS = 4000  # a question or chat message (check_question applies the word limit)
MAX_MESSAGES = 64
MAX_DOCUMENTS = 1000


class BudgetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_llm_calls: int | None = Field(None, ge=1, le=1000)
    max_prompt_tokens: int | None = Field(None, ge=1)
    max_seconds: float | None = Field(None, gt=0)
    threshold: float | None = Field(None, ge=0, le=1, description="P(logic) at or above which a question goes to logic")


class QueryBody(BaseModel):
    """POST /query: RoutedRAG.answer's options."""

    model_config = ConfigDict(extra="forbid")

    question: str = Field(..., max_length=MAX_TEXT_CHARS)
    route: Route = "auto"
    style: Style | None = None
    escalate: bool | None = None
    budget: BudgetBody | None = None
    trace: bool = Field(True, description="include the trace (the logic route's DAG, the LLM calls)")


class RouteBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: str = Field(..., max_length=MAX_TEXT_CHARS)
    budget: BudgetBody | None = None


class DocumentBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(None, min_length=1, max_length=512, description="default: a hash of title and text")
    title: str = Field("", max_length=1000)
    text: str = Field(..., min_length=1)
    format: Literal["text", "markdown"] = "text"
    source: str | None = Field(None, max_length=2000, description="a path or URL shown with the sources")


class DocumentsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    documents: list[DocumentBody] = Field(..., min_length=1, max_length=MAX_DOCUMENTS)


class ChatMessage(BaseModel):
    # OpenAI clients send more fields (name, tool calls): they are allowed and not used
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatBody(BaseModel):
    """POST /v1/chat/completions. The sampling fields OpenAI clients send (temperature, top_p,
    max_tokens, ...) are accepted and not used: the routes call the LLM at temperature 0 with
    their own token limits. `logicroute` carries the native options (style, escalate, budget)."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[ChatMessage] = Field(..., min_length=1, max_length=MAX_MESSAGES)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1, le=1)
    logicroute: QueryOptionsBody | None = None


class QueryOptionsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    style: Style | None = None
    escalate: bool | None = None
    budget: BudgetBody | None = None


ChatBody.model_rebuild()
