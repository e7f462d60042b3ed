"""``completions-conformance proxy``: a reverse proxy that judges the traffic it forwards.

    completions-conformance proxy --upstream URL [--listen HOST:PORT] [--sample RATE]

Users point their SDK's base URL at it. Each request goes upstream as it came (httpx; only
the hop-by-hop headers and Host change), and each answer comes back as it arrives, one
read at a time, its bytes as the upstream sent them (still content-coded): a stream is
never buffered. A copy of each answer of the judged operation (``--sample`` of them) is
handed, once complete, to a worker thread that judges it with the suite's requirements
(conformance.traffic_judge): judging never runs on the request path, and a judge that
fails leaves the traffic flowing and shows as a suite error. The live verdict, per model
and per requirement with the evidence of each finding, is served at ``/_conformance/``
(HTML) and ``/_conformance/verdict.json``; the reports are written on exit (SIGINT,
SIGTERM). ``--har FILE`` keeps the judged exchanges, redacted, as HAR 1.2 for
``completions-conformance judge``.

The queue to the judge is bounded, and so is the copy of each answer: when the judge falls
behind, or an answer is larger than ``--max-body-bytes``, the exchange is forwarded and
counted as not judged, with why. Memory stays bounded whatever the traffic.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import queue
import signal
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from conformance.exchange import Exchange
from conformance.judging import EXIT_CODES
from conformance.spec import Spec
from conformance.traffic import HOP_BY_HOP, Seen, har_document, har_of, operation_of
from conformance.traffic_judge import Snapshot, TrafficJudge

if TYPE_CHECKING:
    pass

PROG = "completions-conformance proxy"
#: Where the live verdict is served (never forwarded).
LIVE = "/_conformance"
#: Exchanges waiting for the judge, at most; more are forwarded and counted as not judged.
QUEUE = 256
#: The largest answer copied for the judge (the suite's own --max-body-bytes default).
MAX_BODY_BYTES = 16 * 1024 * 1024
#: Every method is forwarded (only the completions are judged).
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
#: The bytes of all answers copied for the judge at once (being recorded or queued): the
#: proxy's memory stays bounded whatever the number and length of streams in flight.
MAX_HELD = 256 * 1024 * 1024
#: Headers httpx adds on its own: sent upstream only when the client sent them.
HTTPX_DEFAULTS = ("accept", "accept-encoding", "user-agent")
#: The GIL switch interval while proxying: the judge thread must give the event loop the
#: GIL back within a fraction of a millisecond (Python's default is 5 ms).
SWITCH_INTERVAL = 0.0002


class HarWriter:
    """The judged exchanges as HAR 1.2: one JSON line per entry while running, the HAR
    document assembled on close (so a long session never sits in memory)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.part = path.with_name(path.name + ".part")
        self._file: TextIO | None = self.part.open("w", encoding="utf-8")
        self._lock = threading.Lock()

    def add(self, seen: Seen, exchange: Exchange) -> None:
        import json

        line = json.dumps(har_of(exchange, seen.started or time.time()), ensure_ascii=False)
        with self._lock:
            if self._file is not None:
                self._file.write(line + "\n")
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is None:
                return
            self._file.close()
            self._file = None
        with (
            self.part.open(encoding="utf-8") as lines,
            self.path.open("w", encoding="utf-8") as out,
        ):
            for piece in har_document(line.rstrip("\n") for line in lines if line.strip()):
                out.write(piece)
        self.part.unlink()


