"""The proxy does not meet a keep-alive close halfway, on either side (issue 36).

A server closes a connection idle for its keep-alive timeout; a client that reuses it just
then sends its request into the close: a reset, a cut stream. httpx keeps idle
connections 5 s, uvicorn closes them after 5 s: both of the proxy's hops raced (the
throughput benchmark's 502s and cut client streams). The upstream here closes (resets) a
connection that a request reaches after 2.2 s of idle, as an upstream whose timeout ran
out just then does: the proxy must not reuse a connection idle that long. And a client
keeping its connection 5.5 s (longer than httpx's 5 s) must still find it open.
"""

from __future__ import annotations

import socket
import struct
import threading
import time

import httpx

from conformance.front.proxy import ProxyServer
from conformance.judging.document.spec import load_spec

KEY = "sk-proxy-keepalive-0123456789"
BODY = b'{"object":"list","data":[]}'
ANSWER = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    + f"content-length: {len(BODY)}\r\n\r\n".encode()
    + BODY
)
REQUEST = b"GET /v1/models HTTP/1.1\r\nHost: proxy\r\nAuthorization: Bearer " + KEY.encode()


def closing_upstream() -> tuple[socket.socket, str]:
    """Answers GETs, keeping connections alive, but resets a connection whose next
    request comes after 2.2 s of idle (its keep-alive close met the request)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve(conn: socket.socket) -> None:
        served_at = None
        with conn:
            while True:
                data = b""
                while b"\r\n\r\n" not in data:
                    more = conn.recv(65536)
                    if not more:
                        return
                    data += more
                if served_at is not None and time.monotonic() - served_at >= 2.2:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return  # closed with SO_LINGER 0: a reset
                conn.sendall(ANSWER)
                served_at = time.monotonic()

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener, f"http://127.0.0.1:{listener.getsockname()[1]}"


def answer_on(sock: socket.socket) -> bytes:
    """One request on a raw client connection to the proxy; the answer's status line."""
    sock.sendall(REQUEST + b"\r\n\r\n")
    data = b""
    while not data.endswith(BODY):
        more = sock.recv(65536)
        if not more:
            break
        data += more
    return data.split(b"\r\n", 1)[0]


def test_no_connection_is_reused_into_a_keep_alive_close() -> None:
    listener, upstream = closing_upstream()
    try:
        with ProxyServer(upstream, load_spec("aihubmix")) as proxy:
            port = int(proxy.url.rsplit(":", 1)[1])
            with socket.create_connection(("127.0.0.1", port)) as kept:
                assert answer_on(kept) == b"HTTP/1.1 200 OK"
                time.sleep(2.5)
                # The proxy's upstream connection has been idle 2.5 s: not reused.
                answer = httpx.get(
                    proxy.url + "/v1/models", headers={"Authorization": f"Bearer {KEY}"}
                )
                assert answer.status_code == 200, answer.text
                time.sleep(3.0)
                # Idle 5.5 s: the proxy has not closed its side.
                assert answer_on(kept) == b"HTTP/1.1 200 OK"
    finally:
        listener.close()
