"""Structured output against OpenAI-compatible servers that refuse the schema as a response
format: JSON mode with the schema in the system message, then the schema in the prompt only,
remembered per endpoint, flagged in the trace; any other server error keeps its own path.
A real openai client against a local HTTP server that answers by the request's response_format."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest

from engine.floor.base.errors import LLMError
from engine.floor.base.trace import Trace
from engine.floor.base.types import Usage
from engine.floor.llm.base import call_llm
from engine.floor.llm.cache import CachedLLM
from engine.floor.llm.response_format import refuses_format
from engine.floor.prompts.structured import schema_instruction
from tests.engine.fake_endpoint import ThreadedEndpoint, completion_body, send_body
from tests.samples import MSGS, SCHEMA

pytestmark = pytest.mark.usefixtures("isolated_llm_env")  # no user cache, no real key or endpoint

# llama-cpp-python's server (0.3.x) on a json_schema request: its request model takes only "text"
# or "json_object", and its route handler turns the validation error into an HTTP 500.
LLAMA_CPP_REFUSAL = (
    500,
    {
        "error": {
            "message": "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
            "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}]",
            "type": "internal_server_error",
            "param": None,
            "code": None,
        }
    },
)
OVERLOADED = (500, {"error": {"message": "the server is overloaded, try again later", "type": "server_error"}})


class FormatServer(ThreadedEndpoint):
    """/v1/chat/completions on 127.0.0.1 answering by the request's response_format type ("json_schema",
    "json_object", or None for none): each type takes its next scripted answer (the last repeats),
    a completion text (HTTP 200) or (status, JSON error body). `requests` keeps every request body."""

    def __init__(self, answers: dict[str | None, list]):
        self.answers = {k: list(v) for k, v in answers.items()}
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(request)
                script = server.answers[(request.get("response_format") or {}).get("type")]
                answer = script.pop(0) if len(script) > 1 else script[0]
                status, body = (200, completion_body(answer)) if isinstance(answer, str) else answer
                send_body(self, status, body if isinstance(body, bytes) else json.dumps(body).encode())

            def log_message(self, *a):
                pass

        self.serve(Handler)

    @property
    def formats(self) -> list[str | None]:
        """The response_format type of each request, in order."""
        return [(r.get("response_format") or {}).get("type") for r in self.requests]


def ask(llm, purpose: str = "decompose"):
    usage, trace = Usage(), Trace()
    c = call_llm(llm, MSGS, purpose=purpose, usage=usage, trace=trace, schema=SCHEMA)
    return c, trace


def test_a_server_that_refuses_json_schema_is_asked_in_json_mode_and_only_once_per_process():
    with FormatServer({"json_schema": [LLAMA_CPP_REFUSAL], "json_object": ['{"answer": 5}']}) as server:
        llm = server.llm()
        c, trace = ask(llm)
        assert c.data == {"answer": 5} and server.formats == ["json_schema", "json_object"]
        assert trace["llm_calls"][0]["structured_via"] == "json_object"
        assert trace["flags"] == [
            "the endpoint refused a JSON schema response format: decompose asked with JSON mode and the schema "
            "in the prompt"
        ]
        # JSON mode alone does not say which object: the schema rides in the system message
        assert server.requests[1]["messages"][0] == {"role": "system", "content": schema_instruction(SCHEMA)}
        assert server.requests[1]["messages"][1:] == MSGS

        c2, trace2 = ask(llm, "step")
        assert c2.data == {"answer": 5} and server.formats == ["json_schema", "json_object", "json_object"]
        assert trace2["llm_calls"][0]["structured_via"] == "json_object" and len(trace2["flags"]) == 1


def test_a_server_that_refuses_both_formats_gets_the_schema_in_the_prompt_and_validation_retries():
    vllm_400 = (400, {"error": {"message": "response_format type json_object is not supported", "code": 400}})
    script = {
        "json_schema": [(400, {"error": {"message": "Unknown field: response_format.json_schema"}})],
        "json_object": [vllm_400],
        None: ['{"answer": "five"}', '{"answer": 5}'],  # the model without a constraint errs once
    }
    with FormatServer(script) as server:
        llm = server.llm()
        c, trace = ask(llm)
        assert c.data == {"answer": 5} and c.attempts == 2  # the ordinary validate-and-retry-once path
        assert server.formats == ["json_schema", "json_object", None, None]
        assert schema_instruction(SCHEMA) in server.requests[2]["messages"][0]["content"]
        assert "does not match the schema at answer" in server.requests[3]["messages"][-1]["content"]
        assert trace["llm_calls"][0]["structured_via"] == "prompt"
        assert "the schema in the prompt only" in trace["flags"][0]

        ask(llm)
        assert server.formats[4:] == [None]  # the endpoint's way is remembered


def test_an_overloaded_500_is_a_transient_error_and_never_downgrades_the_format():
    with FormatServer({"json_schema": [OVERLOADED], "json_object": ['{"answer": 5}']}) as server:
        with pytest.raises(LLMError, match=r"server error \(HTTP 500\).*overloaded.*after 3 tries"):
            server.llm(max_retries=2).chat(MSGS, schema=SCHEMA)
        assert server.formats == ["json_schema"] * 3


def test_an_endpoint_that_took_the_schema_before_downgrades_only_the_call_it_refused():
    grammar_refusal = (500, {"error": {"message": "failed to parse grammar from JSON schema"}})
    script = {"json_schema": ['{"answer": 1}', grammar_refusal, '{"answer": 3}'], "json_object": ['{"answer": 2}']}
    with FormatServer(script) as server:
        llm = server.llm()
        assert [llm.chat(MSGS, schema=SCHEMA).data["answer"] for _ in range(3)] == [1, 2, 3]
        assert server.formats == ["json_schema", "json_schema", "json_object", "json_schema"]


def test_a_bare_400_downgrades_only_before_the_endpoint_took_the_format():
    bare_400 = (400, {"error": {"message": "Bad Request"}})
    with FormatServer({"json_schema": ['{"answer": 1}', bare_400], "json_object": ['{"answer": 2}']}) as server:
        llm = server.llm()
        assert llm.chat(MSGS, schema=SCHEMA).data == {"answer": 1}
        with pytest.raises(LLMError, match=r"rejected the request for m \(HTTP 400\)"):
            llm.chat(MSGS, schema=SCHEMA)  # it took json_schema: this 400 is about something else
        assert server.formats == ["json_schema", "json_schema"]
    with FormatServer({"json_schema": [bare_400], "json_object": ['{"answer": 2}']}) as server:
        assert server.llm().chat(MSGS, schema=SCHEMA).data == {"answer": 2}
        assert server.formats == ["json_schema", "json_object"]


def test_a_cached_rerun_sends_nothing_and_flags_the_way_the_first_run_asked(tmp_path):
    with FormatServer({"json_schema": [LLAMA_CPP_REFUSAL], "json_object": ['{"answer": 5}']}) as server:
        first = ask(CachedLLM(server.llm(), tmp_path / "c.sqlite"))
        again = ask(CachedLLM(server.llm(), tmp_path / "c.sqlite"))  # a new process: a new endpoint object
        assert len(server.requests) == 2
    assert again[0].cached and again[0].data == first[0].data
    assert again[1]["flags"] == first[1]["flags"] and again[1]["llm_calls"][0]["structured_via"] == "json_object"


@pytest.mark.parametrize(
    "status, body, taken_before, refused",
    [
        (500, json.dumps(LLAMA_CPP_REFUSAL[1]), False, True),
        (500, 'response_format type must be one of "text" or "json_object", but got: json_schema', True, True),
        (422, "body.response_format.type: unexpected value", True, True),
        (500, json.dumps(OVERLOADED[1]), False, False),
        (503, "Service Unavailable", False, False),
        (429, "rate limited for response_format requests", False, False),
        (400, "Bad Request", False, True),
        (400, "Bad Request", True, False),
        (404, "model not found", False, False),
    ],
)
def test_a_refusal_of_the_format_is_told_from_other_errors(status, body, taken_before, refused):
    assert refuses_format(status, body, taken_before) is refused
