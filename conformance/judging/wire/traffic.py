"""Traffic the suite did not send, as the judge reads it: HAR, JSONL, transcripts, the proxy.

Each recorded or forwarded exchange becomes a :class:`Seen` (the request and the answer
as they crossed the wire, and where it came from), then the Exchange the suite's client
would have built (:func:`exchange_of`, through conformance.judging.wire.wire). Its Case is
what the request *is* under the judged document, never what a sender says it is: the
request oracle (conformance.judging.document.oracle) names the rules it breaks, so an invalid request is
judged as the invalid request it is; a request without credentials where the document
declares bearer auth is judged as one. Secrets never leave this module: every request
header value but a few harmless ones is redacted, and the key and those values are
scrubbed from the answer (conformance.run.client.scrub), as for the suite's own requests.

Readers (:func:`read`) yield each entry or a :class:`BadEntry` naming the file and the
entry, and go on: one bad entry never loses the others, a truncated HAR gives up the
entries before the cut. A file that cannot be read at all (missing, not text, none of the
formats) is one BadEntry, ``whole``, the first and only one it yields: the judge then
judges nothing (bad input). Formats: docs/traffic.md.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Union
from urllib.parse import urlsplit

from conformance.judging.checks.defaults import DEFAULT_MAX_TOKENS_TAG
from conformance.judging.document.spec import Spec
from conformance.judging.exceptions import ConformanceError
from conformance.judging.wire.case import Auth, Case
from conformance.judging.wire.exchange import HOP_BY_HOP, Exchange
from conformance.judging.wire.redaction import REDACTED, scrub
from conformance.judging.wire.wire import exchange_from_transcript, exchange_from_wire

#: Request headers whose values are shown as sent: they hold no secret and a reader needs
#: them to replay the request. Every other value is redacted (a gateway's own key header,
#: a cookie, a tenant id are all secrets we cannot tell apart from harmless ones).
SHOWN = frozenset(
    {"content-type", "content-length", "accept", "accept-encoding", "user-agent", "host"}
)
#: Shown as well: the suite's own case header and the openai SDK's platform headers.
SHOWN_PREFIXES = ("x-conformance-", "x-stainless-")
#: Authorization schemes: the word alone holds no secret (a bare key would).
SCHEMES = frozenset({"bearer", "basic", "digest"})


#: HAR custom fields (HAR 1.2 allows names starting with "_") this proxy writes: the
#: transport error that cut an answer, a Content-Encoding the body did not have.
TRANSPORT_ERROR = "_transportError"
FALSE_ENCODING = "_falseEncoding"


class BadEntry(ConformanceError):
    """An entry that cannot be judged: ``where`` names the file and the entry; ``whole``:
    the file itself cannot be read, so it holds no entry at all."""

    def __init__(self, where: str, message: str, *, whole: bool = False) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message
        self.whole = whole


@dataclass(frozen=True, slots=True)
class Passed:
    """An entry that is not judged, and why (a request to another operation)."""

    where: str
    reason: str


#: Which entries are judged: the request's method and URL in, whether it is ours out.
Wanted = Callable[[str, str], bool]


def everything(method: str, url: str) -> bool:
    return True


Entry = Union["Seen", BadEntry, Passed]


@dataclass(frozen=True, slots=True)
class Seen:
    """One exchange as it crossed the wire, before it is judged.

    ``body`` is the answer as sent (still content-coded) unless ``decoded`` (a HAR keeps
    bodies decoded); ``writes`` and ``times`` are a stream's reads and when each arrived
    (seconds since the request was sent), when known. ``status`` None: no answer
    (``transport_error`` says why).
    """

    where: str
    method: str
    url: str
    request_headers: tuple[tuple[str, str], ...]
    request_body: bytes
    status: int | None
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    decoded: bool = False
    writes: tuple[bytes, ...] = ()
    times: tuple[float, ...] = ()
    ttfb: float | None = None
    elapsed: float = 0.0
    transport_error: str | None = None
    false_encoding: str | None = None
    #: When the request was sent (Unix time), when known.
    started: float | None = None
    #: A recorded transcript: its own Case (the suite's label of the request) stands.
    transcript: Mapping[str, Any] | None = None

    def header(self, name: str) -> str | None:
        lname = name.lower()
        return next((v for k, v in self.request_headers if k.lower() == lname), None)


def operation_of(spec: Spec) -> Wanted:
    """Whether a request is to the judged operation: POST to a path that ends in the
    document's (a gateway may mount it under a prefix of its own)."""
    operation = spec.operation_path.rstrip("/")

    def wanted(method: str, url: str) -> bool:
        path = urlsplit(url).path.rstrip("/")
        return method.upper() == "POST" and path.endswith(operation)

    return wanted


