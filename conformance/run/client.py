"""The suite's HTTP client to the target: sends a Case, returns an Exchange.

Everything the target sends is read incrementally under bounds (time to first byte, gap
between reads, total time, bytes, events), so a hostile target yields an Exchange naming
the bound it hit, never a hang. Redirects are not followed, so credentials only ever go
to the target's origin. 429 and 503 answers with ``Retry-After`` are retried within a
bound (without it, backed off as the openai SDK does), and the retries are recorded on
the Exchange; a time-out or a cut met while other sends were in flight is sent again
alone before it is a finding (conformance/run/resend.py).

``Client.send`` is thread-safe: the engine may run it from a pool of threads. Pacing,
the shared back-off after a rate limit and the adaptive concurrency limit live in
``conformance.run.throttle``; ``Client.stats`` says what they saw. Bodies sent with a
``Content-Encoding`` we asked for (gzip, deflate) are recorded decoded, decoded piece by
piece so that the byte bound holds for the decoded size (a gzip bomb is cut off).
"""

from __future__ import annotations

import itertools
import json
import secrets
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from conformance.judging.exceptions import ConformanceError
from conformance.judging.wire.case import CASE_HEADER, Case
from conformance.judging.wire.exchange import Exchange, Headers
from conformance.judging.wire.redaction import REDACTED, Limits, scrub
from conformance.judging.wire.sse import SSEParser
from conformance.run.resend import RetryPolicy, paced, retry_after
from conformance.run.throttle import ClientStats, Pacer, Throttle

__all__ = [
    "Client",
    "ClientStats",
    "Limits",
    "Pacer",
    "RetryPolicy",
    "decode_body",
    "retry_after",
]

#: The content codings we accept, and can decode under the byte bound (zlib, stdlib).
ACCEPT_ENCODING = "gzip, deflate"
#: The most bytes one decoding step may produce: what a gzip bomb can cost at once.
DECODE_PIECE = 64 * 1024
GZIP_MAGIC = b"\x1f\x8b"
DECODABLE = ("gzip", "x-gzip", "deflate")
#: What one SSE event costs beyond its data bytes (the SSEEvent, its str and float).
EVENT_OVERHEAD = 160
#: The default number of sends allowed in flight of a Client built directly (the command
#: line's --concurrency default is option_table.DEFAULT_CONCURRENCY, 16).
DEFAULT_CONCURRENCY = 8


class SendingStopped(ConformanceError):
    """A send attempted after ``Client.stop()``: nothing went out."""


