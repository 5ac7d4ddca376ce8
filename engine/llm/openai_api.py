"""The remote backend: any OpenAI-compatible chat endpoint (OpenAI, vLLM, Ollama, llama.cpp server).

The `openai` client is made on the first call, with its own retries off: we retry transient
failures here (backoff + jitter) so the sleeps are ours to test and the final error is one
clear line.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from engine.base.errors import LLMError
from engine.base.types import Completion
from engine.llm.base import LLMSpec, chat_structured

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAILLM:
    """max_retries: extra tries after the first on 429, 5xx, timeouts and connection errors
    (so 4 means up to 5 tries); other errors (auth, 4xx) fail at once."""

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60,
        max_retries: int = 4,
        *,
        client: Any = None,
        sleep: Callable[[float], None] = time.sleep,
        base_delay: float = 1.0,
        max_delay: float = 30.0,
    ) -> None:
        self.model = model
        self.base_url = base_url or os.environ.get("LOGICROUTE_BASE_URL") or None
        self.api_key = api_key or os.environ.get("LOGICROUTE_API_KEY") or os.environ.get("OPENAI_API_KEY")
        self.timeout = timeout
        self.max_retries = max_retries
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._sleep = sleep
        self._client = client
        self._client_lock = threading.Lock()
        # the endpoint is part of the name, so cache keys of two servers never collide
        self.name = str(LLMSpec("openai", model, self.base_url))

    @property
    def url(self) -> str:
        return self.base_url or DEFAULT_BASE_URL

    def _get_client(self) -> Any:
        with self._client_lock:
            if self._client is None:
                import openai

                key = self.api_key
                if not key:
                    if not self.base_url:
                        raise LLMError(f"no API key for {self.name}: set LOGICROUTE_API_KEY or OPENAI_API_KEY")
                    key = "none"  # self-hosted servers (vLLM, Ollama, llama.cpp) ignore it
                self._client = openai.OpenAI(api_key=key, base_url=self.base_url, timeout=self.timeout, max_retries=0)
            return self._client

    def chat(
        self, messages: list[dict], *, schema: dict | None = None, max_tokens: int = 256, temperature: float = 0.0
    ) -> Completion:
        kwargs: dict[str, Any] = dict(model=self.model, temperature=temperature, max_tokens=max_tokens)
        if schema is not None:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": schema, "strict": False},
            }

        def send(msgs: list[dict]) -> Completion:
            t0 = time.perf_counter()
            r = self._create(messages=msgs, **kwargs)
            usage = getattr(r, "usage", None)
            return Completion(
                text=r.choices[0].message.content or "",
                prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                seconds=time.perf_counter() - t0,
                model=self.name,
            )

        if schema is None:
            return send(messages)
        return chat_structured(send, messages, schema)

    def _create(self, **kwargs: Any) -> Any:
        """One completion with retries on transient failures; LLMError otherwise."""
        import openai

        client = self._get_client()
        tries = self.max_retries + 1
        for attempt in range(tries):
            try:
                return client.chat.completions.create(**kwargs)
            except (openai.RateLimitError, openai.APIConnectionError, openai.InternalServerError) as e:
                last: Exception = e
            except openai.APIStatusError as e:
                if e.status_code < 500:
                    raise LLMError(self._rejected(e)) from e
                last = e  # a 5xx the client did not map to InternalServerError
            except openai.OpenAIError as e:
                raise LLMError(f"{self.name} failed: {e}") from e
            if attempt + 1 < tries:
                self._sleep(self._delay(attempt, last))
        raise LLMError(self._gave_up(last, tries)) from last

    def _delay(self, attempt: int, e: Exception) -> float:
        d = min(self.max_delay, self.base_delay * 2**attempt)
        d = d / 2 + random.uniform(0, d / 2)  # jitter: clients that failed together retry apart
        retry_after = _retry_after(e)
        if retry_after is not None:  # a 429 that says when to come back
            d = max(d, min(retry_after, self.max_delay))
        return d

    def _rejected(self, e: Any) -> str:
        code = e.status_code
        if code in (401, 403):
            return (
                f"{self.url} refused the credentials for {self.model} (HTTP {code}): check "
                "LOGICROUTE_API_KEY / OPENAI_API_KEY"
            )
        if code == 404:
            return f"{self.url}: model {self.model!r} or endpoint not found (HTTP 404): {_short(e)}"
        return f"{self.url} rejected the request for {self.model} (HTTP {code}): {_short(e)}"

    def _gave_up(self, e: Exception, tries: int) -> str:
        import openai

        if isinstance(e, openai.APITimeoutError):
            why = f"no answer within {self.timeout:g}s"
        elif isinstance(e, openai.APIConnectionError):
            cause = e.__cause__ or e.__context__
            why = _short(cause) if cause else "connection error"
            return f"cannot reach {self.url}: {why} after {tries} tries"
        elif isinstance(e, openai.RateLimitError):
            why = f"rate limited (HTTP 429): {_short(e)}"
        else:
            why = f"server error (HTTP {getattr(e, 'status_code', '?')}): {_short(e)}"
        return f"{self.url} ({self.model}): {why} after {tries} tries"


def _retry_after(e: Exception) -> float | None:
    response = getattr(e, "response", None)
    try:
        return float(response.headers.get("retry-after"))  # type: ignore[union-attr]
    except (AttributeError, TypeError, ValueError):
        return None


def _short(e: object, limit: int = 200) -> str:
    s = " ".join(str(e).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"