def model_of(exchange: Exchange) -> str:
    """The model the request asked for, as the live verdict groups it."""
    model = exchange.case.body.get("model")
    return model if isinstance(model, str) and model else "(no model)"


# -- the Case of a request seen in traffic -----------------------------------------------


def auth_of(spec: Spec, headers: Sequence[tuple[str, str]]) -> Auth:
    """Which credentials the request came with, where the document declares bearer auth:
    none, a malformed header (no ``Bearer <token>``), or some key (``default``: whether
    it is right cannot be told from the traffic)."""
    if not spec.bearer_auth:
        return "default"
    value = next((v for k, v in headers if k.lower() == "authorization"), None)
    if value is None:
        return "none"
    scheme, _, token = value.strip().partition(" ")
    return "default" if scheme.lower() == "bearer" and token.strip() else "malformed"


def case_of(spec: Spec, body: bytes, headers: Sequence[tuple[str, str]], label: str) -> Case:
    """The request as the judged document sees it: ``invalid`` breaking the rules the
    request oracle names, else ``valid``."""
    from conformance.judging.document.validation import ValidatorUnavailable, oracle_rules

    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    payload = parsed if isinstance(parsed, dict) else {}
    raw = None if isinstance(parsed, dict) else body
    auth = auth_of(spec, headers)
    try:
        rules = oracle_rules(spec, payload, raw=raw)
    except ValidatorUnavailable:
        rules = set()  # no oracle: judged as the valid request it claims to be
    if rules:
        breaks = ", ".join(sorted(rules))
        return Case(payload, "invalid", label, breaks=breaks, auth=auth, raw_body=raw)
    if auth != "default":
        # A valid body without proper credentials: the auth requirements judge it.
        return Case(payload, "invalid", label, breaks=f"credentials: {auth}", auth=auth)
    # A request that leaves max_tokens out shows the default the target assumes, as the
    # suite's own probe for it does (MAX-TOKENS-DEFAULT).
    tags = frozenset() if "max_tokens" in payload else frozenset({DEFAULT_MAX_TOKENS_TAG})
    return Case(payload, "valid", label, tags=tags)


def redact_headers(headers: Sequence[tuple[str, str]]) -> tuple[dict[str, str], list[bytes]]:
    """The request headers safe to show, and the secrets they held (to scrub from the
    answer): the key of ``Authorization: Bearer <key>`` is redacted but its scheme kept
    (a reader sees how the request authenticated), every other value not in SHOWN is."""
    shown: dict[str, str] = {}
    secrets: list[bytes] = []
    for name, value in headers:
        lname = name.lower()
        if lname.startswith(":") or lname in HOP_BY_HOP:
            continue
        if lname in SHOWN or lname.startswith(SHOWN_PREFIXES):
            shown[name] = value
            continue
        scheme, _, token = value.strip().partition(" ")
        if lname == "authorization" and token.strip():
            shown[name] = f"{scheme} {REDACTED}"
            secret = token.strip()
        elif lname == "authorization" and scheme.lower() in SCHEMES:
            shown[name] = value  # a scheme and no credentials: nothing to hide
            continue
        else:
            shown[name] = REDACTED if value else value
            secret = value.strip()
        if len(secret) >= 4:
            secrets.append(secret.encode("utf-8"))
    return shown, secrets


