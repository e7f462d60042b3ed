"""The client on the wire: stale keep-alive connections and content codings.

A connection the server closed between requests is not the next request's fault: it is
sent again once on a fresh connection, and the Exchange says so; a failure after the
answer began, or on a fresh connection, stays a finding. A body gzipped or deflated
because our Accept-Encoding allowed it is judged decoded, and the byte bound holds for
the decoded size (a gzip bomb is cut off, not inflated).
"""

from __future__ import annotations

import gzip
import socket
import tracemalloc
import zlib
from collections.abc import Iterator

import pytest
from hostile_servers import (
    MIB,
    RawServer,
    Servers,
    answer_then_reset_mid_body,
    close_after_one_answer,
    encoded,
    respond,
)
from support import API_KEY, Targets, case, failed, judge

from conformance.judging.document.spec import load_spec
from conformance.judging.wire.exchange import Exchange
from conformance.run.client import DECODE_PIECE, Client, Limits, decode_body

LIMITS = Limits(ttfb=2.0, gap=2.0, total=5.0, max_bytes=1 * MIB, max_events=1000)
OK_BODY = b'{"id": "cmpl-1", "object": "text_completion", "choices": []}'


@pytest.fixture
def serve() -> Iterator[Servers]:
    with Servers() as servers:
        yield servers


def send_one(url: str, *, stream: bool = False) -> tuple[Exchange, Client]:
    client = Client(url, api_key=API_KEY, limits=LIMITS)
    try:
        return client.send(case(stream=True) if stream else case()), client
    finally:
        client.close()


def send_twice(url: str) -> tuple[Exchange, Exchange, Client]:
    client = Client(url, api_key=API_KEY, limits=LIMITS)
    try:
        return client.send(case()), client.send(case()), client
    finally:
        client.close()


# -- a connection closed between requests ---------------------------------------------------


@pytest.mark.parametrize("reset", [False, True], ids=["closed", "reset"])
def test_stale_keep_alive_connection_is_sent_again_once_and_noted(
    serve: Servers, reset: bool
) -> None:
    server = serve.start(close_after_one_answer(OK_BODY, reset=reset))
    first, second, client = send_twice(server.url)
    assert (first.status, first.notes) == (200, [])
    assert second.status == 200 and second.transport_error is None, second.transport_error
    assert len(second.notes) == 1 and "fresh connection" in second.notes[0], second.notes
    assert client.stats.reconnects == 1 and client.stats.requests_sent == 3
    # The dropped request reached the server; the repeat came on a new connection.
    assert [r == b"dropped" for r in server.requests] == [False, True, False]


def test_reset_after_the_answer_began_on_a_reused_connection_is_a_finding(
    serve: Servers,
) -> None:
    server = serve.start(answer_then_reset_mid_body(OK_BODY))
    _, second, client = send_twice(server.url)
    assert second.status == 200 and second.transport_error, second
    assert second.notes == [] and client.stats.reconnects == 0
    assert "HTTP-COMPLETE" in failed(judge(load_spec("aihubmix"), second))


def test_fresh_connection_closed_unanswered_is_not_sent_again(serve: Servers) -> None:
    def hang_up(server: RawServer, conn: socket.socket, request: bytes) -> None:
        pass  # read the request, close without a word

    server = serve.start(hang_up)
    ex, client = send_one(server.url)
    assert ex.status is None and "without sending a response" in (ex.transport_error or "")
    assert ex.notes == [] and client.stats.reconnects == 0 and len(server.requests) == 1


# -- content codings ---------------------------------------------------------------------------

HOP_BY_HOP = {"content-length", "transfer-encoding", "content-encoding", "connection"}