class Judging:
    """The worker thread that judges what the proxy forwarded, off the request path.

    The copies it holds (answers being recorded, and queued ones) share one budget of
    ``max_held`` bytes: an answer that would exceed it is forwarded but not judged.
    """

    def __init__(self, judge: TrafficJudge, size: int = QUEUE, max_held: int = MAX_HELD) -> None:
        self.judge = judge
        self.queue: queue.Queue[Seen | None] = queue.Queue(maxsize=size)
        self.max_held = max_held
        self.held = 0
        self.peak_held = 0
        self._lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name="conformance-judge", daemon=True)
        self.thread.start()

    def reserve(self, n: int) -> bool:
        """Take ``n`` bytes of the budget for a copy; False when it is spent."""
        with self._lock:
            if self.held + n > self.max_held:
                return False
            self.held += n
            self.peak_held = max(self.peak_held, self.held)
            return True

    def release(self, n: int) -> None:
        with self._lock:
            self.held -= n

    def offer(self, seen: Seen, held: int) -> None:
        """Queue one exchange (holding ``held`` bytes of the budget) for the judge; counted
        as not judged if the queue is full."""
        try:
            self.queue.put_nowait(seen)
        except queue.Full:
            self.release(held)
            self.judge.note_seen()
            self.judge.note_unjudged("the judge fell behind (queue full)")

    def _run(self) -> None:
        while (seen := self.queue.get()) is not None:
            self.judge.take(seen)  # never raises: a failure is noted as a suite error
            self.release(len(seen.body))
            self.queue.task_done()
        self.queue.task_done()

    def drain(self) -> None:
        """Wait until everything queued so far is judged."""
        self.queue.join()

    def stop(self, timeout: float = 30.0) -> None:
        """Judge what is queued, then stop."""
        self.queue.put(None)
        self.thread.join(timeout)


class Proxy:
    """The ASGI app: forwarding, the copies for the judge, the live verdict."""

    def __init__(
        self,
        upstream: str,
        judge: TrafficJudge,
        *,
        sample: float = 1.0,
        max_body_bytes: int = MAX_BODY_BYTES,
        queue_size: int = QUEUE,
        max_held: int = MAX_HELD,
        read_timeout: float | None = 600.0,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.judge = judge
        self.judging = Judging(judge, queue_size, max_held)
        self.sample = sample
        self.max_body_bytes = max_body_bytes
        self.wanted = operation_of(judge.spec)
        self.timeout = httpx.Timeout(30.0, read=read_timeout)
        self._count = 0
        self._client: httpx.AsyncClient | None = None
        routes = [
            Route(LIVE + "/", self.page),
            Route(LIVE, self.page),
            Route(LIVE + "/verdict.json", self.verdict),
            Route(
                "/{path:path}",
                self.forward,
                methods=METHODS,
            ),
        ]
        self.app = Starlette(routes=routes, lifespan=self._lifespan)

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Starlette) -> AsyncIterator[None]:
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=1000)
        async with httpx.AsyncClient(timeout=self.timeout, limits=limits) as client:
            self._client = client
            yield
        self._client = None

    def _sampled(self) -> int | None:
        """The number of this request of the operation when it is judged (exactly
        ``sample`` of them are), else None."""
        self._count += 1
        n = self._count
        return n if math.floor(n * self.sample) > math.floor((n - 1) * self.sample) else None

    async def forward(self, request: Request) -> Response:
        assert self._client is not None
        body = await request.body()
        query = f"?{request.url.query}" if request.url.query else ""
        url = self.upstream + request.url.path + query
        dropped = HOP_BY_HOP | {"host", "content-length"}
        sent = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in request.headers.raw
            if k.lower().decode("latin-1") not in dropped
        ]
        wanted = self.wanted(request.method, url)
        n = self._sampled() if wanted else None
        if n is None:
            self.judge.note_seen()
            self.judge.note_unjudged("sampled out" if wanted else "a request to another operation")
        outgoing = self._client.build_request(request.method, url, headers=sent, content=body)
        given = {k.lower() for k, _ in sent}
        for name in HTTPX_DEFAULTS:
            if name not in given:
                del outgoing.headers[name]
        seen = Seen(f"proxy exchange {n}", request.method, url, tuple(sent), body, None)
        started, start = time.time(), time.perf_counter()
        try:
            answer = await self._client.send(outgoing, stream=True)
        except httpx.HTTPError as exc:
            why = f"the upstream gave no answer: {type(exc).__name__}: {exc}"
            if n is not None:
                elapsed = time.perf_counter() - start
                self.judging.offer(
                    replace(seen, transport_error=why, started=started, elapsed=elapsed), 0
                )
            return PlainTextResponse(f"{PROG}: {why}\n", status_code=502)
        headers = [
            (k, v) for k, v in answer.headers.raw if k.lower().decode("latin-1") not in HOP_BY_HOP
        ]
        if n is None:
            relay = self._relay(answer)
        else:
            ttfb = time.perf_counter() - start
            shown = tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in headers)
            seen = replace(
                seen, status=answer.status_code, headers=shown, started=started, ttfb=ttfb
            )
            relay = self._recorded(answer, start, seen)
        response = StreamingResponse(relay, status_code=answer.status_code)
        response.raw_headers = headers
        return response

    async def _relay(self, answer: httpx.Response) -> AsyncIterator[bytes]:
        try:
            async for chunk in answer.aiter_raw():
                yield chunk
        finally:
            await answer.aclose()

    async def _recorded(
        self, answer: httpx.Response, start: float, seen: Seen
    ) -> AsyncIterator[bytes]:
        """Relay the answer read by read, keeping a copy (and when each read came) for the
        judge, handed over once the answer is complete."""
        writes: list[bytes] = []
        times: list[float] = []
        size, error, complete, dropped = 0, None, False, ""
        try:
            async for chunk in answer.aiter_raw():
                if not dropped:
                    if size + len(chunk) > self.max_body_bytes:
                        dropped = f"answer larger than {self.max_body_bytes} bytes"
                    elif not self.judging.reserve(len(chunk)):
                        dropped = "the judge's memory budget was spent (--max-held-bytes)"
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
            if not dropped and not complete and not error:
                dropped = "the client closed the connection before the answer ended"
            if dropped:
                self.judging.release(size)
                self.judge.note_seen()
                self.judge.note_unjudged(dropped)
            else:
                elapsed = time.perf_counter() - start
                self.judging.offer(_complete(seen, writes, times, elapsed, error), size)

    async def page(self, request: Request) -> Response:
        from reports.traffic import render_traffic

        data = await asyncio.to_thread(lambda: self.judge.snapshot().to_json())
        return HTMLResponse(render_traffic(data, refresh=5))

    async def verdict(self, request: Request) -> Response:
        data = await asyncio.to_thread(lambda: self.judge.snapshot().to_json())
        return JSONResponse(data)