def exchange_of(spec: Spec, seen: Seen) -> Exchange:
    """The Exchange the suite's client would have built from ``seen``, redacted.

    BadEntry when the answer cannot be read as a client would (a content coding a client
    cannot undo)."""
    shown, secrets = redact_headers(seen.request_headers)
    if seen.transcript is not None:
        exchange = exchange_from_transcript(seen.transcript)
        exchange.request_headers = shown
    else:
        case = case_of(spec, seen.request_body, seen.request_headers, seen.where)
        headers = [(k, v) for k, v in seen.headers if not k.startswith(":")]
        # A HAR keeps the body decoded: build from it without the coding, then show the
        # headers as they were sent.
        given = [h for h in headers if h[0].lower() != "content-encoding"]
        coded = len(given) != len(headers)
        try:
            exchange = exchange_from_wire(
                case,
                seen.status,
                given if seen.decoded else headers,
                seen.body,
                # Reads of a content-coded stream are not events yet: parsed once decoded.
                writes=() if coded else seen.writes,
                times=seen.times,
                url=seen.url,
                request_headers=shown,
                transport_error=seen.transport_error,
            )
        except (ValueError, OSError, EOFError, zlib.error) as exc:
            raise BadEntry(seen.where, f"the answer cannot be decoded: {exc}") from None
        exchange.request_body = seen.request_body
        if seen.decoded:
            exchange.headers.items = list(headers)
        exchange.false_encoding = exchange.false_encoding or seen.false_encoding
    exchange.ttfb, exchange.elapsed = seen.ttfb, seen.elapsed
    scrub(exchange, secrets)
    for secret in secrets:  # a key pasted into the request body too
        exchange.request_body = exchange.request_body.replace(secret, REDACTED.encode())
    return exchange


# -- readers -------------------------------------------------------------------------------


