"""The per-run latency summary: percentiles over the per-stream latency entries."""

from __future__ import annotations

from support import case

from conformance.judging.verdict.latency import latency_summary, stream_latency
from conformance.judging.wire.exchange import Exchange, SSEEvent


def streamed(ttfb: float, times: list[float], total: float) -> Exchange:
    ex = Exchange(case=case(stream=True), url="u", request_headers={}, request_body=b"")
    ex.status, ex.ttfb, ex.elapsed = 200, ttfb, total
    ex.events = [SSEEvent(data="{}", at=t) for t in times]
    return ex


def test_percentiles_over_streams_nearest_rank() -> None:
    # Ten streams: ttfb 0.01 .. 0.10 s, events every (i+1)/100 s, one of them buffered.
    entries = [
        stream_latency(streamed((i + 1) / 100, [(i + 1) / 100 * k for k in range(1, 5)], i + 1))
        for i in range(9)
    ]
    entries.append(stream_latency(streamed(0.10, [0.01] + [1.0] * 10, 1.0)))  # buffered
    summary = latency_summary([e for e in entries if e is not None], concurrency=8)
    assert summary is not None
    assert (summary["streams"], summary["concurrency"], summary["buffered"]) == (10, 8, 1)
    assert summary["ttfb_s"] == {"p50": 0.05, "p90": 0.09, "p99": 0.1}
    assert summary["total_s"] == {"p50": 4.0, "p90": 8.0, "p99": 9.0}
    assert summary["gap_s"]["p50"] == 0.04 and summary["max_gap_s"]["p99"] == 0.99


def test_no_streams_no_summary_and_a_field_no_stream_had() -> None:
    assert latency_summary([]) is None
    one_event = stream_latency(streamed(0.01, [0.02], 0.03))
    assert one_event is not None
    summary = latency_summary([one_event])
    assert summary is not None and summary["gap_s"] is None and summary["concurrency"] is None
    assert summary["first_event_s"] == {"p50": 0.02, "p90": 0.02, "p99": 0.02}
