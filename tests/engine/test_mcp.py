"""`logicroute mcp`, as specs, through the MCP SDK's own client: the tool list shows ask, search,
route and list_documents with their JSON schemas; ask answers with its sources and route, search
and route make no LLM call; the write tools exist only with --allow-writes; an error is a tool
error in one line. The same tools answer in process, over stdio (a subprocess the client starts)
and over streamable HTTP, where serve's key, Host rule and JSON-only bodies guard them. Last, the
real command end to end: a PDF indexed, then asked about over stdio, its page in the sources."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp extra: pip install 'logicroute[mcp]'")

from mcp import Client, StdioServerParameters

from engine.face.serve.mcp_tools import MCP_PATH, READ_TOOLS, WRITE_TOOLS, build_server, http_app
from engine.face.serve.run import ServerThread
from tests.engine.serve_helpers import ANSWER, SIMPLE_QUESTION, SchemaLLM, call, film_service

ROOT = Path(__file__).resolve().parents[2]
KEY = "k" * 24


def run(server, session):
    """`session(client)` with the SDK's client connected to `server` (an MCPServer in process,
    StdioServerParameters, or a transport)."""

    async def go():
        async with Client(server) as client:
            return await session(client)

    return asyncio.run(go())


def content(result) -> dict:
    assert not result.is_error, result.content
    return result.structured_content


@pytest.fixture
def llm():
    return SchemaLLM()


@pytest.fixture
def service(tmp_path, llm, isolated_llm_env):
    return film_service(tmp_path, llm)


def test_the_tool_list_shows_the_four_reading_tools_with_their_json_schemas(service):
    tools = run(build_server(service), lambda c: c.list_tools()).tools
    by_name = {t.name: t for t in tools}
    assert list(by_name) == list(READ_TOOLS)
    ask = by_name["ask"].input_schema
    assert ask["required"] == ["question"]
    assert ask["properties"]["route"]["enum"] == ["auto", "chunk", "summary", "logic"]
    assert by_name["search"].input_schema["properties"]["k"] == {
        "default": 5, "description": "how many chunks", "maximum": 50, "minimum": 1, "title": "K", "type": "integer",
    }  # fmt: skip
    assert by_name["route"].input_schema["required"] == ["question"]
    assert all(t.description and t.annotations.read_only_hint for t in tools)


def test_ask_answers_with_its_numbered_sources_and_the_route_taken(service, llm):
    got = run(build_server(service), lambda c: c.call_tool("ask", {"question": SIMPLE_QUESTION}))
    answer = content(got)
    assert answer["answer"] == ANSWER and answer["route"] == "chunk"
    assert set(answer["route_probs"]) == {"chunk", "summary", "logic"} and answer["usage"]["llm_calls"] == 1
    first = answer["sources"][0]
    assert (first["n"], first["doc_id"], first["line"]) == (1, "hitchcock", "[1] Alfred Hitchcock")
    assert service.metrics_dict()["answers"] == 1  # through the server's own queue and books


def test_search_and_route_answer_without_an_llm_call(service, llm):
    async def session(client):
        return await client.call_tool("search", {"query": "Hitchcock born London", "k": 2}), await client.call_tool(
            "route", {"question": SIMPLE_QUESTION}
        )

    found, routed = run(build_server(service), session)
    results = content(found)["results"]
    assert [r["doc_id"] for r in results][0] == "hitchcock" and len(results) == 2
    assert results[0]["score"] >= results[1]["score"] and "born on 13 August 1899" in results[0]["text"]
    decision = content(routed)
    assert decision["route"] == "chunk" and decision["probs"]["chunk"] > decision["probs"]["logic"]
    assert llm.calls == 0


def test_list_documents_pages_through_the_kb(service):
    got = content(run(build_server(service), lambda c: c.call_tool("list_documents", {"offset": 1, "limit": 2})))
    assert got["total"] == 5 and [d["id"] for d in got["documents"]] == ["spielberg", "vertigo"]
    assert got["documents"][0] == {"id": "spielberg", "title": "Steven Spielberg", "source": "", "chunks": 1}


def test_the_write_tools_exist_only_with_allow_writes(service):
    async def session(client):
        names = [t.name for t in (await client.list_tools()).tools]
        refused = await client.call_tool("delete_documents", {"ids": ["jaws"]})
        return names, refused

    names, refused = run(build_server(service), session)
    assert not set(WRITE_TOOLS) & set(names)
    assert refused.is_error and "delete_documents" in refused.content[0].text
    assert "jaws" in service.base.kb.doc_ids


def test_with_allow_writes_documents_are_added_then_found_then_deleted(service):
    doc = {"id": "olm", "title": "Olm river", "text": "The Olm river freezes every winter near Kesh."}

    async def session(client):
        added = await client.call_tool("add_documents", {"documents": [doc]})
        found = await client.call_tool("search", {"query": "Olm river freezes", "k": 1})
        deleted = await client.call_tool("delete_documents", {"ids": ["olm", "nowhere"]})
        return added, found, deleted

    added, found, deleted = run(build_server(service, allow_writes=True), session)
    assert content(added)["added_chunks"] == 1 and content(found)["results"][0]["doc_id"] == "olm"
    assert content(deleted)["deleted"] == ["olm"] and content(deleted)["not_found"] == ["nowhere"]
    assert "olm" not in service.base.kb.doc_ids


def test_a_bad_request_is_a_tool_error_in_one_line(service, llm):
    async def session(client):
        return [
            await client.call_tool("ask", {"question": "   "}),
            await client.call_tool("ask", {"question": SIMPLE_QUESTION, "route": "graph"}),
            await client.call_tool("search", {"query": "x", "k": 500}),
        ]

    empty, bad_route, too_many = run(build_server(service), session)
    assert all(r.is_error for r in (empty, bad_route, too_many))
    assert empty.content[0].text.endswith("the question is empty") and "\n" not in empty.content[0].text
    assert "route" in bad_route.content[0].text and "k" in too_many.content[0].text
    assert llm.calls == 0


def test_over_stdio_a_subprocess_answers_the_same_tools(tmp_path):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tests.engine.mcp_stdio_server", str(tmp_path)],
        cwd=str(ROOT),
        env={"LOGICROUTE_CACHE_DIR": str(tmp_path / "cache")},
    )

    async def session(client):
        names = [t.name for t in (await client.list_tools()).tools]
        return names, await client.call_tool("ask", {"question": SIMPLE_QUESTION})

    names, asked = run(params, session)
    assert names == list(READ_TOOLS)
    assert content(asked)["answer"] == ANSWER and content(asked)["sources"][0]["doc_id"] == "hitchcock"


INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "spec", "version": "1"}},
}  # fmt: skip
NOT_REQUESTS = [  # a frame, and the JSON-RPC error (id, code) it must get
    (b"not json", (None, -32700)),
    (b"[]", (None, -32600)),
    (b'[{"jsonrpc": "2.0", "id": 3, "method": "ping"}]', (None, -32600)),  # MCP sends no batches
    (b'{"hello": "world"}', (None, -32600)),
    (b'{"jsonrpc": "2.0", "id": 7, "method": 5}', (7, -32600)),
    # a lone surrogate: JSON, but no UTF-8 reply could carry it back (the SDK then answered nothing)
    (
        b'{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "ask", "arguments": '
        b'{"question": "\\ud800?"}}}',
        (8, -32700),  # with its id: the client waits on it
    ),
]


def test_over_stdio_a_frame_that_is_no_request_gets_a_json_rpc_error_and_the_next_request_its_answer(tmp_path):
    frames = [frame.decode() for frame, _ in NOT_REQUESTS] + ["", json.dumps(INITIALIZE)]  # "": no frame, no reply
    done = subprocess.run(
        [sys.executable, "-m", "tests.engine.mcp_stdio_server", str(tmp_path)],
        input="\n".join(frames) + "\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"LOGICROUTE_CACHE_DIR": str(tmp_path / "cache")},
        timeout=120,
    )
    *errors, answered = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["id"], r["error"]["code"]) for r in errors] == [want for _, want in NOT_REQUESTS]  # in frame order
    assert answered["id"] == 1 and answered["result"]["serverInfo"]["name"] == "logicroute"
    assert done.returncode == 0, done.stderr


def http_client(url: str, key: str | None = None):
    """The SDK's streamable HTTP transport, sending `key` as the bearer token."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=30))


