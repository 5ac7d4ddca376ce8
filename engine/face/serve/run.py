"""Running the application: run_server for `logicroute serve` (blocks until Ctrl-C), and
ServerThread, the real server on a free port in a background thread, for tests and
`logicroute bench serve`.

Both listen only once the service is warm (AnswerService.warm_up: the embedder, the router, the
local model): a server that answers /health is ready, and a burst of questions right after
start waits in the queue for answers, not behind a model still loading."""

from __future__ import annotations

import socket
import threading
import time

from engine.face.serve.app import create_app
from engine.face.serve.service import AnswerService
from engine.floor.base.errors import LogicRouteError

GRACEFUL_SHUTDOWN_SECONDS = 10


def uvicorn_config(service: AnswerService, *, log_level: str = "info", access_log: bool = True, app=None):
    """`app`: another ASGI application over the service (the MCP one); default: the HTTP API."""
    import uvicorn

    return uvicorn.Config(
        create_app(service) if app is None else app,
        host=service.config.host,
        port=service.config.port,
        log_level=log_level,
        access_log=access_log,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        server_header=False,
    )


def run_server(service: AnswerService, *, log_level: str = "info", app=None) -> None:
    import uvicorn

    try:
        service.warm_up()
        uvicorn.Server(uvicorn_config(service, log_level=log_level, app=app)).run()
    finally:
        service.close()


class ServerThread:
    """`with ServerThread(service) as server:` the server answers at server.url until the block
    ends. It listens on a port the OS picked (config.port is not used). `app`: as uvicorn_config's."""

    def __init__(self, service: AnswerService, *, log_level: str = "warning", start_timeout: float = 30.0, app=None):
        self.service = service
        self.app = app
        self.log_level = log_level
        self.start_timeout = start_timeout
        self.port: int | None = None
        self._server = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.service.config.host}:{self.port}"

    def __enter__(self) -> "ServerThread":
        import uvicorn

        self.service.warm_up()
        # proto IPPROTO_TCP, not 0: asyncio turns Nagle's algorithm off only on connections whose
        # socket says TCP, and with it on every keep-alive response waits ~40 ms for a delayed ACK
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.service.config.host, 0))
        self.port = sock.getsockname()[1]
        config = uvicorn_config(self.service, log_level=self.log_level, access_log=False, app=self.app)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="logicroute-server", daemon=True
        )
        self._thread.start()
        t0 = time.monotonic()
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() - t0 > self.start_timeout:
                raise LogicRouteError(f"the server did not start within {self.start_timeout:g}s")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=GRACEFUL_SHUTDOWN_SECONDS + 5)
        self.service.close()
