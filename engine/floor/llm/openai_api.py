"""The remote backend: any OpenAI-compatible chat endpoint (OpenAI, vLLM, Ollama, llama.cpp server).

The `openai` client is made on the first call, with its own retries off: we retry transient
failures here (backoff + jitter) so the sleeps are ours to test and the final error is one
clear line. Transient: 429, 5xx, timeouts, connection errors, a body that is not a chat
completion (an HTML error page, truncated JSON) and an empty completion (never an answer).

Bounds on waiting for a bad endpoint: the timeout per try and the retries (LLMSettings), the
answer's deadline (engine.floor.llm.base.answer_scope), and a circuit breaker: after an endpoint
failed every try, calls fail fast for the rest of the answer and, on this object, for
`cooldown` seconds. The timeout and the deadline bound the whole try by the wall clock, body
included (engine.floor.llm.http_deadline): an endpoint that trickles its reply is cut like one that
hangs. A try the answer's deadline cut is a DeadlineError: the caller's limit, not the
endpoint's failure, so it opens no breaker.

Structured calls ask for the schema as the response format. A server that refuses it (an
error naming the format: engine.floor.llm.response_format) is asked again at once in JSON mode with
the schema in the system message, and if it refuses that too with the schema in the prompt
only; the completion says which (Completion.structured_via, flagged by call_llm). The object
remembers the way that worked, so an endpoint refuses one request per process, not per call;
a refusal from an endpoint that took the schema before is about that schema, and downgrades
that call only.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from engine.floor.base.errors import DeadlineError, LLMError
from engine.floor.base.types import Completion
from engine.floor.llm.base import CallWindow, LLMSpec, open_call, record_failure
from engine.floor.llm.control_tokens import neutralise_messages
from engine.floor.llm.response_format import LADDER, refuses_format, request
from engine.floor.llm.structured import chat_structured
from engine.floor.llm.urls import check_base_url, redact

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_TIMEOUT = 60.0
DEFAULT_RETRIES = 4
# Long enough that the rest of an answer (or the next few answers) skip a dead endpoint,
# short enough that a restarted server is used again without restarting the process.
DEFAULT_COOLDOWN = 30.0


class _BadReply(Exception):
    """An HTTP 200 that carries no usable completion: retried like a transient error."""


class _FormatRefused(Exception):
    """The endpoint refused the request's response format: ask again a weaker way, at once."""