@dataclass
class Client:
    """Sends Cases to ``base_url`` + ``path`` and records what comes back."""

    base_url: str
    path: str = "/v1/completions"
    api_key: str | None = None
    media_type: str = "application/json"
    extra_headers: dict[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    pacer: Pacer = field(default_factory=lambda: Pacer(None))
    #: The most sends in flight at once (the engine's thread pool size); the adaptive
    #: limit starts here and never goes above it.
    concurrency: int = DEFAULT_CONCURRENCY

    def __post_init__(self) -> None:
        self.url = self.base_url.rstrip("/") + self.path
        self._http = self._new_http()
        self.throttle = Throttle(
            self.concurrency,
            self.pacer,
            memory_budget=self.limits.max_bytes_held,
            gap=self.limits.gap,
        )
        # Values too short to be secrets would blank out ordinary text if scrubbed.
        values = [self.api_key or "", *self.extra_headers.values()]
        self._secrets = [v.encode() for v in values if len(v) >= 4]
        self._stopped = False

    def _new_http(self) -> httpx.Client:
        return httpx.Client(
            follow_redirects=False,
            timeout=httpx.Timeout(self.limits.ttfb),
            headers={"User-Agent": "completions-conformance", "Accept-Encoding": ACCEPT_ENCODING},
            # The throttle bounds what is in flight; the pool must never be the bottleneck.
            limits=httpx.Limits(
                max_connections=None, max_keepalive_connections=max(1, self.concurrency)
            ),
        )

    def close(self) -> None:
        self._http.close()

    def stop(self) -> None:
        """Make no attempt from now on (the run was interrupted): every send, retry or
        probe not yet on the wire raises SendingStopped instead of going out."""
        self._stopped = True

    def _go(self) -> None:
        if self._stopped:
            raise SendingStopped("not sent: the run was interrupted")

    @property
    def stats(self) -> ClientStats:
        """Requests, retries, reconnects, peak in flight and the concurrency limit reached."""
        return self.throttle.stats()

    @property
    def requests_sent(self) -> int:
        return self.throttle.requests_sent

    @property
    def retries(self) -> int:
        return self.throttle.retries

    def headers_for(self, case: Case) -> dict[str, str]:
        """The request headers for ``case``, with the credentials its ``auth`` asks for."""
        headers = {
            "Content-Type": self.media_type,
            "Accept": "application/json, text/event-stream",
            CASE_HEADER: case.header,
        }
        headers.update(self.extra_headers)
        if case.auth == "default" and self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        elif case.auth == "malformed":
            headers["Authorization"] = "Bearer"
        elif case.auth == "wrong":
            headers["Authorization"] = f"Bearer sk-conformance-wrong-{secrets.token_hex(8)}"
        return headers

    def redacted(self, headers: dict[str, str]) -> dict[str, str]:
        """Headers safe to show: the key and every extra header value hidden.

        The malformed and wrong credentials of auth probes hold no secret and stay
        readable, so their reproducers reproduce.
        """
        extra = {k.lower() for k in self.extra_headers}

        def secret(name: str, value: str) -> bool:
            if name.lower() in extra:
                return True
            key = self.api_key
            return (
                name.lower() == "authorization" and bool(key) and key is not None and key in value
            )

        return {k: (REDACTED if secret(k, v) else v) for k, v in headers.items()}

    @staticmethod
    def encode(case: Case) -> bytes:
        """The request body bytes for ``case``."""
        return case.raw_body if case.raw_body is not None else json.dumps(case.body).encode()

    def send(self, case: Case) -> Exchange:
        """Send ``case`` (retrying rate limits within bounds) and return the Exchange.

        Thread-safe: any number of threads may call it at once; the throttle decides when
        each send starts (pacing, back-off gate, concurrency limit).
        """
        body = self.encode(case)
        headers = self.headers_for(case)
        return self.paced(lambda: self._send_fresh_if_stale(case, headers, body), case)

    def probe_with(self, case: Case) -> None:
        """Send ``case``, the minimal request the target answers (the preflight's), to see
        the target free before a send alone (``Throttle.wait_free``, resend.py)."""
        body = self.encode(case)
        headers = self.headers_for(case)

        def probe() -> Exchange:
            self._go()
            exchange = self._send_fresh_if_stale(case, headers, body)
            self._scrub(exchange)
            return exchange

        self.throttle.probe = probe

    def get(self, path: str, case: Case) -> Exchange:
        """GET ``path`` of the target (``/v1/models``), paced, bounded and retried like a
        send; ``case`` names the request (its body is not sent)."""
        headers = {k: v for k, v in self.headers_for(case).items() if k != "Content-Type"}
        url = self.base_url.rstrip("/") + path
        return self.paced(lambda: self._send_fresh_if_stale(case, headers, b"", url, "GET"), case)

    def paced(self, attempt: Callable[[], Exchange], case: Case | None = None) -> Exchange:
        """Make ``attempt`` (which sends ``case``) under the throttle: rate limits waited
        out or backed off, a bound met beside other sends sent again alone (resend.py).

        Every way the suite sends (this client, the openai SDK in sdk.py) goes through
        here, so --rps, the back-off gate, the concurrency limit and the retry policy
        hold for all, and every retry is counted.
        """

        def scrubbed() -> Exchange:
            self._go()  # before each attempt: a retry waited out may outlive the run
            exchange = attempt()
            self._scrub(exchange)
            return exchange

        return paced(self.throttle, self.retry, scrubbed, case)

    def _send_fresh_if_stale(
        self,
        case: Case,
        headers: dict[str, str],
        body: bytes,
        url: str | None = None,
        method: str = "POST",
    ) -> Exchange:
        """One send; once more on a fresh connection if a reused one was dead on arrival.

        A server may close an idle keep-alive connection at any time (llama-cpp-python
        does after a 500): the next request written to it meets a reset or an end of
        stream before any byte of an answer. That is not the request's fault, so it is
        sent again on a new connection and the Exchange says so. A failure on a fresh
        connection, or after the answer began, stays what it is: a finding.
        """
        where = (url or self.url, method)
        exchange, stale = self._send_once(case, headers, body, self._http, *where)
        if not stale:
            return exchange
        self.throttle.reconnected()
        first = exchange.transport_error
        with self._new_http() as fresh:
            exchange, _ = self._send_once(case, headers, body, fresh, *where)
        exchange.notes.append(
            f"a reused keep-alive connection failed before any byte of the answer ({first}); "
            "sent again once on a fresh connection"
        )
        return exchange

    def _send_once(
        self,
        case: Case,
        headers: dict[str, str],
        body: bytes,
        http: httpx.Client,
        url: str,
        method: str = "POST",
    ) -> tuple[Exchange, bool]:
        """One request on ``http``; also whether it died unanswered on a reused connection."""
        exchange = Exchange(
            case=case, url=url, request_headers=self.redacted(headers), request_body=body
        )
        limits = self.limits
        connected: list[str] = []

        def trace(event: str, info: dict[str, Any]) -> None:
            if event.startswith("connection.connect_"):
                connected.append(event)

        stale = False
        start = time.perf_counter()
        try:
            with http.stream(
                method, url, content=body, headers=headers, extensions={"trace": trace}
            ) as response:
                exchange.ttfb = time.perf_counter() - start
                exchange.status = response.status_code
                exchange.headers = Headers(
                    [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers.raw]
                )
                # httpcore reads this dict when the body starts: from here on the read
                # timeout bounds the gap between reads, not the wait for the first byte.
                response.request.extensions["timeout"]["read"] = limits.gap
                self._read_body(response, exchange, start)
        except httpx.TimeoutException as exc:
            exchange.bound = "ttfb" if exchange.status is None else "gap"
            waited = limits.ttfb if exchange.status is None else limits.gap
            what = "time to first byte" if exchange.status is None else "gap between reads"
            if isinstance(exc, httpx.ConnectTimeout):
                exchange.transport_error = f"cannot connect to {url}: timed out"
            elif isinstance(exc, httpx.WriteTimeout):
                exchange.transport_error = f"sending the request to {url} timed out"
            else:
                option = "--request-timeout" if exchange.status is None else "--stream-gap"
                exchange.transport_error = f"bound hit: {what} exceeded {waited:g} s ({option})"
        except httpx.ConnectError as exc:
            exchange.transport_error = f"cannot connect to {url}: {_reason(exc)}"
        except httpx.HTTPError as exc:
            exchange.transport_error = f"transport error from {url}: {_reason(exc)}"
            stale = exchange.status is None and not connected and _dead_on_arrival(exc)
        exchange.elapsed = time.perf_counter() - start
        return exchange, stale

    def _scrub(self, exchange: Exchange) -> None:
        """Hide our secrets where a target echoes them back, so no report can show them.

        Done here, for every sender, because the key is only known here; whatever the
        target sent and whatever a sender made of it (errors, the SDK's view) is covered.
        """
        scrub(exchange, self._secrets)

    def _read_body(self, response: httpx.Response, exchange: Exchange, start: float) -> None:
        is_sse = exchange.media_type == "text/event-stream"
        parser = SSEParser() if is_sse else None
        events = exchange.events = [] if is_sse else None
        kept: list[bytes] = []
        kept_size = 0
        keep_limit = self.limits.transcript_bytes if is_sse else self.limits.max_bytes
        total = 0
        try:
            for chunk in _decoded(response, exchange):
                now = time.perf_counter() - start
                total += len(chunk)
                if kept_size < keep_limit:
                    kept.append(chunk[: keep_limit - kept_size])
                    kept_size += len(kept[-1])
                new_events = 0
                if parser is not None and events is not None:
                    fresh = parser.feed(chunk, now)
                    events.extend(fresh)
                    new_events = len(fresh)
                hit = self._bound_hit(exchange, total, len(events or ()), now)
                if hit is None and not self.throttle.reserve(
                    len(chunk) + EVENT_OVERHEAD * new_events
                ):
                    held = self.limits.max_bytes_held
                    hit = (
                        "max-bytes-held",
                        f"bound hit: the answers read at once held more than {held} bytes "
                        "(this one and those of the other sends in flight)",
                    )
                if hit is not None:
                    exchange.bound, exchange.stream_error = hit
                    break
            else:
                if parser is not None:
                    exchange.stream_error = parser.close()
        except zlib.error as exc:
            coding = _coding(exchange)
            exchange.transport_error = f"the body is not valid {coding} ({exc}): cannot decode it"
        if parser is not None:
            exchange.invalid_utf8 = parser.invalid_utf8
        exchange.body = b"".join(kept)

    def _bound_hit(
        self, exchange: Exchange, size: int, events: int, now: float
    ) -> tuple[str, str] | None:
        """The bound of this exchange that its answer has passed, with its message."""
        limits = self.limits
        if events > limits.max_events:
            return "max-events", f"bound hit: more than {limits.max_events} events"
        if size > limits.max_bytes:
            decoded = " once decoded" if _coding(exchange) else ""
            return "max-bytes", f"bound hit: body larger than {limits.max_bytes} bytes{decoded}"
        if now > limits.total:
            return "total", f"bound hit: response took longer than {limits.total:g} s"
        return None


def _coding(exchange: Exchange) -> str:
    """The response's Content-Encoding, lower case; "" for none or identity."""
    coding = (exchange.headers.get("content-encoding") or "").strip().lower()
    return "" if coding == "identity" else coding


def _decoded(response: httpx.Response, exchange: Exchange) -> Iterator[bytes]:
    """The body's bytes as a client sees them: decoded when the coding is one we asked for.

    A coding we did not ask for (br, zstd, a chain) is left as sent, with a note: a
    client that sent our Accept-Encoding could not read it either.
    """
    coding = _coding(exchange)
    if coding and coding not in DECODABLE:
        exchange.notes.append(
            f"Content-Encoding {coding!r} was not asked for (Accept-Encoding: "
            f"{ACCEPT_ENCODING}); the body is recorded as sent"
        )
    if coding in ("gzip", "x-gzip"):
        return _gzip_or_as_sent(response.iter_raw(), exchange, coding)
    return decode_body(response.iter_raw(), coding)


def _gzip_or_as_sent(chunks: Iterable[bytes], exchange: Exchange, coding: str) -> Iterator[bytes]:
    """A body said to be gzip: decoded when it starts as gzip does, else kept as sent.

    A body that does not even begin with gzip's magic bytes is not a corrupt gzip stream
    but a false header (a proxy or framework adding it to a plain body): every client
    that honours the header fails on it, which is HTTP-CONTENT-ENCODING's finding, and
    the body as sent is still judged for what it says.
    """
    raw = iter(chunks)
    head = b""
    for chunk in raw:
        head += chunk
        if len(head) >= len(GZIP_MAGIC):
            break
    if not head:
        return
    rest = itertools.chain([head], raw)
    if head.startswith(GZIP_MAGIC):
        yield from decode_body(rest, coding)
        return
    exchange.false_encoding = coding
    exchange.notes.append(
        f"the body claims Content-Encoding {coding} but is not {coding} (it does not start "
        "with the gzip magic bytes 1f 8b): recorded as sent"
    )
    yield from rest


def decode_body(chunks: Iterable[bytes], content_encoding: str | None) -> Iterator[bytes]:
    """``chunks`` of a body as sent, decoded for a ``Content-Encoding`` of gzip or deflate.

    Pieces of at most DECODE_PIECE bytes, so a caller that counts them bounds a gzip
    bomb; any other coding (or none) passes through unchanged. For every sender that
    records raw bytes (the SDK's tee in sdk.py records them before httpx decodes).
    Raises ``zlib.error`` on a corrupt body.
    """
    coding = (content_encoding or "").strip().lower()
    if coding not in DECODABLE:
        yield from chunks
        return
    decoder = _Inflater(coding)
    for raw in chunks:
        yield from decoder.feed(raw)


class _Inflater:
    """Incremental gzip/deflate decoding, at most DECODE_PIECE bytes produced per step.

    ``zlib``'s ``max_length`` keeps what is not yet produced in the decoder (input in
    ``unconsumed_tail``), so a few KB that inflate to gigabytes cost one piece at a time
    and the caller's byte bound stops them.
    """

    def __init__(self, coding: str) -> None:
        self.coding = coding
        # deflate is the zlib format by the RFC; some servers send raw deflate: the first
        # chunk tells (as curl and httpx do).
        self._wbits = zlib.MAX_WBITS | 16 if coding != "deflate" else zlib.MAX_WBITS
        self._obj = zlib.decompressobj(self._wbits)
        self._first = True
        self._done = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._first and data:
            self._first = False
            if self.coding == "deflate" and not _zlib_header(data):
                self._wbits = -zlib.MAX_WBITS
                self._obj = zlib.decompressobj(self._wbits)
        while data and not self._done:
            out = self._obj.decompress(data, DECODE_PIECE)
            if out:
                yield out
            data = self._obj.unconsumed_tail
            # Output held back by max_length comes out with no further input.
            while not data and len(out) == DECODE_PIECE:
                out = self._obj.decompress(b"", DECODE_PIECE)
                if out:
                    yield out
            if self._obj.eof:
                data = self._obj.unused_data
                if data.startswith(GZIP_MAGIC) and self._wbits > zlib.MAX_WBITS:
                    # Concatenated gzip members are one body (RFC 1952).
                    self._obj = zlib.decompressobj(self._wbits)
                else:
                    # What trails the end of the data is ignored, as clients do.
                    self._done = True


def _zlib_header(data: bytes) -> bool:
    return len(data) >= 2 and data[0] & 0x0F == 8 and ((data[0] << 8) | data[1]) % 31 == 0


def _dead_on_arrival(exc: httpx.HTTPError) -> bool:
    """A reset or end of stream before any answer: what a stale keep-alive connection gives."""
    if isinstance(exc, httpx.RemoteProtocolError):
        return "without sending a response" in str(exc)
    return isinstance(exc, httpx.ReadError | httpx.WriteError)


def _reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]