def read(path: Path, wanted: Wanted = everything) -> Iterator[Entry]:
    """Every entry of a HAR, JSONL or transcript file: a Seen for each ``wanted`` request,
    a Passed for the others, a BadEntry for each one that cannot be read (the file itself
    unreadable: one ``whole`` BadEntry naming the file)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        yield BadEntry(str(path), f"cannot be read: {exc.strerror or exc}", whole=True)
        return
    except UnicodeDecodeError as exc:
        why = f"not UTF-8 text ({exc.reason} at byte {exc.start})"
        yield BadEntry(str(path), f"cannot be read: {why}", whole=True)
        return
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        yield from read_jsonl(path.name, text, wanted)
        return
    try:
        data = json.loads(text)
    except ValueError as exc:
        if '"log"' in text[:4096] and '"entries"' in text:
            yield from salvage_har(path.name, text, exc, wanted)
        else:
            yield BadEntry(path.name, f"{NOT_TRAFFIC}: not JSON ({exc})", whole=True)
        return
    if isinstance(data, dict) and isinstance(data.get("log"), dict):
        yield from read_har(path.name, data, wanted)
    elif isinstance(data, dict) and "request" in data and "response" in data:
        yield transcript_entry(path.name, data)
    else:
        why = "JSON with neither log.entries (HAR) nor request and response (transcript)"
        yield BadEntry(path.name, f"{NOT_TRAFFIC}: {why}", whole=True)


#: What a file that is none of the formats read here is called.
NOT_TRAFFIC = "not a HAR, JSONL or transcript file"


def transcript_entry(where: str, data: Mapping[str, Any]) -> Entry:
    """A transcript file (tests/transcripts/README.md): one exchange with its own Case."""
    request, response = data["request"], data["response"]
    if not isinstance(request, dict) or not isinstance(response, dict):
        return BadEntry(where, "request and response must be objects", whole=True)
    raw = request.get("raw_body")
    body = raw.encode() if isinstance(raw, str) else json.dumps(request.get("body")).encode()
    return Seen(
        where=where,
        method="POST",
        url=str(request.get("path", "/v1/completions")),
        request_headers=tuple((str(k), str(v)) for k, v in request.get("headers", {}).items()),
        request_body=body,
        status=response.get("status"),
        transcript=data,
    )


def read_har(name: str, data: Mapping[str, Any], wanted: Wanted) -> Iterator[Entry]:
    entries = data["log"].get("entries")
    if not isinstance(entries, list):
        yield BadEntry(name, f"{NOT_TRAFFIC}: log.entries is not a list", whole=True)
        return
    for i, entry in enumerate(entries, 1):
        yield har_entry(f"{name} entry {i}", entry, wanted)


def salvage_har(name: str, text: str, error: ValueError, wanted: Wanted) -> Iterator[Entry]:
    """The entries of a truncated HAR up to the cut, then one BadEntry saying where."""
    start = text.find("[", text.find('"entries"'))
    decoder = json.JSONDecoder()
    pos, count = start + 1, 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        try:
            entry, pos = decoder.raw_decode(text, pos)
        except ValueError:
            break
        count += 1
        yield har_entry(f"{name} entry {count}", entry, wanted)
    if count == 0:  # nothing before the cut: the file holds no entry at all
        yield BadEntry(name, f"{NOT_TRAFFIC}: not JSON ({error})", whole=True)
    else:
        yield BadEntry(f"{name} entry {count + 1}", f"the HAR is truncated or not JSON ({error})")


def _pairs(items: Any) -> tuple[tuple[str, str], ...]:
    return tuple(
        (str(h.get("name", "")), str(h.get("value", "")))
        for h in items or ()
        if isinstance(h, dict)
    )


def _text(content: Mapping[str, Any]) -> bytes:
    text = content.get("text")
    if not isinstance(text, str):
        return b""
    if content.get("encoding") == "base64":
        return base64.b64decode(text)
    return text.encode("utf-8")


def har_entry(where: str, entry: Any, wanted: Wanted = everything) -> Entry:
    """One HAR 1.2 entry (browsers' devtools, mitmproxy's savehar, this proxy's --har)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("request"), dict):
        return BadEntry(where, "not a HAR entry (no request)")
    request, response = entry["request"], entry.get("response")
    if not wanted(str(request.get("method", "")), str(request.get("url", ""))):
        return Passed(where, "a request to another operation")
    status = response.get("status") if isinstance(response, dict) else None
    # The proxy's HAR says when the target broke off (a custom field, as HAR allows).
    failure = response.get(TRANSPORT_ERROR) if isinstance(response, dict) else None
    if not isinstance(status, int) or (status <= 0 and not failure):
        # Devtools write status 0 for a request that got no answer (blocked, cancelled).
        return BadEntry(where, "the entry has no answer (response missing or status 0)")
    assert isinstance(response, dict)
    content = response.get("content") if isinstance(response.get("content"), dict) else {}
    assert isinstance(content, dict)
    if not isinstance(content.get("text"), str) and int(content.get("size") or 0) > 0:
        return BadEntry(where, "the answer's body was not recorded (content.text missing)")
    post = request.get("postData") if isinstance(request.get("postData"), dict) else {}
    assert isinstance(post, dict)
    timings = entry.get("timings") if isinstance(entry.get("timings"), dict) else {}
    assert isinstance(timings, dict)
    wait = timings.get("wait")
    try:
        body = _text(content)
        sent = _text(post)
    except ValueError as exc:
        return BadEntry(where, f"a base64 body is not base64 ({exc})")
    return Seen(
        where=where,
        method=str(request.get("method", "")),
        url=str(request.get("url", "")),
        request_headers=_pairs(request.get("headers")),
        request_body=sent,
        status=status if status > 0 else None,
        headers=_pairs(response.get("headers")),
        body=body,
        decoded=True,
        transport_error=str(failure) if failure else None,
        ttfb=wait / 1000 if isinstance(wait, int | float) and wait >= 0 else None,
        elapsed=float(entry.get("time") or 0) / 1000,
        false_encoding=content.get(FALSE_ENCODING),
    )


def read_jsonl(name: str, text: str, wanted: Wanted = everything) -> Iterator[Entry]:
    """One exchange per line (docs/traffic.md); blank lines are skipped. A file none of
    whose lines is JSON is not JSONL at all: one ``whole`` BadEntry, not one per line."""
    rows: list[tuple[str, Any, ValueError | None]] = []  # (where, value, why not JSON)
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append((f"{name} line {n}", json.loads(line), None))
            except ValueError as exc:
                rows.append((f"{name} line {n}", None, exc))
    if rows and all(why is not None for _, _, why in rows):
        where, _, first = rows[0]
        yield BadEntry(name, f"{NOT_TRAFFIC}: no line is JSON ({where}: {first})", whole=True)
        return
    for where, data, why in rows:
        yield BadEntry(where, f"not JSON ({why})") if why else jsonl_entry(where, data, wanted)


def _bytes(part: Mapping[str, Any], key: str) -> bytes:
    if f"{key}_base64" in part:
        return base64.b64decode(part[f"{key}_base64"])
    value = part.get(key, "")
    if isinstance(value, dict | list):
        return json.dumps(value).encode("utf-8")
    return str(value).encode("utf-8")


def _header_list(value: Any) -> tuple[tuple[str, str], ...]:
    if isinstance(value, dict):
        return tuple((str(k), str(v)) for k, v in value.items())
    return tuple((str(k), str(v)) for k, v in value or ())


def jsonl_entry(where: str, data: Any, wanted: Wanted = everything) -> Entry:
    if not isinstance(data, dict) or not isinstance(data.get("request"), dict):
        return BadEntry(where, "not an exchange (no request object)")
    request, response = data["request"], data.get("response")
    url = str(request.get("url") or request.get("path") or "/v1/completions")
    method = str(request.get("method", "POST"))
    if not wanted(method, url):
        return Passed(where, "a request to another operation")
    if not isinstance(response, dict) or (
        response.get("status") is None and not response.get("transport_error")
    ):
        return BadEntry(where, "the exchange has no answer (response, status missing)")
    try:
        writes = tuple(base64.b64decode(w) for w in response.get("writes_base64", ()))
        writes = writes or tuple(str(w).encode() for w in response.get("writes", ()))
        given = "body" in response or "body_base64" in response
        body = _bytes(response, "body") if given else b"".join(writes)
        sent = _bytes(request, "body")
    except (ValueError, TypeError) as exc:
        return BadEntry(where, f"a base64 body is not base64 ({exc})")
    status = response.get("status")
    if status is not None and not isinstance(status, int):
        return BadEntry(where, f"status {status!r} is not an integer")
    return Seen(
        where=where,
        method=method,
        url=url,
        request_headers=_header_list(request.get("headers")),
        request_body=sent,
        status=status,
        headers=_header_list(response.get("headers")),
        body=body,
        writes=writes,
        times=tuple(float(t) for t in response.get("times", ())),
        ttfb=response.get("ttfb"),
        elapsed=float(response.get("elapsed") or 0.0),
        transport_error=response.get("transport_error"),
    )


# -- writing HAR -----------------------------------------------------------------------------


def _har_text(data: bytes) -> dict[str, str]:
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"text": base64.b64encode(data).decode("ascii"), "encoding": "base64"}


