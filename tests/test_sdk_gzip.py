"""The SDK path records what the SDK read: a gzipped answer is decoded, not a finding.

A tiny local server gzips its JSON body and its event stream (legal: the request's
Accept-Encoding allows gzip). The Exchange that ``conformance.run.sdk.send`` records must hold
the decoded bytes, so RESP-SCHEMA and SDK-COMPLETION judge the answer the SDK read.
"""

from __future__ import annotations

import gzip
import json
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from support import judge
from synthetic import chunks_for, completion_for, req

from conformance.judging.document.spec import load_spec
from conformance.run import sdk
from conformance.run.client import Client

STREAM = req(stream=True, stream_options={"include_usage": True})


class Gzipping(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if body.get("stream"):
            events = [f"data: {json.dumps(c)}\n\n" for c in chunks_for(STREAM)]
            raw = ("".join(events) + "data: [DONE]\n\n").encode()
            media = "text/event-stream"
        else:
            raw = json.dumps(completion_for(req())).encode()
            media = "application/json"
        packed = gzip.compress(raw)
        self.send_response(200)
        self.send_header("content-type", media)
        self.send_header("content-encoding", "gzip")
        self.send_header("content-length", str(len(packed)))
        self.send_header("x-request-id", "r1")
        self.send_header("inference-id", "r1")
        self.end_headers()
        self.wfile.write(packed)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Gzipping)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("flavor", ["aihubmix", "nscale"])
def test_gzipped_completion_is_judged_decoded(url: str, flavor: str) -> None:
    client = Client(url, api_key="k")
    exchange = sdk.send(client, req())
    assert exchange.sdk is not None and exchange.sdk["error"] is None
    assert exchange.json == completion_for(req())
    findings = judge(load_spec(flavor), exchange)
    assert findings["RESP-SCHEMA"].outcome == "passed"
    assert findings["SDK-COMPLETION"].outcome == "passed"


def test_gzipped_stream_is_judged_decoded(url: str) -> None:
    exchange = sdk.send(Client(url, api_key="k"), STREAM)
    assert exchange.events is not None and exchange.events[-1].data == "[DONE]"
    findings = judge(load_spec("aihubmix"), exchange)
    failed = {rid for rid, f in findings.items() if f.outcome == "failed"}
    assert failed == set()
    assert findings["SDK-STREAM"].outcome == "passed"


def test_decoder_keeps_bytes_that_are_not_what_the_header_says() -> None:
    assert sdk.ContentDecoder("gzip").feed(b"plain") == b"plain"
    assert sdk.ContentDecoder("identity").feed(b"x") == b"x"
    packed = zlib.compress(b"deflated")
    assert sdk.ContentDecoder("deflate").feed(packed) == b"deflated"
