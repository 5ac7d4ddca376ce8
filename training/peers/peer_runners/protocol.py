"""The runner side of the peer protocol: JSON lines over the runner's stdin and stdout.

The harness sends one command at a time, {"op": NAME, ...}; the runner answers it with
{"result": ...} or {"error": "..."}. While a command runs, the runner asks the harness for
what every system shares: {"rpc": "llm", "messages": [...], "max_tokens": N, "json": bool} is
answered {"text": "..."}, {"rpc": "embed", "texts": [...]} is answered {"vectors": [[...]]},
either of them {"error": "..."} when it failed. So the peer reaches the same LLM (the harness's
engine.floor.llm, through its call cache) and the same embedder as logicroute, and the harness counts
every call and token.

Standard library only: this file runs under the peers' Python."""

from __future__ import annotations

import json
import os
import sys
import threading
import traceback
from collections.abc import Callable


class RemoteError(RuntimeError):
    """The harness could not serve an LLM or embedding request."""


class Channel:
    def __init__(self) -> None:
        # The protocol keeps the real stdout; whatever the peer prints goes to stderr (the log).
        self._out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        self._in = sys.stdin
        self._lock = threading.Lock()  # one request in flight: a reply is the next line read

    def send(self, obj: dict) -> None:
        self._out.write(json.dumps(obj, ensure_ascii=False) + "\n")
        self._out.flush()

    def recv(self) -> dict | None:
        line = self._in.readline()
        return json.loads(line) if line else None

    def request(self, obj: dict) -> dict:
        with self._lock:
            self.send(obj)
            reply = self.recv()
        if reply is None:
            raise RemoteError("the harness closed the channel")
        if reply.get("error"):
            raise RemoteError(reply["error"])
        return reply

    def llm(self, messages: list[dict], max_tokens: int, json_mode: bool = False) -> str:
        return self.request({"rpc": "llm", "messages": messages, "max_tokens": max_tokens, "json": json_mode})["text"]

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self.request({"rpc": "embed", "texts": list(texts)})["vectors"]


def serve(channel: Channel, handlers: dict[str, Callable[..., object]]) -> None:
    """Answer commands until "quit" or the end of stdin; a handler's exception is the command's
    error (its last line), and the runner goes on."""
    while True:
        cmd = channel.recv()
        if cmd is None or cmd.get("op") == "quit":
            return
        op = cmd.pop("op", None)
        if op not in handlers:
            channel.send({"error": f"unknown op {op!r}"})
            continue
        try:
            channel.send({"result": handlers[op](**cmd)})
        except Exception as e:  # every failure goes back to the harness as the command's error
            traceback.print_exc(file=sys.stderr)
            channel.send({"error": f"{type(e).__name__}: {e}"[:2000]})


def messages_of(prompt: str, system_prompt: str | None, history: list[dict] | None) -> list[dict]:
    msgs = [{"role": "system", "content": system_prompt}] if system_prompt else []
    msgs += [{"role": m["role"], "content": m["content"]} for m in history or []]
    return msgs + [{"role": "user", "content": prompt}]
