"""Streaming latency: how a streamed answer arrived, for the reports (never a finding).

Per streamed 200 that delivered events: the time to the first byte and to the first
event, the gaps between events (median, p95, max), the event count, the total time,
and ``buffered``: the events came in one burst at the end although the stream lasted
long enough to tell, which is what a buffering proxy, or a server that generates the
whole completion before writing it, looks like to a client. A fast generation after a
long prompt evaluation can look the same, which is one reason this is informational.

Per run, ``latency_summary`` condenses those entries into percentiles (p50/p90/p99) of
the time to first byte, the typical and the worst gap between events, and the total
time, with the concurrency they were measured at (a target's latency under 8 requests
in flight is not its latency under 1).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
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


def stream_latency(exchange: Exchange) -> dict[str, Any] | None:
    """The latency entry of a streamed 200 that delivered events, else None."""
    events = exchange.events
    if exchange.status != 200 or not exchange.case.stream or not events:
        return None
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(events)]
    return {
        "case": exchange.case.label or exchange.case.mode,
        "events": len(events),
        "ttfb_s": _seconds(exchange.ttfb),
        "first_event_s": _seconds(events[0].at),
        "p50_gap_s": _seconds(percentile(gaps, 50)) if gaps else None,
        "p95_gap_s": _seconds(percentile(gaps, 95)) if gaps else None,
        "max_gap_s": _seconds(max(gaps)) if gaps else None,
        "total_s": _seconds(exchange.elapsed),
        "buffered": is_buffered(events),
    }


#: The percentiles of a run's latency summary.
SUMMARY_PERCENTILES = (50, 90, 99)
#: Summary key -> the per-stream entry it is taken from.
SUMMARY_FIELDS = {
    "ttfb_s": "ttfb_s",
    "first_event_s": "first_event_s",
    "gap_s": "p50_gap_s",  # each stream's typical gap
    "max_gap_s": "max_gap_s",  # each stream's worst gap
    "total_s": "total_s",
}


def latency_summary(
    entries: Iterable[Mapping[str, Any]], *, concurrency: int | None = None
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
        "buffered": sum(1 for e in entries if e.get("buffered")),
    }
    for key, source in SUMMARY_FIELDS.items():
        values = [float(e[source]) for e in entries if e.get(source) is not None]
        out[key] = (
            {f"p{q}": _seconds(percentile(values, q)) for q in SUMMARY_PERCENTILES}
            if values
            else None
        )
    return out
