"""An upstream for the proxy benchmark: paced completion streams stamped with send times.

    python benchmarks/_stream_target.py [--server pure|c]

Binds 127.0.0.1 on a free port and prints ``URL http://127.0.0.1:PORT`` once it serves.
``POST /v1/completions`` with ``stream: true`` answers ``max_tokens`` conformant
completion chunks (one token each, the last with finish_reason "length", then
``data: [DONE]``), one every ``X-Bench-Interval`` seconds (header; default 0), each
written alone and carrying ``"t"``: ``time.monotonic_ns()`` when it was written (an
extra field, which a client must accept). CLOCK_MONOTONIC is one clock for every process
of the machine, so a client subtracts it from its own arrival time: the latency of that
chunk. A raw ASGI app, so that no framework's work sits between the stamp and the write.
``--server``: uvicorn on h11 and asyncio (pure, the default, whatever is installed) or on
httptools and uvloop (c; ``pip install httptools uvloop``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import time
from typing import Any

import uvicorn

HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-request-id", b"req_bench"),
]


def chunk(model: str, created: int, last: bool) -> bytes:
    payload = {
        "id": "cmpl-bench",
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "text": " tok",
                "index": 0,
                "logprobs": None,
                "finish_reason": "length" if last else None,
            }
        ],
        "t": time.monotonic_ns(),
    }
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    request = json.loads(body or b"{}")
    headers = dict(scope["headers"])
    interval = float(headers.get(b"x-bench-interval", b"0"))
    n = int(request.get("max_tokens", 16))
    model = str(request.get("model", "bench-model"))
    created = int(time.time())
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    for i in range(n):
        if interval:
            await asyncio.sleep(interval)
        await send(
            {
                "type": "http.response.body",
                "body": chunk(model, created, i == n - 1),
                "more_body": True,
            }
        )
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": False})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", choices=["pure", "c"], default="pure")
    c = ap.parse_args().server == "c"
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        backlog=4096,
        http="httptools" if c else "h11",
    )
    server = uvicorn.Server(config)

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if task.done():
                task.result()
                raise SystemExit("the stream target did not start")
            await asyncio.sleep(0.01)
        print(f"URL http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
        await task

    if c:
        import uvloop

        uvloop.run(serve())
    else:
        asyncio.run(serve())


if __name__ == "__main__":
    main()
