"""What the suite never shows, and the bounds it reads an answer under.

``scrub`` replaces every secret (the API key, a header value) wherever an answer shows it;
``Limits`` are the bounds on one exchange (the client reads under them, and a recorded
exchange is judged by them). Both are the judge's: a recorded exchange (traffic, a
transcript) is scrubbed and bounded as the client's own are.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from conformance.judging.wire.exchange import Exchange, Headers

REDACTED = "[REDACTED]"


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on one exchange; hitting one ends it with a failure naming the bound."""

    ttfb: float = 30.0
    gap: float = 15.0
    total: float = 120.0
    max_bytes: int = 16 * 1024 * 1024
    max_events: int = 50_000
    transcript_bytes: int = 256 * 1024
    #: All answers being held at once (every thread of the client): a pool of 32 facing
    #: 32 endless streams must not hold 32 x max_bytes. Serial sends never reach it.
    max_bytes_held: int = 64 * 1024 * 1024


def scrub(exchange: Exchange, secrets: Iterable[bytes]) -> None:
    """Replace each secret (the key, a header value) wherever the answer shows it: body,
    headers, events, and what a sender noted of it (errors, the SDK's view)."""
    for secret in secrets:
        text = secret.decode("utf-8", "replace")
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
        for name in ("transport_error", "stream_error", "sdk", "notes"):
            setattr(exchange, name, _without(getattr(exchange, name), text))


def _without(value: Any, secret: str) -> Any:
    """``value`` (strings, lists, dicts of them) with ``secret`` replaced."""
    if isinstance(value, str):
        return value.replace(secret, REDACTED)
    if isinstance(value, list):
        return [_without(v, secret) for v in value]
    if isinstance(value, dict):
        return {_without(k, secret): _without(v, secret) for k, v in value.items()}
    return value