def test_over_http_the_tools_answer_behind_serves_key(tmp_path, llm, isolated_llm_env):
    service = film_service(tmp_path, llm, api_key=KEY)
    with ServerThread(service, app=http_app(build_server(service), service)) as server:
        url = server.url + MCP_PATH
        tools = run(http_client(url, KEY), lambda c: c.list_tools()).tools
        asked = run(http_client(url, KEY), lambda c: c.call_tool("ask", {"question": SIMPLE_QUESTION}))
        hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        no_key = call("POST", url, hello, headers={"Accept": "application/json, text/event-stream"})
    assert [t.name for t in tools] == list(READ_TOOLS) and content(asked)["answer"] == ANSWER
    assert no_key.status == 401 and no_key.error["code"] == "invalid_api_key"


def test_over_http_without_a_key_only_its_own_host_names_and_json_bodies_are_answered(tmp_path, service):
    with ServerThread(service, app=http_app(build_server(service), service)) as server:
        url = server.url + MCP_PATH
        assert [t.name for t in run(url, lambda c: c.list_tools()).tools] == list(READ_TOOLS)
        hello = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
        accept = {"Accept": "application/json, text/event-stream"}
        rebound = call("POST", url, raw=hello, headers={**accept, "Host": "attacker.example"})
        form = call("POST", url, raw=hello, headers={**accept, "Content-Type": "text/plain"})
        huge = call("POST", url, raw=b"x" * (service.config.max_body_bytes + 1), headers=accept)
    assert (rebound.status, rebound.error["code"]) == (403, "host_not_allowed")
    assert (form.status, form.error["code"]) == (415, "unsupported_media_type")
    assert huge.status == 413