def _complete(
    seen: Seen, writes: list[bytes], times: list[float], elapsed: float, error: str | None
) -> Seen:
    return replace(
        seen,
        body=b"".join(writes),
        writes=tuple(writes),
        times=tuple(times),
        elapsed=elapsed,
        transport_error=error,
    )


class ProxyServer:
    """The proxy served by uvicorn on ``host``:``port`` (0: a free one) in a thread of its
    own; ``start()`` returns its URL once it serves, ``stop()`` ends it and the judging."""

    def __init__(
        self,
        upstream: str,
        spec: Spec,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        sample: float = 1.0,
        har: Path | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        queue_size: int = QUEUE,
        max_held: int = MAX_HELD,
    ) -> None:
        self.judge = TrafficJudge(spec, target=upstream)
        self.har = HarWriter(har) if har is not None else None
        if self.har is not None:
            self.judge.listeners.append(self.har.add)
        self.proxy = Proxy(
            upstream,
            self.judge,
            sample=sample,
            max_body_bytes=max_body_bytes,
            queue_size=queue_size,
            max_held=max_held,
        )
        self.host, self.port = host, port
        self.url = ""
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._switch = sys.getswitchinterval()

    def start(self) -> str:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        # IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say they are TCP.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        config = uvicorn.Config(
            self.proxy.app,
            log_level="warning",
            access_log=False,
            log_config=None,
            lifespan="on",
            timeout_graceful_shutdown=5,
            backlog=4096,
            # The upstream's own Server and Date headers are the ones forwarded.
            server_header=False,
            date_header=False,
        )
        server = uvicorn.Server(config)
        # uvicorn takes no signals outside the main thread: they stay main()'s.
        sys.setswitchinterval(SWITCH_INTERVAL)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="conformance-proxy", daemon=True
        )
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                raise RuntimeError("the proxy did not start")
            time.sleep(0.005)
        self._server, self._thread = server, thread
        port = sock.getsockname()[1]
        host = f"[{self.host}]" if family == socket.AF_INET6 else self.host
        self.url = f"http://{host}:{port}"
        return self.url

    def stop(self) -> Snapshot:
        """Stop serving, judge what is queued, close the HAR; the final verdict."""
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(15)
            self._server = self._thread = None
        self.proxy.judging.stop()
        if self.har is not None:
            self.har.close()
        sys.setswitchinterval(self._switch)
        return self.judge.snapshot()

    def __enter__(self) -> ProxyServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def parser() -> argparse.ArgumentParser:
    from conformance.traffic_cli import add_common

    p = argparse.ArgumentParser(
        prog=PROG,
        description="A reverse proxy that forwards every request to --upstream unchanged, "
        "streams every answer back as it arrives, and judges the traffic with the suite's "
        f"requirements: live verdict at {LIVE}/ and {LIVE}/verdict.json, reports on exit.",
    )
    p.add_argument("--upstream", required=True, metavar="URL", help="where requests go")
    p.add_argument(
        "--listen",
        default="127.0.0.1:8080",
        metavar="HOST:PORT",
        help="where clients connect (default 127.0.0.1:8080)",
    )
    p.add_argument(
        "--sample",
        type=float,
        default=1.0,
        metavar="RATE",
        help="share of the operation's requests judged, 0..1 (default 1)",
    )
    p.add_argument("--har", metavar="FILE", help="also write the judged exchanges as HAR 1.2")
    p.add_argument(
        "--max-body-bytes",
        type=int,
        default=MAX_BODY_BYTES,
        metavar="N",
        help="larger answers are forwarded but not judged (default 16 MiB)",
    )
    p.add_argument(
        "--max-held-bytes",
        type=int,
        default=MAX_HELD,
        metavar="N",
        help="most bytes of answers held for the judge at once (default 256 MiB)",
    )
    add_common(p)
    return p


