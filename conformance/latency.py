"""Streaming latency: how a streamed answer arrived, for the reports (never a finding).

Per streamed 200 that delivered events: the time to the first byte and to the first
event, the gaps between events (median, p95, max), the event count, the total time,
and ``buffered``: the events came in one burst at the end although the stream lasted
long enough to tell, which is what a buffering proxy, or a server that generates the
whole completion before writing it, looks like to a client. A fast generation after a
long prompt evaluation can look the same, which is one reason this is informational.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

from conformance.exchange import Exchange, SSEEvent

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
