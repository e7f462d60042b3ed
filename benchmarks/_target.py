"""A reference target in its own process, for the benchmarks (127.0.0.1 only).

    python benchmarks/_target.py [--flavor aihubmix] [--fault NAME ...] [--api-key KEY]
                                 [--delay SECONDS]

Binds 127.0.0.1 on a free port, prints ``URL http://127.0.0.1:PORT`` on stdout once it
serves, and runs until it is terminated. One small ASGI wrapper sits in front of the
reference app and adds:

* a counter of ``POST /v1/completions`` requests: the wall-clock times they arrived
  (the first MAX_ARRIVALS), the statuses answered and the time the last answer ended
  (``GET /_bench/stats``; ``POST /_bench/reset`` zeroes it), so every tool's requests
  are counted the same way, by the target;
* an optional fixed latency (``--delay``): each completion request waits that long
  before the app sees it, without blocking other requests (``asyncio.sleep``).

The benchmarks start it with ``_common.Target``; its CPU time is not the benchmarked
tool's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import uvicorn

from conformance.reference import create_app

COMPLETIONS = "/v1/completions"
MAX_ARRIVALS = 100_000


class Bench:
    """Counts completion requests, optionally delays them, serves its own stats."""

    def __init__(self, app: Any, delay: float) -> None:
        self.app = app
        self.delay = delay
        self.reset()

    def reset(self) -> None:
        self.requests = 0
        self.arrivals: list[float] = []
        self.last: float | None = None
        self.statuses: dict[str, int] = {}

    def stats(self) -> dict[str, Any]:
        first = self.arrivals[0] if self.arrivals else None
        return {
            "requests": self.requests,
            "first": first,
            "last": self.last,
            "arrivals": self.arrivals,
            "statuses": dict(sorted(self.statuses.items())),
        }

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path.startswith("/_bench/"):
            if path == "/_bench/reset":
                self.reset()
            await _send_json(send, self.stats())
            return
        if path != COMPLETIONS:
            await self.app(scope, receive, send)
            return
        self.requests += 1
        if len(self.arrivals) < MAX_ARRIVALS:
            self.arrivals.append(time.time())
        if self.delay:
            await asyncio.sleep(self.delay)

        async def counting_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                status = str(message["status"])
                self.statuses[status] = self.statuses.get(status, 0) + 1
            await send(message)

        await self.app(scope, receive, counting_send)
        self.last = time.time()


async def _send_json(send: Any, value: Any) -> None:
    body = json.dumps(value).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flavor", default="aihubmix")
    ap.add_argument("--fault", action="append", default=[])
    ap.add_argument("--api-key")
    ap.add_argument("--model", default="reference-model")
    ap.add_argument("--delay", type=float, default=0.0, help="seconds before each completion")
    args = ap.parse_args()
    app = create_app(
        args.flavor, api_key=args.api_key, models=(args.model,), faults=frozenset(args.fault)
    )
    # TCP (IPPROTO_TCP) so that asyncio sets TCP_NODELAY, as ReferenceServer does.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        Bench(app, args.delay),
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if task.done():
                task.result()
                raise SystemExit("the target did not start")
            await asyncio.sleep(0.01)
        print(f"URL http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
        await task

    asyncio.run(serve())


if __name__ == "__main__":
    main()