def _listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def main(
    argv: list[str] | None = None, *, out: TextIO = sys.stdout, err: TextIO = sys.stderr
) -> int:
    args = parser().parse_args(argv)
    from conformance.spec import SpecError, load_spec
    from reports.traffic import write_traffic_reports

    problem = None
    if not 0 <= args.sample <= 1:
        problem = f"--sample {args.sample}: a share between 0 and 1"
    elif not args.upstream.startswith(("http://", "https://")):
        problem = f"--upstream {args.upstream}: an http(s) URL"
    try:
        host, port = _listen(args.listen)
    except ValueError:
        problem = problem or f"--listen {args.listen}: HOST:PORT"
    if problem:
        print(f"ERROR: {problem}", file=err)
        return EXIT_CODES["bad-input"]
    try:
        spec = load_spec(args.spec, strict=args.strict_spec)
    except SpecError as exc:
        print(f"ERROR: --spec {args.spec}: {exc}", file=err)
        return EXIT_CODES["bad-input"]
    server = ProxyServer(
        args.upstream,
        spec,
        host=host,
        port=port,
        sample=args.sample,
        har=Path(args.har) if args.har else None,
        max_body_bytes=args.max_body_bytes,
        max_held=args.max_held_bytes,
    )
    try:
        url = server.start()
    except (OSError, RuntimeError) as exc:
        print(f"ERROR: --listen {args.listen}: {exc}", file=err)
        return EXIT_CODES["bad-input"]
    print(f"{PROG}: {url} -> {args.upstream}; live verdict at {url}{LIVE}/", file=out, flush=True)
    _wait_for_signal()
    snapshot = server.stop()
    written = write_traffic_reports(snapshot, Path(args.report_dir))
    if args.har:
        written.append(Path(args.har))
    print(f"reports: {', '.join(str(p) for p in written)}", file=out)
    reasons = "; ".join(snapshot.verdict.reasons)
    print(f"verdict: {snapshot.verdict.word}" + (f" ({reasons})" if reasons else ""), file=out)
    return snapshot.verdict.exit_code


def _wait_for_signal() -> None:
    """Block until SIGINT or SIGTERM (set explicitly: a shell may start background jobs
    with SIGINT ignored)."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass
