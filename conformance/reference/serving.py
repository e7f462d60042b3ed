"""Serve an ASGI app with uvicorn on a local port, in a background thread.

The reference target (conformance/reference/server.py) and the judging proxy's live
verdict (conformance/front/proxy.py) are both served this way.
"""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType
from typing import Any

import uvicorn

_START_TIMEOUT = 10.0
_STOP_TIMEOUT = 5.0


class ThreadedServer:
    """``app`` served by uvicorn on ``host`` and ``port`` (0: a free one), in a thread.

    The socket is bound before uvicorn starts, so the port is known without races and
    ``start()`` returns (the base URL, no trailing slash) only once requests are served.
    """

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 0, name: str) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.name = name
        self.url = ""
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    def start(self) -> str:
        """Start serving (idempotent) and return the base URL."""
        if self._server is not None:
            return self.url
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY only on sockets that say
        # they are TCP, and without it every response body waits ~40 ms for Nagle.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,
            # Leave the process's logging setup alone: the server lives inside another program.
            log_config=None,
            lifespan="off",
            # A stalled stream (the stream-stall fault, a live page) must not hold up stop().
            timeout_graceful_shutdown=1,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run,
            kwargs={"sockets": [sock]},
            name=self.name.replace(" ", "-"),
            daemon=True,
        )
        thread.start()
        deadline = time.monotonic() + _START_TIMEOUT
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                sock.close()
                raise RuntimeError(f"the {self.name} did not start")
            time.sleep(0.005)
        port = sock.getsockname()[1]
        host = f"[{self.host}]" if family == socket.AF_INET6 else self.host
        self._server, self._thread, self._socket = server, thread, sock
        self.url = f"http://{host}:{port}"
        return self.url

    def stop(self) -> None:
        """Stop serving and wait for the thread to end (idempotent)."""
        server, thread, sock = self._server, self._thread, self._socket
        if server is None or thread is None:
            return
        server.should_exit = True
        thread.join(_STOP_TIMEOUT)
        if thread.is_alive():
            server.force_exit = True
            thread.join(_STOP_TIMEOUT)
        if sock is not None:
            sock.close()
        self._server = self._thread = self._socket = None

    def __enter__(self) -> ThreadedServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
