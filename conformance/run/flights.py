"""Which requests were on the wire together: a time-out or a death is explained by them.

Every send is a ``Flight`` from the moment the throttle admits it to the moment its answer
ended. Flights that were in flight at the same moment note each other (``overlapped``),
so that two questions have an answer after the fact:

* a request that met a time-out while others were in flight, and was answered when sent
  again alone: which request **held the target** meanwhile? The one that was in flight
  through its whole wait, the longest (``holder``): FastChat spent 28 s on an ``n: 129``
  it accepted while seven healthy streams queued behind it;
* the target died: which requests were **in flight when it died** (``in_flight_since``)?
  mlx-lm died of a one-item prompt list that was still in flight when a token prompt's
  404 came back; the last request answered normally is not the culprit.

A flight keeps its case and a summary of its answer, never the answer itself: the answers
of a long run are let go as they are judged.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange

#: Flights remembered after they ended (a death looks back over the last ones only).
HISTORY = 2048


@dataclass(eq=False)
class Flight:
    """One send on the wire: what it was, when it went and ended, what came back."""

    case: Case | None
    started: float
    ended: float | None = None
    status: int | None = None
    #: The bound the answer hit, or its transport error, in a few words (None: neither).
    failure: str | None = None
    #: When the wait that ended it began: its start, or for a gap time-out its last read.
    waited_from: float | None = None
    #: The other flights in flight at some moment of this one (filled by ``Flights``).
    overlapped: list[Flight] = field(default_factory=list)

    @property
    def crowded(self) -> bool:
        """Another request shared the target at some moment of this one."""
        return bool(self.overlapped)

    @property
    def normal(self) -> bool:
        """Ended with a 2xx answer read to its end."""
        return self.status is not None and 200 <= self.status < 300 and self.failure is None

    def duration(self, now: float) -> float:
        return (self.ended if self.ended is not None else now) - self.started

    def describe(self) -> str:
        """The request as a reader can find and resend it: its label and its body (short)."""
        if self.case is None:
            return "a request"
        body = json.dumps(self.case.body, ensure_ascii=False)
        body = body if len(body) <= 160 else body[:160] + "…"
        return f"{self.case.label or self.case.mode!r} {body}"

    def summary(self) -> Exchange:
        """What the client saw of it, as an Exchange without a body (for a finding's
        related exchanges): its request, and its status or why it had none."""
        assert self.case is not None
        error = self.failure  # a stream whose head came may still have met a bound
        if self.ended is None:
            error = "still in flight"
        return Exchange(
            case=self.case,
            url="",
            request_headers={},
            request_body=b"",
            status=self.status if self.ended is not None else None,
            transport_error=error,
        )


class Flights:
    """The flights in progress and the last ones ended. Not locked: the throttle calls it
    under its own lock."""

    def __init__(self) -> None:
        self.live: list[Flight] = []
        self.history: deque[Flight] = deque(maxlen=HISTORY)

    def begin(self, case: Case | None, now: float) -> Flight:
        flight = Flight(case, now)
        for other in self.live:
            other.overlapped.append(flight)
            flight.overlapped.append(other)
        self.live.append(flight)
        self.history.append(flight)
        return flight

    def end(self, flight: Flight, exchange: Exchange | None, now: float, gap: float) -> None:
        flight.ended = now
        flight.waited_from = flight.started
        if exchange is not None:
            flight.status = exchange.status
            flight.failure = exchange.bound or exchange.transport_error
            if exchange.bound == "gap":
                # Its wait began at its last read, one gap bound before it gave up.
                flight.waited_from = max(flight.started, now - gap)
        if flight in self.live:
            self.live.remove(flight)

    def forget(self, flight: Flight) -> None:
        """``flight`` never went on the wire after all."""
        for other in flight.overlapped:
            other.overlapped.remove(flight)
        if flight in self.live:
            self.live.remove(flight)
        if flight in self.history:
            self.history.remove(flight)


def holder(flight: Flight, now: float) -> Flight | None:
    """The request that held the target while ``flight`` waited: of those in flight through
    its whole wait (started before the wait began, still in flight when it gave up), the
    one in flight the longest. None when no request spanned the wait (a queue of many,
    each served in turn, holds a one-slot target between them: none is named)."""
    assert flight.ended is not None
    began = flight.waited_from if flight.waited_from is not None else flight.started
    spanning = [
        other
        for other in flight.overlapped
        if other.started <= began and (other.ended is None or other.ended >= flight.ended)
    ]
    return max(spanning, key=lambda other: other.duration(now), default=None)


def in_flight_since(flights: Iterable[Flight], since: float, until: float) -> list[Flight]:
    """Flights on the wire at some moment between ``since`` and ``until`` that did not end
    normally (still in flight counts), the first started first."""
    return sorted(
        (
            f
            for f in flights
            if f.case is not None
            and f.started < until
            and (f.ended is None or f.ended > since)
            and not f.normal
        ),
        key=lambda f: f.started,
    )