def _har_headers(items: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in items]


def har_of(exchange: Exchange, started: float) -> dict[str, Any]:
    """``exchange`` as a HAR 1.2 entry (already redacted), its body decoded as HAR keeps
    it; ``started`` is when the request was sent (Unix time). :func:`har_entry` reads it
    back into the same Exchange, but for the times of a stream's reads."""
    content_type = exchange.headers.get("content-type") or ""
    ttfb_ms = round((exchange.ttfb or 0.0) * 1000, 3)
    response: dict[str, Any] = {
        "status": exchange.status or 0,
        "statusText": "",
        "httpVersion": "HTTP/1.1",
        "cookies": [],
        "headers": _har_headers(exchange.headers.items),
        "content": {"size": len(exchange.body), "mimeType": content_type}
        | _har_text(exchange.body)
        | ({FALSE_ENCODING: exchange.false_encoding} if exchange.false_encoding else {}),
        "redirectURL": "",
        "headersSize": -1,
        "bodySize": -1,
    }
    if exchange.transport_error:
        response[TRANSPORT_ERROR] = exchange.transport_error
    request_type = next(
        (v for k, v in exchange.request_headers.items() if k.lower() == "content-type"), ""
    )
    return {
        "startedDateTime": datetime.fromtimestamp(started, UTC).isoformat(),
        "time": round(exchange.elapsed * 1000, 3),
        "request": {
            "method": "POST",
            "url": exchange.url,
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": _har_headers(exchange.request_headers.items()),
            "queryString": [],
            "postData": {"mimeType": request_type} | _har_text(exchange.request_body),
            "headersSize": -1,
            "bodySize": len(exchange.request_body),
        },
        "response": response,
        "cache": {},
        "timings": {
            "send": 0,
            "wait": ttfb_ms,
            "receive": max(0.0, round(exchange.elapsed * 1000 - ttfb_ms, 3)),
        },
    }


def har_document(entries: Iterable[str]) -> Iterator[str]:
    """A HAR 1.2 document around entries already serialised as JSON, piece by piece (a
    long session's HAR is written without holding it in memory)."""
    from conformance.judging.version import VERSION

    creator = {"name": "completions-conformance", "version": VERSION}
    yield '{"log": {"version": "1.2", "creator": ' + json.dumps(creator) + ', "entries": [\n'
    for i, entry in enumerate(entries):
        yield ("" if i == 0 else ",\n") + entry
    yield "\n]}}\n"
