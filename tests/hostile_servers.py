"""Tiny raw-socket HTTP servers on 127.0.0.1 that misbehave on purpose.

Each server runs one ``Behaviour`` per connection in a daemon thread. Behaviours that
stall wait on the server's ``stopping`` event rather than sleeping, so ``stop()`` ends
them at once. Every request a server receives is recorded (``requests``), so a test can
assert that a host got nothing, e.g. the target of a redirect.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from types import TracebackType

Behaviour = Callable[["RawServer", socket.socket, bytes], None]
CHUNK = 64 * 1024
MIB = 1024 * 1024


class RawServer:
    """Accept connections on 127.0.0.1 and hand each to ``behaviour`` in its own thread."""

    def __init__(self, behaviour: Behaviour, host: str = "127.0.0.1") -> None:
        self.behaviour = behaviour
        self.stopping = threading.Event()
        self.requests: list[bytes] = []
        self._sock = socket.create_server((host, 0))
        self._sock.settimeout(0.1)
        self.port = self._sock.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._serve, name="hostile-server", daemon=True)

    def __enter__(self) -> RawServer:
        self._accept.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        self.stopping.set()
        self._accept.join(2)
        for thread in self._threads:
            thread.join(2)
        self._sock.close()

    def _serve(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                request = read_request(conn)
                self.requests.append(request)
                self.behaviour(self, conn, request)
            except OSError:
                pass  # the client hung up: exactly what a bound is for

    def hold(self, seconds: float = 60.0) -> None:
        """Keep the connection open and silent until the server stops."""
        self.stopping.wait(seconds)


def read_request(conn: socket.socket) -> bytes:
    """Read one request: the head, then as many body bytes as Content-Length says."""
    conn.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(CHUNK)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(CHUNK)
        if not chunk:
            break
        body += chunk
    conn.settimeout(None)
    return head + b"\r\n\r\n" + body


def head(
    status: str = "200 OK", content_type: str = "application/json", **headers: str | int
) -> bytes:
    """A response head; keyword names become headers (underscores as dashes)."""
    # One request per connection: the client must not reuse it.
    lines = [f"HTTP/1.1 {status}", f"Content-Type: {content_type}", "Connection: close"]
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunked(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


# -- behaviours ------------------------------------------------------------------------


def silent(server: RawServer, conn: socket.socket, request: bytes) -> None:
    """Accept, read the request, never answer."""
    server.hold()


def headers_then_stall(server: RawServer, conn: socket.socket, request: bytes) -> None:
    """Send the head and one body byte of a promised 1000, then nothing."""
    conn.sendall(head(Content_Length=1000) + b"{")
    server.hold()


def endless_sse(server: RawServer, conn: socket.socket, request: bytes) -> None:
    """An event stream that never ends, as fast as the client reads."""
    conn.sendall(head(content_type="text/event-stream", Transfer_Encoding="chunked"))
    event = b'data: {"id":"x","object":"text_completion","choices":[]}\n\n'
    block = chunked(event * 64)
    while not server.stopping.is_set():
        conn.sendall(block)


def slow_endless_sse(server: RawServer, conn: socket.socket, request: bytes) -> None:
    """An event stream that never ends: one event every 50 ms, always within the gap."""
    conn.sendall(head(content_type="text/event-stream", Transfer_Encoding="chunked"))
    while not server.stopping.wait(0.05):
        conn.sendall(chunked(b": still here\n\ndata: {}\n\n"))


def endless_plain(server: RawServer, conn: socket.socket, request: bytes) -> None:
    """A chunked JSON body that never ends."""
    conn.sendall(head(Transfer_Encoding="chunked") + chunked(b'{"text": "'))
    block = chunked(b"a" * CHUNK)
    while not server.stopping.is_set():
        conn.sendall(block)


def huge_body(server: RawServer, conn: socket.socket, request: bytes) -> None:
    """A 100 MB body with an honest Content-Length."""
    size = 100 * MIB
    conn.sendall(head(Content_Length=size))
    block = b" " * CHUNK
    for _ in range(size // CHUNK):
        if server.stopping.is_set():
            return
        conn.sendall(block)


def respond(
    status: str, body: bytes, content_type: str = "application/json", **headers: str | int
) -> Behaviour:
    """A complete answer with the given body (and extra headers)."""

    def behaviour(server: RawServer, conn: socket.socket, request: bytes) -> None:
        conn.sendall(head(status, content_type, Content_Length=len(body), **headers) + body)

    return behaviour


def reset_mid_body(server: RawServer, conn: socket.socket, request: bytes) -> None:
    """Promise 1000 bytes, send 100, then reset the connection (RST, not FIN)."""
    conn.sendall(head(Content_Length=1000) + b'{"id": "' + b"x" * 92)
    # SO_LINGER with a zero timeout makes close() send a reset.
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def redirect_to(location: str) -> Behaviour:
    """Answer 307 Temporary Redirect to ``location``: a client that follows resends the body."""

    def behaviour(server: RawServer, conn: socket.socket, request: bytes) -> None:
        conn.sendall(head("307 Temporary Redirect", Location=location, Content_Length=0))

    return behaviour


# -- connection reuse and content coding ---------------------------------------------------


def keep_alive_answer(status: str, body: bytes, **headers: str | int) -> bytes:
    """A complete answer that leaves the connection open (no ``Connection: close``)."""
    lines = [f"HTTP/1.1 {status}", "Content-Type: application/json", f"Content-Length: {len(body)}"]
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def close_after_one_answer(body: bytes, *, reset: bool = False) -> Behaviour:
    """Answer the first request of a connection, keep it open, drop it at the next request.

    What llama-cpp-python does after a 500, seen from the client: the connection looks
    idle and reusable; the next request written to it gets nothing (FIN, or with
    ``reset`` an RST) before any byte of an answer.
    """

    def behaviour(server: RawServer, conn: socket.socket, request: bytes) -> None:
        conn.sendall(keep_alive_answer("200 OK", body))
        if read_request(conn):  # the next request arrives: drop it unanswered
            server.requests.append(b"dropped")
            if reset:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    return behaviour


def answer_then_reset_mid_body(body: bytes) -> Behaviour:
    """Answer the first request; on the reused connection, begin an answer and reset."""

    def behaviour(server: RawServer, conn: socket.socket, request: bytes) -> None:
        conn.sendall(keep_alive_answer("200 OK", body))
        if read_request(conn):
            server.requests.append(b"second")
            conn.sendall(head(Content_Length=1000) + b'{"id": "')
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    return behaviour


def encoded(head_bytes: bytes, body: bytes) -> Behaviour:
    """Send exactly ``head_bytes`` + ``body`` (a recorded or encoded answer)."""

    def behaviour(server: RawServer, conn: socket.socket, request: bytes) -> None:
        conn.sendall(head_bytes + body)

    return behaviour


# -- a target held by one request (FastChat and an n: 129 it accepted) -----------------------


def gone(conn: socket.socket) -> bool:
    """The client closed the connection (a peek reads end of stream)."""
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


HELD_COMPLETION = b'{"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m", "choices": [{"index": 0, "text": "hi", "finish_reason": "stop", "logprobs": null}]}'
HELD_CHUNK = b'data: {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m", "choices": [{"index": 0, "text": "hi", "finish_reason": null, "logprobs": null}]}\n\n'


class HeldBySlowRequest:
    """A behaviour: a one-slot target that a slow request holds, as FastChat was held 28 s by
    an ``n: 129`` it accepted while healthy streams queued behind it.

    A request whose prompt is ``"hold"`` takes the slot for ``hold`` seconds (``arrived``
    is set once it holds it), then answers a completion; it keeps the slot that long even
    when its client left (the work goes on, as llama-cpp-python's and FastChat's did).
    Another request that is not a stream (the suite's minimal request) waits for the slot,
    then answers a completion. A stream answers its head and
    first event at once, then waits for the slot to send the rest, writing an SSE comment
    every ``keepalive`` seconds meanwhile if set; one whose client went away is dropped.
    With ``cut_after``, a stream that waited that long is cut (a reset), as a proxy that
    gives up on a busy upstream does.
    """

    def __init__(
        self, hold: float, *, keepalive: float | None = None, cut_after: float | None = None
    ) -> None:
        self.hold = hold
        self.keepalive = keepalive
        self.cut_after = cut_after
        self.slot = threading.Lock()
        self.arrived = threading.Event()

    def __call__(self, server: RawServer, conn: socket.socket, request: bytes) -> None:
        if b'"prompt": "hold"' in request:
            with self.slot:
                self.arrived.set()
                server.stopping.wait(self.hold)
                respond("200 OK", HELD_COMPLETION)(server, conn, request)
            return
        if b'"stream": true' not in request:
            with self.slot:
                if not gone(conn):
                    respond("200 OK", HELD_COMPLETION)(server, conn, request)
            return
        conn.sendall(head(content_type="text/event-stream", Transfer_Encoding="chunked"))
        conn.sendall(chunked(HELD_CHUNK))
        if self.cut_after is not None and not self.slot.acquire(timeout=self.cut_after):
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return
        while self.cut_after is None and not self.slot.acquire(timeout=self.keepalive or -1):
            if gone(conn) or server.stopping.is_set():
                return
            conn.sendall(chunked(b": waiting for the slot\n\n"))
        try:
            if not gone(conn):
                conn.sendall(chunked(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        finally:
            self.slot.release()


class Servers(list[RawServer]):
    """The servers a test started (``servers.start(behaviour)``), all stopped on exit."""

    def start(self, behaviour: Behaviour) -> RawServer:
        server = RawServer(behaviour).__enter__()
        self.append(server)
        return server

    def __enter__(self) -> Servers:
        return self

    def __exit__(self, *exc: object) -> None:
        for server in self:
            server.stop()
