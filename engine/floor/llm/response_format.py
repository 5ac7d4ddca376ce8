"""The ways a structured call can ask an OpenAI-compatible endpoint for JSON, strongest first,
and how an endpoint's refusal of one is told from any other error (engine/floor/llm/openai_api.py
walks down the ladder).

    json_schema  the schema as the response format: the server constrains decoding to it
                 (OpenAI, vLLM, recent llama.cpp servers)
    json_object  JSON mode, the schema stated in the system message: servers that take only
                 "text" or "json_object" (llama-cpp-python's server, older llama.cpp, some vLLM
                 and LM Studio versions)
    prompt       no response format, the schema in the system message: validation and its one
                 retry (engine.floor.llm.structured) catch what the model gets wrong
"""

from __future__ import annotations

import re

from engine.floor.prompts.structured import with_schema_instruction

LADDER = ("json_schema", "json_object", "prompt")

# What a refusal of the response format names: llama-cpp-python's server answers a json_schema
# request with HTTP 500 "... 'loc': ('body', 'response_format', 'type'), 'msg': "Input should be
# 'text' or 'json_object'" ...", llama.cpp's own server with 'response_format type must be one of
# "text" or "json_object", but got: json_schema', vLLM and LM Studio with 400s naming the field.
_NAMES_FORMAT = re.compile(r"response[_ ]?format|json[_ ]?schema|json[_ ]?object|\bschema\b", re.IGNORECASE)


def request(mode: str, messages: list[dict], schema: dict) -> tuple[list[dict], dict | None]:
    """The messages and the response_format (None: none sent) a structured call sends in `mode`."""
    if mode == "json_schema":
        return messages, {"type": "json_schema", "json_schema": {"name": "output", "schema": schema, "strict": False}}
    if mode == "json_object":
        return with_schema_instruction(messages, schema), {"type": "json_object"}
    if mode == "prompt":
        return with_schema_instruction(messages, schema), None
    raise ValueError(f"unknown response format mode {mode!r}")


def refuses_format(status: int, body: str, taken_before: bool) -> bool:
    """Whether an HTTP error to a request with a response format is about that format: a 4xx or
    5xx whose body names the response format or a schema, or a bare 400 from an endpoint that
    never took this format (a server that cannot parse the field often says no more). A 408 or
    429 is about timing, never the format; an overloaded 500 names no format: neither
    downgrades, they take the transient-error path."""
    if status < 400 or status in (408, 429):
        return False
    return bool(_NAMES_FORMAT.search(body)) or (status == 400 and not taken_before)
