"""Streaming latency: how a streamed answer arrived, for the reports (never a finding).

Per streamed 200 that delivered events: the time to the first byte and to the first
event, the gaps between events (median, p95, max), the event count, the total time,
and ``buffered``: the events came in one burst at the end although the stream lasted
long enough to tell, which is what a buffering proxy, or a server that generates the
whole completion before writing it, looks like to a client. A fast generation after a
long prompt evaluation can look the same, which is one reason this is informational.

Each entry is a ``StreamLatency`` (results.json ``latency[]``). Per run,
``LatencySummary.of`` condenses them into percentiles (p50/p90/p99) of the time to first
byte, each stream's median gap between events and the total time, with the concurrency
they were measured at (a target's latency under 8 requests in flight is not its latency
under 1): results.json ``latency_summary``, which every report shows. ``latency_summary``
gives a wider cut of the same entries as a plain dict (the first event, the worst gap
too); no report reads it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conformance.judging.wire.exchange import Exchange, SSEEvent

#: Streams whose last event came sooner than this (seconds) are too quick to judge.
BUFFERED_MIN_SECONDS = 0.5
#: Fewer events than this say nothing about how they were spread.
BUFFERED_MIN_EVENTS = 3
#: Buffered: more than this share of the events ...
BURST_SHARE = 0.9
#: ... arrived within this last share of the time to the last event.
TAIL_SHARE = 0.1


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of non-empty ``values``."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def is_buffered(events: Sequence[SSEEvent]) -> bool:
    """The events arrived in one burst at the end of a stream long enough to tell."""
    if len(events) < BUFFERED_MIN_EVENTS:
        return False
    end = events[-1].at
    if end <= BUFFERED_MIN_SECONDS:
        return False
    # Events of one read share its arrival time, so a single read counts as the tail.
    tail = sum(1 for ev in events if ev.at >= end * (1 - TAIL_SHARE))
    return tail > BURST_SHARE * len(events)


def _seconds(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _float(value: Any) -> float | None:
    """A figure read back from results.json: a number, else None."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


@dataclass(frozen=True, slots=True)
class StreamLatency:
    """How one streamed 200 arrived (one entry of results.json ``latency``), in seconds.

    ``case`` is the request's label (or its mode); a gap figure is None when the stream
    had one event, a time None when it was not measured.
    """

    case: str
    events: int
    ttfb_s: float | None = None
    first_event_s: float | None = None
    p50_gap_s: float | None = None
    p95_gap_s: float | None = None
    max_gap_s: float | None = None
    total_s: float | None = None
    buffered: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "events": self.events,
            "ttfb_s": self.ttfb_s,
            "first_event_s": self.first_event_s,
            "p50_gap_s": self.p50_gap_s,
            "p95_gap_s": self.p95_gap_s,
            "max_gap_s": self.max_gap_s,
            "total_s": self.total_s,
            "buffered": self.buffered,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StreamLatency:
        events = data.get("events")
        return cls(
            case=str(data.get("case", "")),
            events=events if isinstance(events, int) and not isinstance(events, bool) else 0,
            ttfb_s=_float(data.get("ttfb_s")),
            first_event_s=_float(data.get("first_event_s")),
            p50_gap_s=_float(data.get("p50_gap_s")),
            p95_gap_s=_float(data.get("p95_gap_s")),
            max_gap_s=_float(data.get("max_gap_s")),
            total_s=_float(data.get("total_s")),
            buffered=data.get("buffered") is True,
        )


def stream_latency(exchange: Exchange) -> StreamLatency | None:
    """The latency entry of a streamed 200 that delivered events, else None."""
    events = exchange.events
    if exchange.status != 200 or not exchange.case.stream or not events:
        return None
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(events)]
    return StreamLatency(
        case=exchange.case.label or exchange.case.mode,
        events=len(events),
        ttfb_s=_seconds(exchange.ttfb),
        first_event_s=_seconds(events[0].at),
        p50_gap_s=_seconds(percentile(gaps, 50)) if gaps else None,
        p95_gap_s=_seconds(percentile(gaps, 95)) if gaps else None,
        max_gap_s=_seconds(max(gaps)) if gaps else None,
        total_s=_seconds(exchange.elapsed),
        buffered=is_buffered(events),
    )


