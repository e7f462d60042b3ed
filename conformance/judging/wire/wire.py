"""Building an Exchange from wire bytes or a recorded transcript, as the suite's client would.

Replaying is a user feature: judge a captured production exchange, or a server's
documented answer, offline (``conformance.judge(spec, exchange_from_wire(...))``). The
bytes are turned into the Exchange conformance/run/client.py builds: the content coding
undone as httpx undoes it, a stream's events parsed by the suite's own SSE parser, one
feed per TCP write when the writes are known. The transcript format (one JSON object per
exchange) is described in tests/transcripts/README.md.
"""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange, Headers
from conformance.judging.wire.sse import SSEParser

PATH = "/v1/completions"
#: The first bytes of every gzip stream (RFC 1952).
GZIP_MAGIC = b"\x1f\x8b"
LOCAL = "http://127.0.0.1"


def decode_content(data: bytes, coding: str | None) -> bytes:
    """Undo a Content-Encoding the way httpx does for the suite's client (gzip, deflate)."""
    for token in reversed([t.strip().lower() for t in (coding or "").split(",") if t.strip()]):
        if token in ("gzip", "x-gzip"):
            data = gzip.decompress(data)
        elif token == "deflate":
            try:
                data = zlib.decompress(data)
            except zlib.error:
                data = zlib.decompress(data, -zlib.MAX_WBITS)
        elif token != "identity":
            raise ValueError(f"content coding {token!r} not supported by the replay")
    return data


def exchange_from_wire(
    case: Case,
    status: int | None,
    headers: Iterable[tuple[str, str]] = (),
    body: bytes = b"",
    *,
    writes: Sequence[bytes] = (),
    times: Sequence[float] = (),
    url: str = LOCAL + PATH,
    request_headers: Mapping[str, str] | None = None,
    transport_error: str | None = None,
    bound: str | None = None,
) -> Exchange:
    """The Exchange the suite's client would have built from this answer.

    ``body`` is the response body as sent (still content-coded); ``writes``, when known,
    the stream's TCP writes as the client read them (each fed to the SSE parser), and
    ``times`` when each arrived (seconds since the request was sent; else 0, 1, 2...).
    ``status`` None: no answer (``transport_error`` or ``bound`` says why). A body said to
    be gzip that does not start as gzip does is kept as sent and flagged, as the client
    does (``Exchange.false_encoding``).
    """
    raw = case.raw_body if case.raw_body is not None else json.dumps(case.body).encode()
    exchange = Exchange(
        case=case,
        url=url,
        request_headers=dict(request_headers or {}),
        request_body=raw,
        status=status,
        headers=Headers([(str(k), str(v)) for k, v in headers]),
        transport_error=transport_error,
        bound=bound,
    )
    if status is None:
        return exchange
    coding = exchange.headers.get("content-encoding")
    if _gzip(coding) and body and not body.startswith(GZIP_MAGIC):
        exchange.false_encoding = (coding or "").strip().lower()
        exchange.body, writes = body, ()
    else:
        exchange.body = decode_content(body, coding)
    if exchange.media_type == "text/event-stream":
        parser = SSEParser()
        exchange.events = []
        for i, chunk in enumerate(list(writes) or [exchange.body]):
            exchange.events.extend(parser.feed(chunk, times[i] if i < len(times) else float(i)))
        if exchange.bound is None:
            exchange.stream_error = parser.close()
        exchange.invalid_utf8 = parser.invalid_utf8
    return exchange


def _gzip(coding: str | None) -> bool:
    return (coding or "").strip().lower() in ("gzip", "x-gzip")


def case_from_transcript(data: Mapping[str, Any]) -> Case:
    """The Case a transcript's request was sent as."""
    sent_as = data.get("case", {})
    request = data["request"]
    raw = request.get("raw_body")
    return Case(
        body=request.get("body") if isinstance(request.get("body"), dict) else {},
        mode=sent_as.get("mode", "valid"),
        label=sent_as.get("label", data.get("title", "")),
        breaks=sent_as.get("breaks"),
        auth=sent_as.get("auth", "default"),
        raw_body=raw.encode("utf-8") if isinstance(raw, str) else None,
        tags=frozenset(sent_as.get("tags", ())),
    )


def _body(response: Mapping[str, Any]) -> bytes:
    if "body_base64" in response:
        return base64.b64decode(response["body_base64"])
    return str(response.get("body", "")).encode("utf-8")


def _writes(response: Mapping[str, Any]) -> list[bytes]:
    if "writes_base64" in response:
        return [base64.b64decode(w) for w in response["writes_base64"]]
    return [w.encode("utf-8") for w in response.get("writes", [])]


def exchange_from_transcript(data: Mapping[str, Any]) -> Exchange:
    """The Exchange of one recorded transcript (tests/transcripts/README.md)."""
    request, response = data["request"], data["response"]
    return exchange_from_wire(
        case_from_transcript(data),
        response.get("status"),
        [(str(k), str(v)) for k, v in response.get("headers", [])],
        _body(response),
        writes=_writes(response),
        url=LOCAL + request.get("path", PATH),
        request_headers=request.get("headers", {}),
        transport_error=response.get("transport_error"),
        bound=response.get("bound"),
    )
