"""The evidence a report shows for a finding: typed, redacted, and as results.json stores it.

``evidence`` takes what a reader needs to see and reproduce one exchange; ``Example`` is
one kept failing (or raising, or declined) finding of a requirement with that evidence
(``Tally.examples``). Both write the ``requirements[].examples[]`` objects of results.json
(docs/results-schema.md) key for key, and read them back typed.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from conformance.judging.wire.exchange import Exchange

EXCERPT_CHARS = 2000
VALUE_CHARS = 500
TRANSCRIPT_EVENTS = 40


class Outcome(StrEnum):
    """The outcome of one requirement on one exchange (``Finding.outcome``)."""

    PASSED = "passed"
    FAILED = "failed"
    UNSUPPORTED = "unsupported"  # a capability declined with a proper 4xx
    ERROR = "error"  # the check itself raised: a defect of the suite


def jsonable(value: Any) -> Any:
    """``value`` as stored in results.json: itself when it is small JSON, else its repr."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)[:VALUE_CHARS]
    return value if len(text) <= VALUE_CHARS else text[:VALUE_CHARS] + "…"


@dataclass(frozen=True, slots=True)
class RequestShown:
    """The request of an example, as sent (secrets redacted by the client)."""

    method: str = "POST"
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "url": self.url, "headers": self.headers, "body": self.body}

    @classmethod
    def from_json(cls, data: Any) -> RequestShown:
        data = data if isinstance(data, dict) else {}
        return cls(
            method=str(data.get("method", "POST")),
            url=str(data.get("url", "")),
            headers={str(k): str(v) for k, v in (data.get("headers") or {}).items()},
            body=str(data.get("body", "")),
        )


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One kept event of a streamed answer: seconds since the request, its data."""

    at: float
    data: str

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at, "data": self.data}


@dataclass(frozen=True, slots=True)
class Evidence:
    """What a reader needs to see and reproduce one exchange, with secrets redacted.

    ``notes`` is None when the client did nothing about the exchange; ``transcript``,
    ``events`` and ``stream_error`` are None for a non-streamed answer.
    """

    case: str = ""
    mode: str = ""
    breaks: str | None = None
    request: RequestShown = field(default_factory=RequestShown)
    status: int | None = None
    response_headers: dict[str, str] = field(default_factory=dict)
    body_excerpt: str = ""
    transport_error: str | None = None
    elapsed: float | None = None
    curl: str = ""
    notes: tuple[str, ...] | None = None
    transcript: tuple[StreamEvent, ...] | None = None
    events: int | None = None
    stream_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "case": self.case,
            "mode": self.mode,
            "breaks": self.breaks,
            "request": self.request.to_json(),
            "status": self.status,
            "response_headers": self.response_headers,
            "body_excerpt": self.body_excerpt,
            "transport_error": self.transport_error,
            "elapsed": self.elapsed,
            "curl": self.curl,
        }
        if self.notes is not None:
            out["notes"] = list(self.notes)
        if self.transcript is not None:
            out["transcript"] = [ev.to_json() for ev in self.transcript]
            out["events"] = self.events
            out["stream_error"] = self.stream_error
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Evidence:
        notes = data.get("notes")
        transcript = data.get("transcript")
        status, elapsed, events = data.get("status"), data.get("elapsed"), data.get("events")
        return cls(
            case=str(data.get("case") or ""),
            mode=str(data.get("mode") or ""),
            breaks=data.get("breaks"),
            request=RequestShown.from_json(data.get("request")),
            status=status if isinstance(status, int) else None,
            response_headers={
                str(k): str(v) for k, v in (data.get("response_headers") or {}).items()
            },
            body_excerpt=str(data.get("body_excerpt", "")),
            transport_error=data.get("transport_error"),
            elapsed=elapsed if isinstance(elapsed, int | float) else None,
            curl=str(data.get("curl", "")),
            notes=None if notes is None else tuple(str(n) for n in notes),
            transcript=None
            if transcript is None
            else tuple(StreamEvent(e.get("at"), str(e.get("data", ""))) for e in transcript),
            events=events if isinstance(events, int) else None,
            stream_error=data.get("stream_error"),
        )


def evidence(exchange: Exchange) -> Evidence:
    """What a reader needs to see and reproduce one exchange, with secrets redacted."""
    case = exchange.case
    body_text = exchange.request_body.decode("utf-8", "replace")
    streamed = exchange.events
    return Evidence(
        case=case.label,
        mode=case.mode,
        breaks=case.breaks,
        request=RequestShown(
            "POST", exchange.url, exchange.request_headers, body_text[:EXCERPT_CHARS]
        ),
        status=exchange.status,
        response_headers=exchange.headers.to_dict(),
        body_excerpt=exchange.body[:EXCERPT_CHARS].decode("utf-8", "replace"),
        transport_error=exchange.transport_error,
        elapsed=round(exchange.elapsed, 4),
        curl=curl_command(exchange),
        # What the client did about it (sent again alone, reconnected...).
        notes=tuple(exchange.notes) if exchange.notes else None,
        transcript=None
        if streamed is None
        else tuple(
            StreamEvent(round(ev.at, 4), ev.data[:500]) for ev in streamed[:TRANSCRIPT_EVENTS]
        ),
        events=None if streamed is None else len(streamed),
        stream_error=None if streamed is None else exchange.stream_error,
    )


def curl_command(exchange: Exchange) -> str:
    """A shell command that replays the request; the key is read from the environment."""
    parts = ["curl", "-sS", "-N", "-X", "POST", shlex.quote(exchange.url)]
    for name, value in exchange.request_headers.items():
        if name.lower() == "authorization" and exchange.case.auth == "default":
            value = "Bearer $CONFORMANCE_API_KEY"
            parts += ["-H", f'"{name}: {value}"']
            continue
        parts += ["-H", shlex.quote(f"{name}: {value}")]
    parts += ["--data-binary", shlex.quote(exchange.request_body.decode("utf-8", "replace"))]
    return " ".join(parts)


@dataclass(frozen=True, slots=True)
class Example:
    """One kept finding of a requirement that did not pass, with its evidence.

    ``expected`` and ``actual`` are as stored (``jsonable``): small JSON, else a repr.
    """

    message: str
    outcome: Outcome = Outcome.FAILED
    fingerprint: str = ""
    path: str | None = None
    expected: Any = None
    actual: Any = None
    evidence: Evidence = field(default_factory=Evidence)

    def to_json(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "outcome": self.outcome.value,
            "fingerprint": self.fingerprint,
            "path": self.path,
            "expected": self.expected,
            "actual": self.actual,
            **self.evidence.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Example:
        return cls(
            message=str(data.get("message", "")),
            outcome=Outcome(data.get("outcome") or "failed"),
            fingerprint=str(data.get("fingerprint") or ""),
            path=data.get("path"),
            expected=data.get("expected"),
            actual=data.get("actual"),
            evidence=Evidence.from_json(data),
        )