class OpenAILLM:
    """timeout: seconds per try, by the wall clock, the whole reply included; max_retries: extra
    tries after the first on transient failures (so 4 means up to 5 tries); None takes 60 s and 4.
    Other errors (auth, 4xx) fail at once."""

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        *,
        client: Any = None,
        sleep: Callable[[float], None] = time.sleep,
        base_delay: float = 1.0,
        max_delay: float = 30.0,
        cooldown: float = DEFAULT_COOLDOWN,
    ) -> None:
        self.model = model
        self.base_url = base_url or None
        if self.base_url:  # a typo fails here, in one line, not after every retry
            check_base_url(self.base_url, "the base URL")
        self.api_key = api_key or os.environ.get("LOGICROUTE_API_KEY") or os.environ.get("OPENAI_API_KEY")
        self.timeout = DEFAULT_TIMEOUT if timeout is None else timeout
        self.max_retries = DEFAULT_RETRIES if max_retries is None else max_retries
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.cooldown = cooldown
        self._sleep = sleep
        self._client = client
        self._client_lock = threading.Lock()
        self._down: tuple[float, str] | None = None  # (until when, why): the breaker is open
        self._format = LADDER[0]  # how structured calls ask first (engine.floor.llm.response_format)
        self._formats_taken: set[str] = set()  # the ways this endpoint answered a structured call
        # the endpoint is part of the name, so cache keys of two servers never collide; its
        # credentials are not: the name is shown in errors, traces, cards and /health
        self.name = redact(str(LLMSpec("openai", model, self.base_url)))

    @property
    def url(self) -> str:
        """The endpoint as messages show it: without its credentials."""
        return redact(self.base_url or DEFAULT_BASE_URL)

    def connect(self) -> None:
        """Build the client now, with no call (`serve` does it before it listens)."""
        self._get_client()

    def _get_client(self) -> Any:
        with self._client_lock:
            if self._client is None:
                import openai

                from engine.floor.llm.http_deadline import shared_client

                key = self.api_key
                if not key:
                    if not self.base_url:
                        raise LLMError(f"no API key for {self.name}: set LOGICROUTE_API_KEY or OPENAI_API_KEY")
                    key = "none"  # self-hosted servers (vLLM, Ollama, llama.cpp) ignore it
                self._client = openai.OpenAI(
                    api_key=key,
                    base_url=self.base_url,
                    timeout=self.timeout,
                    max_retries=0,
                    http_client=shared_client(),
                )
            return self._client

    def chat(
        self, messages: list[dict], *, schema: dict | None = None, max_tokens: int = 256, temperature: float = 0.0
    ) -> Completion:
        self._fail_fast_if_down()
        window = open_call(self.name)
        kwargs: dict[str, Any] = dict(model=self.model, temperature=temperature, max_tokens=max_tokens)

        def send(msgs: list[dict], response_format: dict | None = None) -> Completion:
            t0 = time.perf_counter()
            extra = {} if response_format is None else {"response_format": response_format}
            # the server renders its chat template over these: no text may carry its control tokens
            text, usage, finish_reason = self._create(window, messages=neutralise_messages(msgs), **kwargs, **extra)
            return Completion(
                text=text,
                prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                seconds=time.perf_counter() - t0,
                model=self.name,
                finish_reason=finish_reason,
            )

        if schema is None:
            return send(messages)
        return chat_structured(lambda msgs: self._send_structured(send, msgs, schema), messages, schema)

    def _send_structured(self, send: Callable[..., Completion], messages: list[dict], schema: dict) -> Completion:
        """One structured request, in the strongest way this endpoint is known or hoped to take,
        and weaker ways at once while it refuses them."""
        first = self._format
        for mode in LADDER[LADDER.index(first) :]:
            msgs, response_format = request(mode, messages, schema)
            try:
                c = send(msgs, response_format)
            except _FormatRefused:
                continue
            if mode != first and first not in self._formats_taken:
                self._format = mode  # it never took the stronger way: later calls start here
            self._formats_taken.add(mode)
            if mode != LADDER[0]:
                c.structured_via = mode
            return c
        # the last way sends no response format, so nothing refuses it as one
        raise LLMError(f"{self.url} refused every way of asking for JSON")

    def _fail_fast_if_down(self) -> None:
        """The circuit breaker: an endpoint that failed every try is not waited on again
        until the cool-down ends."""
        down = self._down
        if down is not None:
            left = down[0] - time.monotonic()
            if left > 0:
                raise LLMError(f"{down[1]}; not tried again for another {left:.0f}s")

    def _create(self, window: CallWindow, **kwargs: Any) -> tuple[str, Any, str | None]:
        """One completion's text, usage and finish reason, with retries on transient failures; LLMError otherwise."""
        import openai

        from engine.floor.llm.http_deadline import total_deadline

        client = self._get_client()
        tries = self.max_retries + 1
        for attempt in range(tries):
            start = time.perf_counter()
            # the try ends at its own timeout or the answer's deadline, whichever comes first
            cut = window.end is not None and window.end < start + self.timeout
            end = window.end if cut else start + self.timeout
            if end <= start:  # no time left to try with: cut as a try would be
                raise self._cut(window)
            try:
                with total_deadline(end):
                    return _reply(client.chat.completions.create(timeout=end - start, **kwargs))
            except openai.APITimeoutError as e:
                if cut:  # the answer's own deadline: says nothing about the endpoint
                    raise self._cut(window) from e
                last: Exception = e
            except openai.APIStatusError as e:
                if self._refuses_format(e, kwargs.get("response_format")):
                    raise _FormatRefused(_short(e)) from e
                if e.status_code < 500 and not isinstance(e, openai.RateLimitError):
                    raise LLMError(redact(self._rejected(e))) from e
                last = e  # 429 and 5xx: transient
            except (openai.APIConnectionError, _BadReply) as e:
                last = e
            except (json.JSONDecodeError, UnicodeDecodeError) as e:  # an HTTP 200 body the client could not decode
                last = _BadReply(f"malformed response body ({_short(e)})")
            except openai.OpenAIError as e:
                raise LLMError(redact(f"{self.name} failed: {e}")) from e
            if attempt + 1 < tries:
                delay = self._delay(attempt, last)
                if not window.leaves(delay):  # the deadline, not the endpoint, ends the tries
                    message = f"{self._gave_up(last, attempt + 1)}; {window.stop_words()} before another try"
                    raise DeadlineError(message) from last
                self._sleep(delay)
        message = self._gave_up(last, tries)
        self._down = (time.monotonic() + self.cooldown, message)
        raise self._stop(message) from last

    def _refuses_format(self, e: Any, response_format: dict | None) -> bool:
        if response_format is None:
            return False
        try:
            body = f"{e} {e.response.text}"
        except Exception:  # no response, or its body was never read: the message alone
            body = str(e)
        return refuses_format(e.status_code, body, response_format["type"] in self._formats_taken)

    def _cut(self, window: CallWindow) -> DeadlineError:
        return DeadlineError(f"{self.url} ({self.model}): {window.stop_words()} before a reply")

    def _stop(self, message: str) -> LLMError:
        record_failure(self.name, message)  # the rest of this answer fails fast
        return LLMError(redact(message))

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
        elif isinstance(e, _BadReply):
            why = str(e)
        elif isinstance(e, openai.APIConnectionError):
            cause = e.__cause__ or e.__context__
            why = _short(cause) if cause else "connection error"
            return f"cannot reach {self.url}: {why} after {_tries(tries)}"
        elif isinstance(e, openai.RateLimitError):
            why = f"rate limited (HTTP 429): {_short(e)}"
        else:
            why = f"server error (HTTP {getattr(e, 'status_code', '?')}): {_short(e)}"
        return f"{self.url} ({self.model}): {why} after {_tries(tries)}"


def _tries(n: int) -> str:
    return "1 try" if n == 1 else f"{n} tries"


def _reply(r: Any) -> tuple[str, Any, str | None]:
    """The completion's text, usage and finish reason; _BadReply when the body is not a chat completion
    (the client returns a str for a non-JSON content type) or its text is blank."""
    choices = getattr(r, "choices", None)
    message = getattr(choices[0], "message", None) if isinstance(choices, list) and choices else None
    text = getattr(message, "content", None)
    if not isinstance(text, str):
        got = _short(r, 80) if isinstance(r, str) else "no choices[0].message.content"
        raise _BadReply(f"malformed response body ({got})")
    if not text.strip():
        raise _BadReply("empty completion")
    reason = getattr(choices[0], "finish_reason", None)
    return text, getattr(r, "usage", None), reason if isinstance(reason, str) else None


def _retry_after(e: Exception) -> float | None:
    response = getattr(e, "response", None)
    try:
        return float(response.headers.get("retry-after"))  # type: ignore[union-attr]
    except (AttributeError, TypeError, ValueError):
        return None


def _short(e: object, limit: int = 200) -> str:
    s = " ".join(str(e).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"
