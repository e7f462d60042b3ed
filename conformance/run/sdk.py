"""Drive the official ``openai`` Python client against the target, recording the wire.

The SDK is what most users' code runs, so "the SDK reads every field without error" is a
requirement of its own. The SDK's HTTP client gets a transport that tees every byte it
reads, so one request yields both views: the Exchange as on the wire (judged by every
requirement like any other) and, in ``Exchange.sdk``, what the SDK made of it.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from typing import Any

from conformance.judging.exceptions import ConformanceError
from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange, Headers
from conformance.judging.wire.sse import SSEParser
from conformance.run.client import Client, Limits


def available() -> bool:
    """Whether the openai package is installed, without importing it.

    Importing it costs about 0.6 s of CPU (its pydantic types); that is paid by the first
    SDK send, on a sender thread, where a slow target's wait hides it.
    """
    try:
        return importlib.util.find_spec("openai") is not None
    except (ImportError, ValueError):
        return False


_preloading: list[threading.Thread] = []


def preload() -> None:
    """Start importing the openai package on a thread of its own, now.

    For a run with senders in flight: the import overlaps the target's latency instead of
    holding a send slot. Every use of the package first waits for that import to end
    (``_imported``): two threads importing one package at once can see it half
    initialised.
    """
    if not _preloading:
        thread = threading.Thread(
            target=importlib.import_module,
            args=("openai",),
            name="conformance-import-openai",
            daemon=True,
        )
        _preloading.append(thread)
        thread.start()


def _imported() -> None:
    """Wait for a preload in progress, so this thread never imports openai beside it."""
    for thread in _preloading:
        thread.join()


def join_preload() -> None:
    """Wait for a preload in progress: a run that ends before it used the package (rate
    limited, the target down) must not leave an import running past its end."""
    _imported()


def _http_module() -> Any:
    """The HTTP library the installed openai package is built on (httpx or a fork)."""
    _imported()
    import openai

    base = next(c for c in type.mro(openai.DefaultHttpxClient)[1:] if c.__name__ == "Client")
    return sys.modules[base.__module__.split(".")[0]]


@functools.cache
def _tls_context(http: Any) -> Any:
    """The default TLS context, built once per process (about 35 ms of CPU each time)."""
    make = getattr(http, "create_ssl_context", None)
    return make() if make is not None else True


class BoundHit(ConformanceError):
    """The answer outgrew the suite's limits while the SDK read it."""


class ContentDecoder:
    """Undo the Content-Encoding the target chose, chunk by chunk, as the SDK's client does.

    The transport sees the bytes as sent; the Exchange must hold what the SDK read (a
    gzipped JSON body is legal when the request's Accept-Encoding allowed it). Codings
    other than gzip and deflate are kept as sent.
    """

    def __init__(self, coding: str) -> None:
        coding = coding.strip().lower()
        self.inner: Any = None
        #: The header named a coding the body does not have (not even its first bytes).
        self.false = False
        self._started = False
        if coding in ("gzip", "x-gzip"):
            self.inner = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif coding == "deflate":
            self.inner = zlib.decompressobj()

    def feed(self, chunk: bytes) -> bytes:
        if self.inner is None:
            return chunk
        try:
            out = bytes(self.inner.decompress(chunk))
        except zlib.error:
            self.inner = None  # not what the header says: keep the bytes as sent
            self.false = not self._started
            return chunk
        self._started = True
        return out


