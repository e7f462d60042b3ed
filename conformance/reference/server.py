"""Run the reference target on a local port, in a background thread."""

from __future__ import annotations

import signal
import socket
import threading
import time
from types import TracebackType

import uvicorn

from conformance.reference.app import create_app

__all__ = ["ReferenceServer"]

_START_TIMEOUT = 10.0
_STOP_TIMEOUT = 5.0


class ReferenceServer:
    """The reference target served by uvicorn on ``host`` and a free port.

    Use it as a context manager, or call ``start()`` (which returns the base URL, with
    no trailing slash) and ``stop()``. ``port`` 0 picks a free port; ``delay`` and
    ``chunk_delay`` set the target's latency (see ``create_app``). The socket is bound before uvicorn starts, so the
    port is known without races and ``start()`` returns only once requests are served.
    """

    def __init__(
        self,
        flavor: str = "aihubmix",
        *,
        api_key: str | None = None,
        models: tuple[str, ...] = ("reference-model",),
        faults: frozenset[str] = frozenset(),
        host: str = "127.0.0.1",
        port: int = 0,
        delay: float = 0.0,
        chunk_delay: float = 0.0,
    ) -> None:
        # Build the app now so that a bad flavor or fault name fails at construction.
        self.app = create_app(
            flavor,
            api_key=api_key,
            models=models,
            faults=faults,
            delay=delay,
            chunk_delay=chunk_delay,
        )
        self.port = port
        self.flavor = flavor
        self.host = host
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
            # Leave the process's logging setup alone: this server lives inside tests.
            log_config=None,
            lifespan="off",
            # A stalled stream (stream-stall fault) must not hold up stop() for long.
            timeout_graceful_shutdown=1,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="reference-target", daemon=True
        )
        thread.start()
        deadline = time.monotonic() + _START_TIMEOUT
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                sock.close()
                raise RuntimeError("the reference target did not start")
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

    def __enter__(self) -> ReferenceServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def serve_until_signalled(server: ReferenceServer, banner: str) -> None:
    """Print ``banner`` and keep ``server`` up until SIGINT or SIGTERM, then stop it.

    The signals are handled explicitly: a shell may start background jobs with SIGINT
    ignored, and such a server must still stop on Ctrl-C's signal.
    """
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    print(banner, flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