def test_over_http_a_body_that_is_no_request_gets_a_json_rpc_error_with_a_400_and_the_server_goes_on(service):
    accept = {"Accept": "application/json, text/event-stream"}
    with ServerThread(service, app=http_app(build_server(service), service)) as server:
        url = server.url + MCP_PATH
        replies = [call("POST", url, raw=frame, headers=accept) for frame, _ in NOT_REQUESTS]
        tools = run(url, lambda c: c.list_tools()).tools
    assert [(r.status, (r.body["id"], r.body["error"]["code"])) for r in replies] == [
        (400, want) for _, want in NOT_REQUESTS
    ]
    assert [t.name for t in tools] == list(READ_TOOLS)


def test_without_the_mcp_extra_the_command_names_its_install_command_before_anything_loads(tmp_path, monkeypatch):
    import importlib.util

    from click.testing import CliRunner

    from engine.face.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a))
    res = CliRunner().invoke(main, ["mcp", "--kb", str(tmp_path)])
    assert (res.exit_code, res.output) == (
        2,
        "error: `logicroute mcp` needs the mcp extra: pip install 'logicroute[mcp]'\n",
    )


@pytest.mark.embedder
def test_the_command_over_stdio_answers_about_a_pdf_with_its_page(tmp_path):
    """`logicroute index` of a folder with a PDF, then `logicroute mcp --kb` started by the client,
    the real MiniLM and router, an OpenAI-compatible fake for the LLM."""
    from click.testing import CliRunner

    from engine.face.cli import main
    from tests import doc_files
    from tests.engine.fake_endpoint import FakeEndpoint
    from tests.real_embedder import shared_test_embedder

    (tmp_path / "docs").mkdir()
    doc_files.report_pdf(tmp_path / "docs" / "report.pdf")
    kb = tmp_path / "kb"
    args = ["index", str(tmp_path / "docs"), "--kb", str(kb), "--summaries", "none"]
    assert CliRunner().invoke(main, args, obj={"embedder": shared_test_embedder()}).exit_code == 0
    with FakeEndpoint("The keeper counted 412 ships [1].") as llm:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "engine.face.cli", "-q", "mcp", "--kb", str(kb), "--llm", f"openai:m@{llm.url}"]
            + ["--set", "cache=false"],
            env={"LOGICROUTE_CACHE_DIR": str(tmp_path / "cache")},
        )

        question = "How many ships did the keeper count?"

        async def session(client):
            found = await client.call_tool("search", {"query": question, "k": 1})
            asked = await client.call_tool("ask", {"question": question, "route": "chunk"})
            return found, asked

        found, asked = run(params, session)
    assert content(found)["results"][0]["line"] == "[1] report.pdf p. 2 > Results"
    answer = content(asked)
    assert answer["answer"] == "The keeper counted 412 ships [1]."
    assert answer["sources"][0]["line"] == "[1] report.pdf p. 2 > Results" and answer["sources"][0]["pages"] == "2"