def _tee_transport(
    http: Any,
    record: list[tuple[float, bytes]],
    start: list[float],
    limits: Limits,
    hit: list[str],
    seen: dict[str, Any] | None = None,
) -> Any:
    """A transport that passes everything through and records the body bytes as read.

    It enforces the suite's byte and total-time bounds (the SDK has none), so a huge or
    endless answer ends the SDK's read with a bound named in ``hit``.
    """

    class TeeStream(http.SyncByteStream):  # type: ignore[misc]
        def __init__(self, inner: Any, coding: str) -> None:
            self.inner = inner
            self.decoder = ContentDecoder(coding)

        def __iter__(self) -> Iterator[bytes]:
            size = 0
            for chunk in self.inner:
                at = time.perf_counter() - start[0]
                decoded = self.decoder.feed(chunk)
                if self.decoder.false and seen is not None:
                    seen["false_encoding"] = True
                size += len(decoded)  # decoded: a small gzip may unpack to a huge body
                if size > limits.max_bytes or at > limits.total:
                    hit.append("max-bytes" if size > limits.max_bytes else "total")
                    raise BoundHit(hit[-1])
                if decoded:
                    record.append((at, decoded))
                yield chunk

        def close(self) -> None:
            self.inner.close()

    class TeeTransport(http.BaseTransport):  # type: ignore[misc]
        def __init__(self) -> None:
            self.inner = http.HTTPTransport(verify=_tls_context(http))

        def handle_request(self, request: Any) -> Any:
            start[0] = time.perf_counter()
            response = self.inner.handle_request(request)
            coding = response.headers.get("content-encoding", "")
            # Multiple codings ("gzip, br") are rare; the last one is undone first.
            coding = coding.split(",")[-1] if coding else ""
            if seen is not None:  # what came, should the SDK fail before returning it
                seen.update(status=response.status_code, headers=response.headers, coding=coding)
            return http.Response(
                response.status_code,
                headers=response.headers,
                stream=TeeStream(response.stream, coding),
                extensions=response.extensions,
                request=request,
            )

        def close(self) -> None:
            self.inner.close()

    return TeeTransport()


def send(client: Client, case: Case) -> Exchange:
    """Send ``case`` through the openai SDK; the Exchange carries the SDK's view in ``sdk``."""
    _imported()
    import openai

    http = _http_module()
    record: list[tuple[float, bytes]] = []
    hit: list[str] = []
    seen: dict[str, Any] = {}
    start = [time.perf_counter()]
    headers = client.headers_for(case)
    # The spec's declared media type goes too (Nscale declares `application/json;
    # charset=utf-8`): the SDK's own `application/json` is not declared there, so a
    # request the suite calls valid would not be. The case header rides along.
    extra = {k: v for k, v in headers.items() if k.lower() not in ("authorization", "accept")}
    limits = client.limits
    sdk = openai.OpenAI(
        api_key=client.api_key or "no-key",
        base_url=client.url.removesuffix("/completions"),
        max_retries=0,
        timeout=http.Timeout(limits.total, connect=limits.ttfb, read=limits.gap),
        default_headers=extra,
        http_client=openai.DefaultHttpxClient(
            transport=_tee_transport(http, record, start, limits, hit, seen)
        ),
    )
    body = dict(case.body)
    kwargs = {k: v for k, v in body.items() if k not in ("model", "prompt")}
    view: dict[str, Any] = {"error": None}
    status: int | None = None
    response_headers = Headers()
    try:
        raw = sdk.completions.with_raw_response.create(
            model=body["model"], prompt=body["prompt"], **kwargs
        )
        status = raw.http_response.status_code
        response_headers = Headers(list(raw.http_response.headers.multi_items()))
        parsed = raw.parse()
        view.update(read_stream(parsed) if case.stream else read_completion(parsed))
    except (openai.APIConnectionError, http.TransportError) as exc:
        # Timeouts and resets, before the answer (wrapped by the SDK) or while reading a
        # stream (raised by httpx as they are): the transport's fault, HTTP-COMPLETE's.
        view["error"] = f"{type(exc).__name__}: {exc}"[:300]
        view["transport"] = True
    except openai.APIStatusError as exc:
        status = exc.status_code
        response_headers = Headers(list(exc.response.headers.multi_items()))
        view["error"] = f"{type(exc).__name__}: {exc.message}"[:300]
    except Exception as exc:  # the SDK failing to read the answer is the finding
        view["error"] = f"{type(exc).__name__}: {exc}"[:300]
        # ...unless the HTTP stack itself failed (a timeout or reset raised unwrapped):
        # that is the transport's fault, HTTP-COMPLETE's.
        view["transport"] = type(exc).__module__.startswith(("httpx", "httpcore"))
    finally:
        sdk.close()
    false_encoding = seen.get("false_encoding") and status is None
    if false_encoding:
        # The SDK's HTTP stack failed on a body that is not the coding its header names:
        # HTTP-CONTENT-ENCODING's finding (the wire exchanges carry it), not a lost answer.
        status = seen["status"]
        response_headers = Headers(list(seen["headers"].multi_items()))
        view["transport"] = True
    if hit:
        view["transport"] = True  # our bound, not the SDK's failure
    exchange = _exchange(client, case, status, response_headers, record, view)
    if false_encoding:
        exchange.false_encoding = str(seen["coding"]).strip().lower()
    if hit:
        exchange.bound = hit[0]
        exchange.stream_error = f"bound hit: {hit[0]} (--max-body-bytes / --stream-total)"
    return exchange


