"""`logicroute serve`: routed answers over HTTP.

One process keeps the knowledge base, the embedder, the router and the LLM warm and answers
over an OpenAI-compatible API (/v1/chat/completions, /v1/models), native endpoints (/query,
/route, /documents, /health, /metrics) and a single web page at /.

Modules (import this package freely: nothing heavy loads here; FastAPI and uvicorn load in
engine.face.serve.app, the endpoint modules it imports (native, openai_compat) and engine.face.serve.run only):
  config       ServeConfig: host, port, key, limits; the bind-address rule for the key
  errors       every failure as a status code and a JSON error body
  metrics      counts, latencies and tokens per route
  admission    the bounded queue (503 + Retry-After) and the per-request deadline
  progress     the logic route's LLM calls as progress events, for streaming
  service      AnswerService: answers, route decisions, document writes (framework-free)
  schemas      request bodies (pydantic)
  openai_compat  chat completions and models, with SSE streaming
  native       /query, /route, /documents, /health, /metrics
  app          create_app: the FastAPI application, its guard middleware and the page
  run          run_server (uvicorn) and ServerThread (a server on a free port, for tests and
               benchmarks), both listening only once the models are loaded
  mcp_tools    `logicroute mcp`: the same service as MCP tools
  mcp_framing  JSON-RPC errors for MCP frames that are no message (stdio and streamable HTTP)
"""
