"""A scripted fake at the LLM interface, for control-flow tests (no model needed)."""

from __future__ import annotations

import json
from collections.abc import Callable

from engine.base.types import Completion
from engine.llm.base import chat_structured

Reply = str | dict | list | Exception | Callable[[list[dict]], "str | dict | list"]


class ScriptedLLM:
    """Returns scripted replies in order, or by the first rule whose substring occurs in the
    last user message. dict/list replies are JSON-encoded; an Exception reply is raised.
    Schema calls go through engine.llm.base.chat_structured, as every real backend does."""

    name = "fake:scripted"

    def __init__(self, replies: list[Reply] | None = None, rules: dict[str, Reply] | None = None):
        self.replies = list(replies or [])
        self.rules = dict(rules or {})
        self.calls: list[dict] = []

    def _next(self, messages: list[dict]) -> str:
        last = messages[-1]["content"]
        reply: Reply | None = None
        for needle, r in self.rules.items():
            if needle in last:
                reply = r
                break
        if reply is None:
            if not self.replies:
                raise AssertionError(f"ScriptedLLM ran out of replies at: {last[:200]!r}")
            reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        if callable(reply):
            reply = reply(messages)
        return reply if isinstance(reply, str) else json.dumps(reply)

    def chat(self, messages, *, schema=None, max_tokens=256, temperature=0.0) -> Completion:
        def send(msgs: list[dict]) -> Completion:
            self.calls.append({"messages": msgs, "schema": schema})
            text = self._next(msgs)
            return Completion(
                text=text,
                prompt_tokens=sum(len(m["content"].split()) for m in msgs),
                completion_tokens=len(text.split()),
                seconds=0.0,
                model=self.name,
            )

        # Structured output goes through the backends' own code path: same retry prompt, same token sums.
        return send(messages) if schema is None else chat_structured(send, messages, schema)
