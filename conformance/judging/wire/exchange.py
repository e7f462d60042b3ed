"""What came back from one request, independent of the HTTP library that fetched it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from conformance.judging.wire.case import Case

T = TypeVar("T")

#: Headers that describe one hop, not the exchange (RFC 9110 §7.6.1): a proxy neither
#: forwards them nor shows them as the exchange's.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)


def _no_constant(name: str) -> Any:
    # Python's json accepts NaN, Infinity and -Infinity; JSON (RFC 8259) does not, and
    # strict parsers (Go, Rust, Java, JavaScript's JSON.parse) fail on them.
    raise ValueError(f"{name} is not a JSON number (RFC 8259); strict JSON parsers fail on it")


def strict_json(text: str) -> Any:
    """Parse ``text`` as RFC 8259 JSON: ValueError on NaN/Infinity or too deep nesting."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested too deeply to parse") from None


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One server-sent event, dispatched when its blank line arrived.

    ``at`` is the arrival time in seconds since the request was sent.
    """

    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None
    at: float = 0.0


class Headers:
    """Case-insensitive, multi-valued response headers in wire order."""

    __slots__ = ("items",)

    def __init__(self, items: list[tuple[str, str]] | None = None) -> None:
        self.items = list(items or [])

    def get(self, name: str, default: str | None = None) -> str | None:
        lname = name.lower()
        for key, value in self.items:
            if key.lower() == lname:
                return value
        return default

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def to_dict(self) -> dict[str, str]:
        return {k: v for k, v in self.items}


@dataclass(slots=True)
class Exchange:
    """One request and its response as observed on the wire.

    Exactly one of ``transport_error`` or ``status`` describes the outcome. ``body`` holds
    the raw bytes read (up to the byte bound); ``events`` is set for event streams;
    ``stream_error`` names a framing or bound problem met while reading a stream, and
    ``bound`` names the limit that stopped reading, if any.
    """

    case: Case
    url: str
    request_headers: dict[str, str]
    request_body: bytes
    status: int | None = None
    headers: Headers = field(default_factory=Headers)
    body: bytes = b""
    events: list[SSEEvent] | None = None
    stream_error: str | None = None
    transport_error: str | None = None
    bound: str | None = None
    ttfb: float | None = None
    elapsed: float = 0.0
    retries: int = 0
    # An event stream held bytes that are not UTF-8 (decoded with U+FFFD, as WHATWG says).
    invalid_utf8: bool = False
    # What the official openai SDK made of this answer (conformance/run/sdk.py), else None.
    sdk: dict[str, Any] | None = None
    # What the client did about the exchange that a reader should know (e.g. a send
    # repeated on a fresh connection after a stale keep-alive one failed).
    notes: list[str] = field(default_factory=list)
    # The 429 answers waited out (Retry-After) before this one, oldest first: each is
    # judged as the rate-limit answer it is (checks.ratelimit), not as the case's answer.
    throttled: list[Exchange] = field(default_factory=list)
    # It met a time-out or a cut while other requests were in flight and was answered when
    # sent again alone (conformance/run/resend.py): that account for the run's reports, and the
    # request that held the target meanwhile (its label and body), if one did.
    sent_alone: str | None = None
    held_by: str | None = None
    # The answer claimed a Content-Encoding its body does not have (gzip that is not
    # gzip): the body is recorded as sent, and this says so (HTTP-CONTENT-ENCODING).
    false_encoding: str | None = None
    #: Views derived from this exchange by the checks, built once (see ``view``).
    derived: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _json: Any = field(default=None, repr=False)
    _json_error: str | None = field(default=None, repr=False)
    _json_parsed: bool = field(default=False, repr=False)

    @property
    def cut_short_by_sdk(self) -> bool:
        """The openai SDK stopped reading a 200 early (it raised): the body is partial."""
        return (
            self.sdk is not None
            and self.sdk.get("error") is not None
            and self.status == 200
            and self.bound is None  # a bound hit is HTTP-COMPLETE's finding
        )

    @property
    def content_type(self) -> str:
        return (self.headers.get("content-type") or "").strip()

    @property
    def media_type(self) -> str:
        return self.content_type.split(";", 1)[0].strip().lower()

    def _parse(self) -> None:
        if self._json_parsed:
            return
        self._json_parsed = True
        try:
            self._json = strict_json(self.body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            self._json_error = f"body is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        except ValueError as exc:
            self._json_error = f"body is not JSON ({exc})"

    @property
    def json(self) -> Any:
        """The body parsed as JSON, or None when it is not JSON (see ``json_error``)."""
        self._parse()
        return self._json

    @property
    def json_error(self) -> str | None:
        self._parse()
        return self._json_error

    def view(self, key: str, build: Callable[[Exchange], T]) -> T:
        """The view ``key`` of this exchange, built by ``build`` on first use.

        Every requirement judging a stream reads the same parsed view of it; the cache
        lives and dies with the exchange, so no module keeps state between exchanges.
        """
        if key not in self.derived:
            self.derived[key] = build(self)
        value: T = self.derived[key]
        return value

    def event_payloads(self) -> list[tuple[SSEEvent, Any, str | None]]:
        """Each data event other than ``[DONE]``, with its JSON and the parse problem."""
        out: list[tuple[SSEEvent, Any, str | None]] = []
        for ev in self.events or []:
            if ev.data == "[DONE]":
                continue
            try:
                out.append((ev, strict_json(ev.data), None))
            except ValueError as exc:
                out.append((ev, None, f"data is not JSON ({exc})"))
        return out
