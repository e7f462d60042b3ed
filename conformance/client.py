"""The only module that speaks HTTP: sends a Case, returns an Exchange.

Everything the target sends is read incrementally under bounds (time to first byte, gap
between reads, total time, bytes, events), so a hostile target yields an Exchange naming
the bound it hit, never a hang. Redirects are not followed, so credentials only ever go
to the target's origin. 429 and 503 answers with ``Retry-After`` are retried within a
bound, and the retries are recorded on the Exchange.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from conformance.case import Case
from conformance.exchange import Exchange, Headers
from conformance.sse import SSEParser

REDACTED = "[REDACTED]"
# Statuses a careful client waits out when the target says how long to wait.
RETRYABLE = (429, 503)


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on one exchange; hitting one ends it with a failure naming the bound."""

    ttfb: float = 30.0
    gap: float = 15.0
    total: float = 120.0
    max_bytes: int = 16 * 1024 * 1024
    max_events: int = 50_000
    transcript_bytes: int = 256 * 1024


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long a rate-limited target is waited for before the run gives up."""

    max_retries: int = 3
    max_wait: float = 30.0


class Pacer:
    """Spaces request starts so that at most ``rps`` are sent per second (thread-safe)."""

    def __init__(self, rps: float | None) -> None:
        self.interval = 1.0 / rps if rps else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        if not self.interval:
            return
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            time.sleep(start - now)


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

    def __post_init__(self) -> None:
        self.url = self.base_url.rstrip("/") + self.path
        self._http = httpx.Client(
            follow_redirects=False,
            timeout=httpx.Timeout(self.limits.ttfb),
            headers={"User-Agent": "completions-conformance"},
        )
        self.requests_sent = 0
        self.retries = 0
        # Values too short to be secrets would blank out ordinary text if scrubbed.
        values = [self.api_key or "", *self.extra_headers.values()]
        self._secrets = [v.encode() for v in values if len(v) >= 4]

    def close(self) -> None:
        self._http.close()

    def headers_for(self, case: Case) -> dict[str, str]:
        """The request headers for ``case``, with the credentials its ``auth`` asks for."""
        headers = {"Content-Type": self.media_type, "Accept": "application/json, text/event-stream"}
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
        """Send ``case`` (retrying rate limits within bounds) and return the Exchange."""
        body = self.encode(case)
        headers = self.headers_for(case)
        return self.paced(lambda: self._send_once(case, headers, body))

    def paced(self, attempt: Callable[[], Exchange]) -> Exchange:
        """Make ``attempt`` under the pacer, waiting out 429/503 + Retry-After as allowed.

        Every way the suite sends (this client, the openai SDK in sdk.py) goes through
        here, so --rps and the retry policy hold for all, and every retry is counted.
        """
        waited = 0.0
        retries = 0
        while True:
            self.pacer.wait()
            exchange = attempt()
            self._scrub(exchange)
            exchange.retries = retries
            delay = retry_after(exchange)
            if (
                delay is None
                or retries >= self.retry.max_retries
                or waited + delay > self.retry.max_wait
            ):
                return exchange
            retries += 1
            self.retries += 1
            waited += delay
            time.sleep(delay)

    def _send_once(self, case: Case, headers: dict[str, str], body: bytes) -> Exchange:
        exchange = Exchange(
            case=case, url=self.url, request_headers=self.redacted(headers), request_body=body
        )
        self.requests_sent += 1
        limits = self.limits
        start = time.perf_counter()
        try:
            with self._http.stream("POST", self.url, content=body, headers=headers) as response:
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
                exchange.transport_error = f"cannot connect to {self.url}: timed out"
            elif isinstance(exc, httpx.WriteTimeout):
                exchange.transport_error = f"sending the request to {self.url} timed out"
            else:
                option = "--request-timeout" if exchange.status is None else "--stream-gap"
                exchange.transport_error = f"bound hit: {what} exceeded {waited:g} s ({option})"
        except httpx.ConnectError as exc:
            exchange.transport_error = f"cannot connect to {self.url}: {_reason(exc)}"
        except httpx.HTTPError as exc:
            exchange.transport_error = f"transport error from {self.url}: {_reason(exc)}"
        exchange.elapsed = time.perf_counter() - start
        return exchange

    def _scrub(self, exchange: Exchange) -> None:
        """Hide our secrets where a target echoes them back, so no report can show them.

        Done here, for every sender, because the key is only known here; whatever the
        target sent and whatever a sender made of it (errors, the SDK's view) is covered.
        """
        for secret in self._secrets:
            text = secret.decode()
            if secret in exchange.body:
                exchange.body = exchange.body.replace(secret, REDACTED.encode())
            if any(text in v for _, v in exchange.headers.items):
                exchange.headers = Headers(
                    [(k, v.replace(text, REDACTED)) for k, v in exchange.headers.items]
                )
            if exchange.events and any(text in ev.data for ev in exchange.events):
                exchange.events = [
                    replace(ev, data=ev.data.replace(text, REDACTED)) for ev in exchange.events
                ]
            for name in ("transport_error", "stream_error", "sdk"):
                setattr(exchange, name, _without(getattr(exchange, name), text))

    def _read_body(self, response: httpx.Response, exchange: Exchange, start: float) -> None:
        limits = self.limits
        is_sse = exchange.media_type == "text/event-stream"
        parser = SSEParser() if is_sse else None
        events = exchange.events = [] if is_sse else None
        kept: list[bytes] = []
        kept_size = 0
        keep_limit = limits.transcript_bytes if is_sse else limits.max_bytes
        total = 0
        for chunk in response.iter_bytes():
            now = time.perf_counter() - start
            total += len(chunk)
            if kept_size < keep_limit:
                kept.append(chunk[: keep_limit - kept_size])
                kept_size += len(kept[-1])
            if parser is not None and events is not None:
                events.extend(parser.feed(chunk, now))
                if len(events) > limits.max_events:
                    exchange.bound = "max-events"
                    exchange.stream_error = f"bound hit: more than {limits.max_events} events"
                    break
            if total > limits.max_bytes:
                exchange.bound = "max-bytes"
                exchange.stream_error = f"bound hit: body larger than {limits.max_bytes} bytes"
                break
            if now > limits.total:
                exchange.bound = "total"
                exchange.stream_error = f"bound hit: response took longer than {limits.total:g} s"
                break
        else:
            if parser is not None:
                exchange.stream_error = parser.close()
        if parser is not None:
            exchange.invalid_utf8 = parser.invalid_utf8
        exchange.body = b"".join(kept)


def retry_after(exchange: Exchange) -> float | None:
    """Seconds to wait before retrying, when the target asked for a retry; else None."""
    if exchange.status not in RETRYABLE:
        return None
    value = exchange.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _without(value: Any, secret: str) -> Any:
    """``value`` (strings, lists, dicts of them) with ``secret`` replaced."""
    if isinstance(value, str):
        return value.replace(secret, REDACTED)
    if isinstance(value, list):
        return [_without(v, secret) for v in value]
    if isinstance(value, dict):
        return {_without(k, secret): _without(v, secret) for k, v in value.items()}
    return value


def _reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]
