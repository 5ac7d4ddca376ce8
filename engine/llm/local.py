"""The local backend: a GGUF model run in process by llama-cpp-python (CPU).

The model loads on the first chat, once per process per (file, context size), and every call
on it holds that model's lock: a llama.cpp context is not thread-safe.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from engine.base.errors import LLMError
from engine.base.types import Completion
from engine.llm.base import chat_structured, open_call

_REGISTRY: dict[tuple[str, int], tuple[Any, threading.Lock]] = {}
_REGISTRY_LOCK = threading.Lock()


def _shared_llama(path: Path, n_ctx: int, n_threads: int) -> tuple[Any, threading.Lock]:
    key = (str(path), n_ctx)
    with _REGISTRY_LOCK:
        if key not in _REGISTRY:
            try:
                from llama_cpp import Llama
            except ImportError as e:
                raise LLMError(
                    "the local LLM needs llama-cpp-python: pip install "
                    "'logicroute[local]' (or `make install` in a checkout)"
                ) from e
            try:
                llama = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, seed=0, verbose=False)
            except Exception as e:  # llama.cpp reports load failures as ValueError/RuntimeError
                raise LLMError(f"cannot load local model {path}: {e}") from e
            _REGISTRY[key] = (llama, threading.Lock())
        return _REGISTRY[key]


class LocalLLM:
    """`model` is a name from engine.llm.model_files.MODELS or a path to a .gguf file."""

    def __init__(self, model: str = "qwen2.5-coder-1.5b", n_ctx: int = 4096, n_threads: int | None = None) -> None:
        self.model = model
        self.n_ctx = n_ctx
        self.n_threads = n_threads or os.cpu_count() or 1
        self.name = f"local:{model}"

    def _path(self) -> Path:
        if self.model.endswith(".gguf"):
            p = Path(self.model).expanduser()
            if not p.is_file():
                raise LLMError(f"local model file not found: {p}")
            return p
        from engine.llm.model_files import model_path

        return model_path(self.model)

    def chat(
        self, messages: list[dict], *, schema: dict | None = None, max_tokens: int = 256, temperature: float = 0.0
    ) -> Completion:
        open_call(self.name)  # an in-process call cannot be cut short: it only must not start late
        llama, lock = _shared_llama(self._path(), self.n_ctx, self.n_threads)

        def send(msgs: list[dict]) -> Completion:
            kwargs: dict[str, Any] = dict(messages=msgs, temperature=temperature, max_tokens=max_tokens, seed=0)
            if schema is not None:
                # llama.cpp turns the schema into a grammar: decoding cannot leave it
                kwargs["response_format"] = {"type": "json_object", "schema": schema}
            with lock:
                t0 = time.perf_counter()
                try:
                    r = llama.create_chat_completion(**kwargs)
                except ValueError as e:
                    if "context window" in str(e):  # "Requested tokens (N) exceed context window of M"
                        raise LLMError(
                            f"prompt too long for {self.name}: {e}; shorten the question or the retrieved context"
                        ) from e
                    raise LLMError(f"{self.name} failed: {e}") from e
                except RuntimeError as e:
                    raise LLMError(f"{self.name} failed: {e}") from e
                seconds = time.perf_counter() - t0
            usage = r.get("usage") or {}
            return Completion(
                text=r["choices"][0]["message"].get("content") or "",
                prompt_tokens=int(usage.get("prompt_tokens", 0)),
                completion_tokens=int(usage.get("completion_tokens", 0)),
                seconds=seconds,
                model=self.name,
            )

        if schema is None:
            return send(messages)
        return chat_structured(send, messages, schema)
