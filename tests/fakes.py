"""A scripted fake at the LLM interface, for control-flow tests (no model needed)."""
from __future__ import annotations

import json
from typing import Callable

import jsonschema

from engine.errors import StructuredOutputError
from engine.types import Completion

Reply = str | dict | list | Exception | Callable[[list[dict]], "str | dict | list"]


class ScriptedLLM:
    """Returns scripted replies in order, or by the first rule whose substring occurs in the
    last user message. dict/list replies are JSON-encoded; an Exception reply is raised.
    Schema calls validate like a real backend: one retry, then StructuredOutputError."""

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
        attempts = []
        for _ in range(2 if schema else 1):
            self.calls.append({"messages": messages, "schema": schema})
            text = self._next(messages)
            c = Completion(text=text, prompt_tokens=sum(len(m["content"].split()) for m in messages),
                           completion_tokens=len(text.split()), seconds=0.0, model=self.name)
            if schema is None:
                return c
            attempts.append(c)
            try:
                c.data = json.loads(text)
                jsonschema.validate(c.data, schema)
                return c
            except (ValueError, jsonschema.ValidationError) as e:
                messages = messages + [{"role": "assistant", "content": text},
                                       {"role": "user", "content": f"Invalid JSON ({e}). Reply again with valid JSON only."}]
        raise StructuredOutputError("output failed schema validation twice", attempts)