def recorded_head(ex: Exchange, coding: str, size: int) -> bytes:
    """``ex``'s status and headers, re-framed for a body of ``size`` bytes in ``coding``."""
    lines = [f"HTTP/1.1 {ex.status} OK"]
    lines += [f"{k}: {v}" for k, v in ex.headers.items if k.lower() not in HOP_BY_HOP]
    lines += [f"Content-Encoding: {coding}", f"Content-Length: {size}", "Connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def raw_deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush()


CODINGS = {
    "gzip": ("gzip", gzip.compress),
    "two gzip members": ("gzip", lambda d: gzip.compress(d[:7]) + gzip.compress(d[7:])),
    "deflate (zlib)": ("deflate", zlib.compress),
    "deflate (raw)": ("deflate", raw_deflate),
}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("name", list(CODINGS))
def test_encoded_answer_is_judged_as_decoded(
    serve: Servers, targets: Targets, name: str, stream: bool
) -> None:
    """The reference target's own answer, re-sent encoded: same bytes, same findings."""
    target = targets.get("aihubmix")
    plain = target.send(case(stream=True) if stream else case())
    assert plain.status == 200 and plain.body
    coding, encode = CODINGS[name]
    body = encode(plain.body)
    server = serve.start(encoded(recorded_head(plain, coding, len(body)), body))
    ex, _ = send_one(server.url, stream=stream)
    assert b"accept-encoding: gzip, deflate" in server.requests[0].lower()
    assert ex.body == plain.body and ex.transport_error is None and ex.notes == []
    if stream:
        assert [e.data for e in ex.events or []] == [e.data for e in plain.events or []]
    assert failed(judge(target.spec, ex)) == failed(judge(target.spec, plain))


def test_gzip_bomb_is_bounded_by_the_decoded_size(serve: Servers) -> None:
    """64 MiB of JSON in ~64 KiB of gzip: cut at the 1 MiB bound, never inflated whole."""
    bomb = gzip.compress(b'{"text": "' + b" " * (64 * MIB), compresslevel=9)
    head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
    head += f"Content-Length: {len(bomb)}\r\nConnection: close\r\n\r\n"
    server = serve.start(encoded(head.encode(), bomb))
    client = Client(server.url, api_key=API_KEY, limits=LIMITS)
    tracemalloc.start()
    try:
        ex = client.send(case())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        client.close()
    assert ex.bound == "max-bytes" and "once decoded" in (ex.stream_error or "")
    assert len(ex.body) <= LIMITS.max_bytes
    assert peak < 8 * MIB, f"peak {peak / MIB:.1f} MiB while reading"
    assert "HTTP-COMPLETE" in failed(judge(load_spec("aihubmix"), ex))


def test_corrupt_gzip_is_a_transport_finding(serve: Servers) -> None:
    body = gzip.compress(OK_BODY)[:12] + b"not gzip at all" * 4
    server = serve.start(respond("200 OK", body, Content_Encoding="gzip"))
    ex, _ = send_one(server.url)
    assert ex.status == 200 and "not valid gzip" in (ex.transport_error or ""), ex
    assert "HTTP-COMPLETE" in failed(judge(load_spec("aihubmix"), ex))


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_a_false_gzip_header_is_its_own_finding_and_the_body_is_judged_as_sent(
    serve: Servers, targets: Targets, stream: bool
) -> None:
    """A plain body said to be gzip: kept as sent, flagged, HTTP-CONTENT-ENCODING alone."""
    target = targets.get("aihubmix")
    plain = target.send(case(stream=True) if stream else case())
    server = serve.start(encoded(recorded_head(plain, "gzip", len(plain.body)), plain.body))
    ex, _ = send_one(server.url, stream=stream)
    assert ex.body == plain.body and ex.transport_error is None and ex.false_encoding == "gzip"
    assert "claims Content-Encoding gzip but is not gzip" in ex.notes[0]
    findings = judge(target.spec, ex)
    assert failed(findings) == failed(judge(target.spec, plain)) | {"HTTP-CONTENT-ENCODING"}
    assert "is not gzip" in findings["HTTP-CONTENT-ENCODING"].message
    assert findings["HTTP-CONTENT-ENCODING"].outcome == "failed"


def test_coding_not_asked_for_is_kept_as_sent_with_a_note(serve: Servers) -> None:
    server = serve.start(respond("200 OK", b"\x8b\x02\x80{}\x03", Content_Encoding="br"))
    ex, _ = send_one(server.url)
    assert ex.body == b"\x8b\x02\x80{}\x03" and ex.transport_error is None
    assert len(ex.notes) == 1 and "'br' was not asked for" in ex.notes[0]


@pytest.mark.parametrize("name", list(CODINGS))
def test_decode_body_for_other_senders(name: str) -> None:
    """The SDK's tee records raw bytes: decode_body turns them into what the SDK read."""
    coding, encode = CODINGS[name]
    body = b'{"choices": [{"text": "' + b"word " * 30_000 + b'"}]}'
    raw = encode(body)
    pieces = list(decode_body((raw[i : i + 100] for i in range(0, len(raw), 100)), coding))
    assert b"".join(pieces) == body and max(map(len, pieces)) <= DECODE_PIECE
    assert list(decode_body([b"as", b"sent"], None)) == [b"as", b"sent"]