#: The percentiles of a run's latency summary (results.json ``latency_summary``).
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True, slots=True)
class Percentiles:
    """p50/p90/p99 of one figure over a run's streams (nearest rank), in seconds."""

    p50: float
    p90: float
    p99: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Percentiles:
        """The percentiles of non-empty ``values``, rounded to 0.1 ms."""
        p50, p90, p99 = (round(percentile(values, q), 4) for q in PERCENTILES)
        return cls(p50, p90, p99)

    @property
    def values(self) -> tuple[float, float, float]:
        return self.p50, self.p90, self.p99

    def to_dict(self) -> dict[str, float]:
        return {"p50": self.p50, "p90": self.p90, "p99": self.p99}

    @classmethod
    def from_dict(cls, data: Any) -> Percentiles | None:
        if not isinstance(data, Mapping):
            return None
        return cls(float(data["p50"]), float(data["p90"]), float(data["p99"]))


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """A run's streaming latency (results.json ``latency_summary``): how many streams,
    at which concurrency, how many looked buffered, and p50/p90/p99 of the time to first
    byte (``ttfb_s``), of each stream's median gap between events (``p50_gap_s``: one
    slow stream weighs as one stream) and of the total time (``total_s``); a figure no
    stream had is None."""

    streams: int = 0
    buffered: int = 0
    concurrency: int | None = None
    ttfb_s: Percentiles | None = None
    p50_gap_s: Percentiles | None = None
    total_s: Percentiles | None = None

    @classmethod
    def of(cls, entries: Sequence[StreamLatency], concurrency: int | None = None) -> LatencySummary:
        """The summary of a run's ``stream_latency`` entries, measured at ``concurrency``
        requests in flight."""

        def figure(values: Iterable[float | None]) -> Percentiles | None:
            known = [v for v in values if v is not None]
            return Percentiles.of(known) if known else None

        return cls(
            streams=len(entries),
            buffered=sum(1 for e in entries if e.buffered),
            concurrency=concurrency,
            ttfb_s=figure(e.ttfb_s for e in entries),
            p50_gap_s=figure(e.p50_gap_s for e in entries),
            total_s=figure(e.total_s for e in entries),
        )

    def to_dict(self) -> dict[str, Any]:
        def figure(p: Percentiles | None) -> dict[str, float] | None:
            return None if p is None else p.to_dict()

        return {
            "streams": self.streams,
            "buffered": self.buffered,
            "concurrency": self.concurrency,
            "ttfb_s": figure(self.ttfb_s),
            "p50_gap_s": figure(self.p50_gap_s),
            "total_s": figure(self.total_s),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LatencySummary:
        concurrency = data.get("concurrency")
        return cls(
            streams=int(data.get("streams", 0)),
            buffered=int(data.get("buffered", 0)),
            concurrency=None if concurrency is None else int(concurrency),
            ttfb_s=Percentiles.from_dict(data.get("ttfb_s")),
            p50_gap_s=Percentiles.from_dict(data.get("p50_gap_s")),
            total_s=Percentiles.from_dict(data.get("total_s")),
        )


#: Summary key -> the per-stream figure it is taken from.
SUMMARY_FIELDS: dict[str, Callable[[StreamLatency], float | None]] = {
    "ttfb_s": lambda e: e.ttfb_s,
    "first_event_s": lambda e: e.first_event_s,
    "gap_s": lambda e: e.p50_gap_s,  # each stream's typical gap
    "max_gap_s": lambda e: e.max_gap_s,  # each stream's worst gap
    "total_s": lambda e: e.total_s,
}


def latency_summary(
    entries: Iterable[StreamLatency], *, concurrency: int | None = None
) -> dict[str, Any] | None:
    """p50/p90/p99 over a run's ``stream_latency`` entries; None when there are none.

    One value per stream for each field (nearest rank, so every figure is one that was
    measured), e.g. ``{"streams": 20, "concurrency": 8, "buffered": 0,
    "ttfb_s": {"p50": 0.012, "p90": 0.03, "p99": 0.05}, "gap_s": {...}, ...}``.
    A field no stream had (a one-event stream has no gap) is None.
    """
    entries = list(entries)
    if not entries:
        return None
    out: dict[str, Any] = {
        "streams": len(entries),
        "concurrency": concurrency,
        "buffered": sum(1 for e in entries if e.buffered),
    }
    for key, source in SUMMARY_FIELDS.items():
        values = [v for v in map(source, entries) if v is not None]
        out[key] = (
            {f"p{q}": _seconds(percentile(values, q)) for q in PERCENTILES} if values else None
        )
    return out
