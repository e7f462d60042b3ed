"""The proxy's forwarding process: requests upstream as they came, answers back as they arrive.

``completions-conformance proxy`` runs this in a process of its own (conformance.front.proxy
starts it): the judge is CPU work in Python, and in the same process it would hold the
GIL while chunks wait to be relayed. Here the event loop does nothing but forward: each
request goes upstream unchanged (httpx; only the hop-by-hop headers and Host change),
each answer comes back one read at a time, as the upstream sent its bytes (still
content-coded), never buffered. For a request of the judged operation (``sample`` of
them), a copy of the answer and when each read arrived are handed, once complete, to the
judging process through a queue; the copies held at once (being recorded or queued) share
one byte budget with it, so memory stays bounded whatever is in flight. What is forwarded
but not judged is counted by why. ``/_conformance/`` goes to the judging process's own
server, which serves the live verdict.

Its requests are spread over several upstream connection pools (httpcore's pool costs
time quadratic in its connections per request). ``CONFORMANCE_FORWARD_SERVER=pure``
forwards through one pool, as before issue 36, for the benchmarks to compare (``mode()``).

This module imports no judge: a spawned process starts in about half a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any
from urllib.parse import urlsplit

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from conformance.judging.wire.exchange import HOP_BY_HOP

#: Where the live verdict is served (by the judging process; never judged).
LIVE = "/_conformance"
#: Every method is forwarded (only the judged operation's requests are copied).
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
#: Headers httpx adds on its own: sent upstream only when the client sent them.
HTTPX_DEFAULTS = ("accept", "accept-encoding", "user-agent")
#: Why an exchange was forwarded but not judged (the counters' order in Shared.unjudged).
SAMPLED_OUT = "sampled out"
OTHER = "a request to another operation"
CLIENT_LEFT = "the client closed the connection before the answer ended"
TOO_LARGE = "answer larger than --max-body-bytes"
NO_BUDGET = "the judge's memory budget was spent (--max-held-bytes)"
BEHIND = "the judge fell behind (queue full)"
REASONS = (SAMPLED_OUT, OTHER, CLIENT_LEFT, TOO_LARGE, NO_BUDGET, BEHIND)
#: The environment variable that chooses how to forward (``mode()``; default "auto").
SERVER_ENV = "CONFORMANCE_FORWARD_SERVER"
#: The upstream clients (connection pools) requests are spread over, in turn.
POOLS = 16
#: Keep-alive, both sides. A server closes a connection idle for its keep-alive timeout,
#: timed from when it wrote the last answer; a client reusing that connection just then
#: sends its request into the close and gets a reset (ReadError) or no answer. httpx
#: keeps idle connections 5 s, as long as uvicorn's (and Node's, Apache's, llama.cpp's,
#: vLLM's) timeout, and times them from the later moment it read the answer: reused at
#: about 5 s, they met the close (issue 36's throughput benchmark: 502s and cut client
#: streams; reproduced at 4.96-5.00 s of idle). Retrying is no cure: the request was
#: written, and whether the upstream read any of it cannot be known. So the two timeouts
#: are kept apart: upstream connections idle longer than UPSTREAM_IDLE are not reused (a
#: new connection costs a connect, and a TLS handshake, only after such a pause), and the
#: proxy keeps its clients' idle connections open CLIENT_IDLE s, longer than clients keep
#: them (httpx and the openai SDKs 5 s, aiohttp 15 s, Go's net/http 90 s).
UPSTREAM_IDLE = 2.0
CLIENT_IDLE = 120


@dataclass(frozen=True, slots=True)
class Plan:
    """What the forwarding process is told: where to listen and forward, what to copy."""

    upstream: str
    live: str
    operation: str
    host: str = "127.0.0.1"
    port: int = 0
    sample: float = 1.0
    max_body_bytes: int = 16 * 1024 * 1024
    max_held: int = 256 * 1024 * 1024
    read_timeout: float | None = 600.0


class Shared:
    """Counters both processes see (multiprocessing shared memory): the bytes of copies
    held (and their peak), the exchanges offered to the judge, and what was not judged."""

    def __init__(self, ctx: Any) -> None:
        self.held = ctx.Value("q", 0)
        self.peak = ctx.Value("q", 0)
        self.offered = ctx.Value("q", 0)
        self.unjudged = ctx.Array("q", len(REASONS))

    def reserve(self, n: int, limit: int) -> bool:
        with self.held.get_lock():
            if self.held.value + n > limit:
                return False
            self.held.value += n
            self.peak.value = max(self.peak.value, self.held.value)
            return True

    def release(self, n: int) -> None:
        with self.held.get_lock():
            self.held.value -= n

    def note(self, reason: str) -> None:
        with self.unjudged.get_lock():
            self.unjudged[REASONS.index(reason)] += 1

    def counts(self) -> dict[str, int]:
        with self.unjudged.get_lock():
            return {r: int(n) for r, n in zip(REASONS, self.unjudged[:], strict=True) if n}


class Forwarder:
    """The ASGI app of the forwarding process."""

    def __init__(self, plan: Plan, shared: Shared, outbox: Any) -> None:
        self.plan = plan
        self.shared = shared
        self.outbox = outbox
        self.upstream = plan.upstream.rstrip("/")
        self.operation = plan.operation.rstrip("/")
        self._count = 0
        self._clients: list[httpx.AsyncClient] = []
        self._busy: list[int] = []
        route = Route("/{path:path}", self.forward, methods=METHODS)
        self.app = Starlette(routes=[route], lifespan=self._lifespan)

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        timeout = httpx.Timeout(30.0, read=self.plan.read_timeout)
        shards = 1 if mode() == "pure" else POOLS
        keep = max(1, 1000 // shards)
        limits = httpx.Limits(
            max_connections=None, max_keepalive_connections=keep, keepalive_expiry=UPSTREAM_IDLE
        )
        # One TLS context for them all, as each client would make it (certificates are read
        # once: about 50 ms each).
        tls = httpx.create_ssl_context()
        async with contextlib.AsyncExitStack() as stack:
            for _ in range(shards):
                client = httpx.AsyncClient(timeout=timeout, limits=limits, verify=tls)
                self._clients.append(await stack.enter_async_context(client))
            self._busy = [0] * shards
            yield
        self._clients = []

    def _pool(self) -> int:
        """The upstream client (connection pool) with the fewest answers in flight, the first
        of them on a tie (so that one request at a time reuses one warm connection).
        httpcore's pool scans its connections for each request in time quadratic in their
        number (is_idle() of each, for each idle one): with 100 streams at once through one
        pool that was most of the forwarding's CPU. Several pools of a few connections each
        do the same work for far less."""
        pool = self._busy.index(min(self._busy))
        self._busy[pool] += 1
        return pool

    def _judged(self, method: str, url: str) -> int | None:
        """The number of this request when it is copied for the judge: a request of the
        judged operation, and exactly ``sample`` of those."""
        path = urlsplit(url).path.rstrip("/")
        if method.upper() != "POST" or not path.endswith(self.operation):
            self.shared.note(OTHER)
            return None
        self._count += 1
        n, rate = self._count, self.plan.sample
        if math.floor(n * rate) > math.floor((n - 1) * rate):
            return n
        self.shared.note(SAMPLED_OUT)
        return None

    async def forward(self, request: Request) -> Response:
        assert self._clients
        pool = self._pool()
        client = self._clients[pool]
        body = await request.body()
        query = f"?{request.url.query}" if request.url.query else ""
        live = request.url.path.startswith(LIVE)
        url = (self.plan.live if live else self.upstream) + request.url.path + query
        dropped = HOP_BY_HOP | {"host", "content-length"}
        sent = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in request.headers.raw
            if k.lower().decode("latin-1") not in dropped
        ]
        n = None if live else self._judged(request.method, url)
        outgoing = client.build_request(request.method, url, headers=sent, content=body)
        given = {k.lower() for k, _ in sent}
        for name in HTTPX_DEFAULTS:
            if name not in given:
                del outgoing.headers[name]
        seen: dict[str, Any] = {
            "where": f"proxy exchange {n}",
            "method": request.method,
            "url": url,
            "request_headers": tuple(sent),
            "request_body": body,
            "started": time.time(),
        }
        start = time.perf_counter()
        try:
            answer = await client.send(outgoing, stream=True)
        except httpx.HTTPError as exc:
            self._busy[pool] -= 1
            why = f"the upstream gave no answer: {type(exc).__name__}: {exc}"
            if n is not None:
                failed = {"status": None, "transport_error": why}
                self._offer(seen | failed | {"elapsed": time.perf_counter() - start})
            return PlainTextResponse(f"completions-conformance proxy: {why}\n", status_code=502)
        headers = [
            (k, v) for k, v in answer.headers.raw if k.lower().decode("latin-1") not in HOP_BY_HOP
        ]
        if n is None:
            relay = self._relay(answer, pool)
        else:
            seen["status"] = answer.status_code
            seen["headers"] = tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in headers)
            seen["ttfb"] = time.perf_counter() - start
            relay = self._recorded(answer, start, seen, pool)
        response = StreamingResponse(relay, status_code=answer.status_code)
        response.raw_headers = headers
        return response

    async def _relay(self, answer: httpx.Response, pool: int) -> AsyncIterator[bytes]:
        try:
            async for chunk in answer.aiter_raw():
                yield chunk
        finally:
            await answer.aclose()
            self._busy[pool] -= 1

    async def _recorded(
        self, answer: httpx.Response, start: float, seen: dict[str, Any], pool: int
    ) -> AsyncIterator[bytes]:
        """Relay the answer read by read, keeping a copy (and when each read came) for the
        judge, handed over once the answer is complete."""
        writes: list[bytes] = []
        times: list[float] = []
        size, error, complete, dropped = 0, None, False, ""
        try:
            async for chunk in answer.aiter_raw():
                if not dropped:
                    if size + len(chunk) > self.plan.max_body_bytes:
                        dropped = TOO_LARGE
                    elif not self.shared.reserve(len(chunk), self.plan.max_held):
                        dropped = NO_BUDGET
                    else:
                        writes.append(chunk)
                        times.append(time.perf_counter() - start)
                        size += len(chunk)
                yield chunk
            complete = True
        except httpx.HTTPError as exc:
            error = f"the upstream broke off the answer: {type(exc).__name__}: {exc}"
            raise  # the client must see the answer cut too, not a short complete one
        finally:
            await answer.aclose()
            self._busy[pool] -= 1
            if not dropped and not complete and not error and not _whole(answer, writes):
                dropped = CLIENT_LEFT
            if dropped:
                self.shared.release(size)
                self.shared.note(dropped)
            else:
                elapsed = time.perf_counter() - start
                copy = {"writes": tuple(writes), "times": tuple(times), "elapsed": elapsed}
                self._offer(seen | copy | {"transport_error": error}, size)

    def _offer(self, seen: dict[str, Any], held: int = 0) -> None:
        try:
            with self.shared.offered.get_lock():
                self.outbox.put_nowait((seen, held))
                self.shared.offered.value += 1
        except Exception:  # queue.Full: the judge is behind; the traffic goes on
            self.shared.release(held)
            self.shared.note(BEHIND)


def _whole(answer: httpx.Response, writes: list[bytes]) -> bool:
    """Whether a copy holds the whole answer although the client closed the connection
    before the upstream ended it: every byte of a Content-Length, or an event stream up to
    its ``data: [DONE]`` (SDKs stop reading there, and the upstream ends the body after)."""
    size = sum(len(w) for w in writes)
    length = answer.headers.get("content-length", "")
    if length.isdigit():
        return size == int(length)
    media = answer.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "text/event-stream" or answer.headers.get("content-encoding"):
        return False
    tail = b""
    for write in reversed(writes):  # the last bytes, however small the writes were
        tail = write + tail
        if len(tail) >= 64:
            break
    tail = tail.replace(b"\r", b"\n").rstrip(b"\n")
    return tail.endswith((b"data: [DONE]", b"data:[DONE]"))


def run(plan: Plan, shared: Shared, outbox: Any, ready: Connection) -> None:
    """The forwarding process: serve until SIGTERM or SIGINT (uvicorn's handlers), saying
    on ``ready`` where it listens (or why it cannot)."""
    # Stopping must not wait for a slow judge to take every queued copy: what is left is
    # counted by the judging process (handed over, never arrived).
    outbox.cancel_join_thread()
    family = socket.AF_INET6 if ":" in plan.host else socket.AF_INET
    try:
        # IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say they are TCP.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((plan.host, plan.port))
    except OSError as exc:
        ready.send(("error", f"cannot listen on {plan.host}:{plan.port}: {exc}"))
        return
    config = uvicorn.Config(
        Forwarder(plan, shared, outbox).app,
        # h11 whatever is installed: uvicorn's httptools server (its "auto" where installed)
        # writes every header name in lower case, and the answers are forwarded byte for
        # byte as the upstream wrote them. Measured (issue 36): it forwards no faster here,
        # nor does uvloop's event loop.
        http="h11",
        log_level="warning",
        access_log=False,
        log_config=None,
        lifespan="on",
        timeout_graceful_shutdown=5,
        timeout_keep_alive=CLIENT_IDLE,
        backlog=4096,
        # The upstream's own Server and Date headers are the ones forwarded.
        server_header=False,
        date_header=False,
    )
    server = uvicorn.Server(config)
    parent = os.getppid()

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if task.done():
                ready.send(("error", "the proxy did not start"))
                return
            await asyncio.sleep(0.005)
        host = f"[{plan.host}]" if family == socket.AF_INET6 else plan.host
        ready.send(("ready", f"http://{host}:{sock.getsockname()[1]}"))
        while not task.done():
            # The judging process is gone (killed): nothing would judge or stop us.
            if os.getppid() != parent:
                server.should_exit = True
            await asyncio.wait([task], timeout=1.0)

    asyncio.run(serve())


def mode() -> str:
    """``SERVER_ENV``: "auto" (the default: several upstream pools) or "pure" (as before
    issue 36: one pool). The benchmarks compare them."""
    return "pure" if os.environ.get(SERVER_ENV, "").strip().lower() == "pure" else "auto"
