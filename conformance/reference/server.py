"""Run the reference target on a local port, in a background thread."""

from __future__ import annotations

import signal
import threading

from conformance.reference.app import create_app
from conformance.reference.serving import ThreadedServer

__all__ = ["ReferenceServer"]


class ReferenceServer(ThreadedServer):
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
        app = create_app(
            flavor,
            api_key=api_key,
            models=models,
            faults=faults,
            delay=delay,
            chunk_delay=chunk_delay,
        )
        super().__init__(app, host=host, port=port, name="reference target")
        self.flavor = flavor

    def __enter__(self) -> ReferenceServer:
        self.start()
        return self


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