def _exchange(
    client: Client,
    case: Case,
    status: int | None,
    headers: Headers,
    record: list[tuple[float, bytes]],
    view: dict[str, Any],
) -> Exchange:
    body = b"".join(chunk for _, chunk in record)
    exchange = Exchange(
        case=case,
        url=client.url,
        request_headers=client.redacted(client.headers_for(case)),
        request_body=client.encode(case),
        status=status,
        headers=headers,
        body=body,
    )
    if exchange.media_type == "text/event-stream":
        parser = SSEParser()
        exchange.events = [ev for at, chunk in record for ev in parser.feed(chunk, at)]
        exchange.stream_error = parser.close()
    if status is None:
        exchange.transport_error = view["error"]
    exchange.elapsed = record[-1][0] if record else 0.0
    exchange.sdk = view
    return exchange


def read_completion(completion: Any) -> dict[str, Any]:
    """Every field a user's code reads from a non-streamed Completion."""
    return {
        "id": completion.id,
        "object": completion.object,
        "created": completion.created,
        "model": completion.model,
        "choices": [_read_choice(c) for c in completion.choices],
        "usage": _read_usage(completion.usage),
    }


def read_stream(stream: Any) -> dict[str, Any]:
    """Consume a Stream as users do: text per index, finish reasons, the usage chunk."""
    texts: dict[int, str] = {}
    finish: dict[int, str] = {}
    chunks = no_text = 0
    usage = None
    for chunk in stream:
        chunks += 1
        for choice in chunk.choices:
            seen = _read_choice(choice)
            if seen["text"] is None:
                no_text += 1  # users' `+= choice.text` would raise here
            else:
                texts[seen["index"]] = texts.get(seen["index"], "") + seen["text"]
            if seen["finish_reason"] is not None:
                finish[seen["index"]] = seen["finish_reason"]
        if chunk.usage is not None:
            usage = _read_usage(chunk.usage)
    return {
        "chunks": chunks,
        "texts": texts,
        "finish_reasons": finish,
        "usage": usage,
        "text_none": no_text,
    }


def _read_choice(choice: Any) -> dict[str, Any]:
    logprobs = choice.logprobs
    return {
        "index": int(choice.index),
        "text": choice.text,  # None stays None: that is what users' code gets
        "finish_reason": choice.finish_reason,
        "tokens": list(logprobs.tokens or []) if logprobs is not None else None,
        "token_logprobs": list(logprobs.token_logprobs or []) if logprobs is not None else None,
    }


def _read_usage(usage: Any) -> dict[str, int] | None:
    if usage is None:
        return None
    return {
        "prompt_tokens": int(usage.prompt_tokens),
        "completion_tokens": int(usage.completion_tokens),
        "total_tokens": int(usage.total_tokens),
    }
