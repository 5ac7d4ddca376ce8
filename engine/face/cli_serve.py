"""`logicroute serve` (the HTTP server, engine.face.serve) and `logicroute mcp` (the same knowledge
base as Model Context Protocol tools, engine.face.serve.mcp_tools), each started by one command
(engine.face.cli adds them to its group). Both take the same options and stand on the same
AnswerService, so a key, a queue and a deadline mean the same in both. FastAPI, uvicorn, the
MCP SDK and the models load inside the commands: `logicroute --help` stays instant."""

from __future__ import annotations

import click

from engine.face.cli_options import (
    check_llm_spec,
    config_of,
    config_options,
    info,
    injected_embedder,
    llm_option,
    style_option,
)
from engine.floor.llm.urls import redact


def server_options(f):
    """The options `serve` and `mcp` share: the KB, who may call and write, how answers are made,
    the limits."""
    decorators = [
        click.option(
            "--kb", "kb_dir", required=True, type=click.Path(file_okay=False, exists=True), help="knowledge base"
        ),
        click.option(
            "--host", default="127.0.0.1", show_default=True, help="another host needs $LOGICROUTE_SERVER_KEY"
        ),
        click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535)),
        click.option(
            "--allowed-host",
            "allowed_hosts",
            multiple=True,
            metavar="NAME",
            help="without a key, also answer requests for this Host name (repeatable); by default only "
            "localhost, 127.0.0.1, [::1] and --host, so a web page cannot rebind its name to this server",
        ),
        click.option(
            "--escalate",
            is_flag=True,
            help="by default, also check the chunk/summary answers that give an answer (a self-check call, or "
            "escalate_below) and retry the failing ones on the logic route",
        ),
        config_options,
        click.option(
            "--concurrency",
            type=click.IntRange(min=1),
            default=4,
            show_default=True,
            help="answers at once with an openai: endpoint (the local model answers one at a time)",
        ),
        click.option(
            "--queue-size",
            type=click.IntRange(min=0),
            default=16,
            show_default=True,
            help="waiting requests; more get 503",
        ),
        click.option(
            "--deadline",
            "deadline_seconds",
            type=click.FloatRange(min=0, min_open=True),
            default=300.0,
            show_default=True,
            help="seconds a request may take, queue included (504 after)",
        ),
        style_option("reader"),
        llm_option,
        click.pass_context,
    ]
    for decorator in reversed(decorators):
        f = decorator(f)
    return f


def open_service(ctx, options: dict, *, allow_writes: bool):
    """The ServeConfig of the options (refusing a non-local host without a key before anything
    loads), then the AnswerService over the KB, warmed up. Returns (service, local model?)."""
    from engine.face.serve.config import ServeConfig, key_from_env
    from engine.face.serve.service import AnswerService
    from engine.floor.llm.factory import parse_spec

    rag_config = config_of(ctx, options)
    check_llm_spec(rag_config.llm_spec)
    local = parse_spec(rag_config.llm_spec).backend == "local"
    config = ServeConfig(
        host=options["host"],
        port=options["port"],
        api_key=key_from_env(),
        workers=1 if local else options["concurrency"],
        queue_size=options["queue_size"],
        deadline_seconds=options["deadline_seconds"],
        allowed_hosts=tuple(options["allowed_hosts"]),
        allow_writes=allow_writes,
    )
    loading = "the embedder, the router and the local model" if local else "the embedder and the router"
    info(f"loading the knowledge base {options['kb_dir']}, {loading} ...")
    service = AnswerService.open(options["kb_dir"], config, embedder=injected_embedder(ctx), **rag_config.options())
    service.warm_up()  # before the first request is read: nothing loads on a question
    return service, local


@click.command()
@server_options
@click.option(
    "--allow-writes",
    is_flag=True,
    help="without a key, take POST/DELETE /documents (with $LOGICROUTE_SERVER_KEY writes need the key)",
)
def serve(ctx, allow_writes, **options):
    """Answer questions over HTTP from the knowledge base --kb: an OpenAI-compatible API
    (/v1/chat/completions, /v1/models), native endpoints (/query, /route, /documents, /health,
    /metrics) and a web page at /.

    It listens once the embedder, the router and the local model are loaded: when /health
    answers, the server is ready, and questions sent at once wait in the queue (--queue-size)
    instead of being refused while a model loads.

    Without $LOGICROUTE_SERVER_KEY it answers only requests for its own address (see
    --allowed-host) and takes no document writes unless --allow-writes; with the key every API
    call must send it. Request bodies must be JSON (Content-Type: application/json)."""
    service, local = open_service(ctx, options, allow_writes=allow_writes)
    config = service.config
    host, port = config.host, config.port
    answering = "one answer at a time (local model)" if local else f"{config.workers} answers at once"
    shown = redact(service.base.llm_spec)  # never an endpoint's password
    info(
        f"serving {service.kb_summary()['chunks']} chunks with {shown}: {answering}, {config.queue_size} may wait\n"
        f"  page     http://{url_host(host)}:{port}/\n"
        f"  OpenAI   base_url=http://{url_host(host)}:{port}/v1  models logicroute-auto|chunk|summary|logic"
        + ("\n  auth     Authorization: Bearer $LOGICROUTE_SERVER_KEY" if config.api_key else "")
        + ("" if config.takes_writes() else "\n  writes   off: POST/DELETE /documents need --allow-writes or a key")
    )
    from engine.face.serve.run import run_server

    run_server(service)


@click.command()
@server_options
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio: the client starts this command and talks over its stdin/stdout; http: streamable HTTP at "
    "http://HOST:PORT/mcp, with serve's key, Host rule and limits",
)
@click.option(
    "--allow-writes",
    is_flag=True,
    help="also offer the add_documents and delete_documents tools (never without this flag, key or not)",
)
def mcp(ctx, transport, allow_writes, **options):
    """Serve the knowledge base --kb to MCP clients (assistants, IDEs, agents) as tools: ask
    (an answer with its sources and route), search (chunks with scores, no LLM call), route (the
    router's decision, no LLM call) and list_documents; add_documents and delete_documents with
    --allow-writes. Needs the mcp extra: pip install 'logicroute[mcp]'."""
    from engine.face.serve.mcp_tools import MCP_PATH, build_server, require_sdk

    require_sdk()  # before the models load
    service, local = open_service(ctx, options, allow_writes=allow_writes)
    server = build_server(service, allow_writes=allow_writes)
    tools = "ask, search, route, list_documents" + (", add_documents, delete_documents" if allow_writes else "")
    if transport == "stdio":
        from engine.face.serve.mcp_framing import run_stdio

        info(f"MCP over stdio: {service.kb_summary()['chunks']} chunks; tools {tools}")
        try:
            run_stdio(server)
        finally:
            service.close()
        return
    from engine.face.serve.mcp_tools import http_app
    from engine.face.serve.run import run_server

    config = service.config
    info(
        f"MCP over streamable HTTP at http://{url_host(config.host)}:{config.port}{MCP_PATH}: "
        f"{service.kb_summary()['chunks']} chunks; tools {tools}"
        + ("\n  auth     Authorization: Bearer $LOGICROUTE_SERVER_KEY" if config.api_key else "")
    )
    run_server(service, app=http_app(server, service, allow_writes=allow_writes))


def url_host(host: str) -> str:
    if host in ("0.0.0.0", "::"):
        return "localhost"
    return f"[{host}]" if ":" in host else host
