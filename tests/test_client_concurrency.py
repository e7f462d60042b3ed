"""Client.send from a pool of threads: pacing, the shared back-off gate, the adaptive limit.

The engine's ``--concurrency N`` runs a thread pool over ``Client.send``; these tests do
the same against raw-socket servers on 127.0.0.1 (one thread per connection), one of
which rate-limits by concurrency the way real gateways do: more than K requests at once
and the rest get 429 with Retry-After.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from hostile_servers import MIB, HeldBySlowRequest, RawServer, Servers, endless_sse, gone, respond
from support import API_KEY, MODEL, case

from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange
from conformance.run.client import Client, Limits, Pacer, RetryPolicy
from conformance.run.throttle import Throttle

LIMITS = Limits(ttfb=5.0, gap=2.0, total=5.0)
OK = b'{"id": "cmpl-1", "object": "text_completion", "choices": []}'
LIMITED = b'{"error": {"message": "too many requests", "type": "rate_limit"}}'


class ConcurrencyLimited:
    """A behaviour: at most ``allowed`` requests served at once, the others get 429.

    Served requests take ``hold`` seconds. Counts what it saw: the most requests in
    flight at once, how many were refused, and when each arrived.
    """

    def __init__(self, allowed: int, *, hold: float = 0.03, retry_after: str = "0.05") -> None:
        self.allowed = allowed
        self.hold = hold
        self.ok = respond("200 OK", OK)
        self.refuse = respond("429 Too Many Requests", LIMITED, Retry_After=retry_after)
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak = 0
        self.refused = 0
        self.arrivals: list[float] = []

    def __call__(self, server: RawServer, conn: object, request: bytes) -> None:
        with self.lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            self.arrivals.append(time.monotonic())
            busy = self.in_flight > self.allowed
            self.refused += busy
        if not busy:
            server.stopping.wait(self.hold)
        # Done before the answer is written: once written, the client may read it and
        # send its next request before this thread runs again, and on a loaded machine a
        # count that ended after the write would see one request twice (a 429 the limit
        # never earned).
        with self.lock:
            self.in_flight -= 1
        answer = self.refuse if busy else self.ok
        answer(server, conn, request)  # type: ignore[arg-type]


@pytest.fixture
def serve() -> Iterator[Servers]:
    with Servers() as servers:
        yield servers


def pooled(client: Client, sends: int, threads: int) -> list[Exchange]:
    """``sends`` cases through ``client`` from ``threads`` threads, as the engine does."""
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(lambda _: client.send(case()), range(sends)))


def test_concurrency_adapts_down_to_what_the_target_accepts(serve: Servers) -> None:
    """8 threads, a target that serves 2 at once: every request ends 200, the limit went down."""
    behaviour = ConcurrencyLimited(allowed=2)
    server = serve.start(behaviour)
    client = Client(server.url, api_key=API_KEY, limits=LIMITS, concurrency=8)
    try:
        exchanges = pooled(client, 40, threads=8)
    finally:
        client.close()
    stats = client.stats
    assert [ex.status for ex in exchanges] == [200] * 40
    assert stats.min_concurrency_limit <= 2 < stats.concurrency == 8
    assert stats.retries == behaviour.refused == sum(ex.retries for ex in exchanges) > 0
    assert stats.requests_sent == len(server.requests) == 40 + stats.retries
    assert stats.peak_in_flight <= 8 and stats.rate_limited == behaviour.refused
    # Backing off together: far fewer refusals than requests (each thread hammering
    # until it heard its own 429 would refuse most of them, and exhaust retries).
    assert behaviour.refused <= 24, behaviour.refused  # ~15 here; ~110 without


def test_pacing_holds_across_threads(serve: Servers) -> None:
    """--rps 40 from 8 threads: 16 starts span at least 15/40 s at the target."""
    behaviour = ConcurrencyLimited(allowed=100, hold=0.0)
    server = serve.start(behaviour)
    client = Client(server.url, api_key=API_KEY, limits=LIMITS, pacer=Pacer(40), concurrency=8)
    try:
        exchanges = pooled(client, 16, threads=8)
    finally:
        client.close()
    assert [ex.status for ex in exchanges] == [200] * 16
    arrivals = sorted(behaviour.arrivals)
    assert arrivals[-1] - arrivals[0] >= 15 / 40 - 0.01  # the clocks' granularity
    assert client.stats.peak_in_flight >= 1


def test_limit_that_never_clears_ends_in_429s_within_the_retry_policy(
    serve: Servers,
) -> None:
    """Every answer 429: each send gives up after max_retries, none hangs (no verdict)."""
    behaviour = ConcurrencyLimited(allowed=0, retry_after="0.01")
    server = serve.start(behaviour)
    retry = RetryPolicy(max_retries=3, max_wait=1.0)
    client = Client(server.url, api_key=API_KEY, limits=LIMITS, retry=retry, concurrency=4)
    try:
        exchanges = pooled(client, 8, threads=4)
    finally:
        client.close()
    assert [(ex.status, ex.retries) for ex in exchanges] == [(429, 3)] * 8
    assert client.stats.retries == 24 and client.stats.min_concurrency_limit == 1


def test_retry_after_beyond_the_policy_does_not_hold_the_others(serve: Servers) -> None:
    """A 429 the policy will not wait out (60 s > 30 s) closes no gate: the run ends fast."""
    behaviour = ConcurrencyLimited(allowed=0, retry_after="60")
    server = serve.start(behaviour)
    client = Client(server.url, api_key=API_KEY, limits=LIMITS, concurrency=4)
    began = time.monotonic()
    try:
        exchanges = pooled(client, 8, threads=4)
    finally:
        client.close()
    assert [(ex.status, ex.retries) for ex in exchanges] == [(429, 0)] * 8
    assert time.monotonic() - began < 2.0


# -- the throttle itself -----------------------------------------------------------------------


def test_gate_holds_every_sender_until_it_reopens() -> None:
    throttle = Throttle(4, Pacer(None))
    began = time.monotonic()
    throttle.back_off(0.15)
    with ThreadPoolExecutor(4) as pool:
        started = [flight.started for flight in pool.map(lambda _: throttle.acquire(), range(4))]
    assert min(started) - began >= 0.15
    assert throttle.stats().retries == 1


def test_limit_bounds_what_is_in_flight() -> None:
    throttle = Throttle(2, Pacer(None))
    first, _ = throttle.acquire(), throttle.acquire()
    third = threading.Thread(target=throttle.acquire)
    third.start()
    third.join(0.1)
    assert third.is_alive()  # waits for a slot
    throttle.release(first, rate_limited=False)
    third.join(1.0)
    assert not third.is_alive() and throttle.stats().peak_in_flight == 2


def test_limit_halves_once_per_window_and_grows_back_by_one() -> None:
    throttle = Throttle(8, Pacer(None))
    tickets = [throttle.acquire() for _ in range(8)]
    for ticket in tickets:  # all eight refused: they all started before the cut
        throttle.release(ticket, rate_limited=True)
    assert throttle.stats().concurrency_limit == 4
    ticket = throttle.acquire()  # started after the cut: a new window
    throttle.release(ticket, rate_limited=True)
    assert throttle.stats().concurrency_limit == 2
    for _ in range(2):  # `limit` successes in a row: one more
        throttle.release(throttle.acquire(), rate_limited=False)
    stats = throttle.stats()
    assert (stats.concurrency_limit, stats.min_concurrency_limit, stats.rate_limited) == (3, 2, 9)


def test_a_send_overlapped_only_by_one_that_came_and_went_was_crowded() -> None:
    """The first send starts alone; another starts and ends within it. A time-out the first
    then meets may be time queued behind the other, though nothing is in flight at its end
    (CI once saw 5 of 6 silent-target sends counted as crowded: the first had started alone
    and ended last)."""
    throttle = Throttle(4, Pacer(None))
    first = throttle.acquire()
    assert not first.crowded
    other = ThreadPoolExecutor(1)
    other.submit(lambda: throttle.release(throttle.acquire(), rate_limited=False)).result()
    other.shutdown()
    assert first.crowded
    throttle.release(first, rate_limited=False)
    fresh = throttle.acquire()  # alone again: a fresh send
    assert not fresh.crowded
    throttle.release(fresh, rate_limited=False)


# -- the memory held by answers read at once ---------------------------------------------------


def endless_streams(threads: int, sends: int, limits: Limits) -> tuple[list[Exchange], Client]:
    server = RawServer(endless_sse).__enter__()
    client = Client(server.url, api_key=API_KEY, limits=limits, concurrency=threads)
    try:
        with ThreadPoolExecutor(threads) as pool:
            exchanges = list(pool.map(lambda _: client.send(case(stream=True)), range(sends)))
    finally:
        client.close()
        server.stop()
    return exchanges, client


def test_answers_read_at_once_share_one_memory_budget() -> None:
    """8 endless streams at once, 1 MiB each allowed, 3 MiB for all: the budget ends them."""
    limits = Limits(ttfb=5.0, gap=2.0, total=5.0, max_bytes=MIB, max_events=10**6,
                    max_bytes_held=3 * MIB)  # fmt: skip
    exchanges, client = endless_streams(8, 8, limits)
    assert {ex.bound for ex in exchanges} <= {"max-bytes", "max-bytes-held"}
    assert "max-bytes-held" in {ex.bound for ex in exchanges}
    held = sum(sum(len(e.data) for e in ex.events or []) for ex in exchanges)
    assert held <= 3 * MIB, held  # the event data alone; the budget counts its objects too
    assert client.stats.peak_in_flight > 1
    # The suite's own memory bound counts the answers it still holds: sending one again
    # alone would hold as much, so it is not sent again.
    assert client.stats.queue_retries == 0


def test_serial_sends_never_meet_the_shared_budget() -> None:
    """One at a time, each answer is let go at the next send: only its own bound ends it.

    (The budget counts memory: an event costs its bytes plus its objects, ~3.7x here.)
    """
    limits = Limits(ttfb=5.0, gap=2.0, total=5.0, max_bytes=MIB, max_events=10**6,
                    max_bytes_held=8 * MIB)  # fmt: skip
    exchanges, _ = endless_streams(1, 4, limits)
    assert [ex.bound for ex in exchanges] == ["max-bytes"] * 4


class OneAtATime:
    """A behaviour: serves one request at a time, each in ``hold`` seconds; the others
    wait in its queue (a server with one slot), and a queued request whose client went
    away is dropped (as llama-server and vLLM cancel on disconnect)."""

    def __init__(self, hold: float) -> None:
        self.hold = hold
        self.ok = respond("200 OK", OK)
        self.slot = threading.Lock()

    def __call__(self, server: RawServer, conn: object, request: bytes) -> None:
        with self.slot:
            # Checked through the whole hold, not only when the turn comes: a client that
            # left mid-generation frees the slot at once, as on a real server. (Checking
            # only at the turn made the test race the client's close against the slot.)
            deadline = time.monotonic() + self.hold
            while time.monotonic() < deadline:
                if gone(conn) or server.stopping.wait(0.01):  # type: ignore[arg-type]
                    return
            self.ok(server, conn, request)  # type: ignore[arg-type]


def test_a_first_byte_time_out_spent_in_the_targets_queue_is_not_a_finding(
    serve: Servers,
) -> None:
    """6 at once to a one-slot target whose queue outlasts the first-byte bound: each
    request that timed out in the crowd is sent again alone and answered; the limit fell."""
    server = serve.start(OneAtATime(hold=0.3))
    limits = Limits(ttfb=1.0, gap=2.0, total=5.0)  # alone, an answer takes 0.3 s of 1.0
    client = Client(server.url, api_key=API_KEY, limits=limits, concurrency=6)
    exchanges = pooled(client, 6, 6)
    assert [ex.status for ex in exchanges] == [200] * 6
    again = [ex for ex in exchanges if ex.notes]
    assert again and all("sent again alone" in ex.notes[0] for ex in again)
    assert all(ex.retries == 1 for ex in again)
    stats = client.stats
    assert stats.queue_retries == len(again) and stats.min_concurrency_limit == 1


def test_a_silent_target_is_not_waited_for_once_per_request(serve: Servers) -> None:
    """A target that never answers: the first request sent again alone times out too,
    and the others' time-outs then stand without a second wait (bounded: ~2 bounds)."""
    server = serve.start(OneAtATime(hold=60.0))
    limits = Limits(ttfb=0.3, gap=2.0, total=5.0)
    client = Client(server.url, api_key=API_KEY, limits=limits, concurrency=6)
    exchanges = pooled(client, 6, 6)
    assert all(ex.bound == "ttfb" and ex.status is None for ex in exchanges)
    # Two requests met the bound again alone (REPEATS_TO_STAND), none was answered alone:
    # the other four time-outs stand without a wait of their own.
    assert client.stats.queue_retries == 6
    assert sum("met a bound again" in " ".join(ex.notes) for ex in exchanges) == 2
    assert sum("not sent again alone" in " ".join(ex.notes) for ex in exchanges) == 4
    assert not client.throttle.resend_alone("ttfb", case())
    assert client.throttle.resend_alone("ttfb", case(stream=True))  # another kind: still sent


def test_a_time_out_alone_is_a_finding_at_once(serve: Servers) -> None:
    """Serial sends: nothing else was in flight, so a time-out is not retried."""
    server = serve.start(OneAtATime(hold=60.0))
    client = Client(server.url, api_key=API_KEY, limits=Limits(ttfb=0.3), concurrency=1)
    ex = client.send(case())
    assert ex.bound == "ttfb" and ex.notes == [] and client.stats.queue_retries == 0


# -- any bound a crowd can cause: sent again alone, and the request that held the target ------


HOLDS = Case({"model": MODEL, "prompt": "hold", "max_tokens": 4}, label="the slow one")


@pytest.mark.parametrize(
    ("limits", "keepalive", "cut_after"),
    [
        (Limits(ttfb=5.0, gap=0.3, total=5.0), None, None),  # they stall past the gap bound
        (Limits(ttfb=5.0, gap=5.0, total=0.6), 0.1, None),  # they trickle past the total
        (Limits(ttfb=5.0, gap=5.0, total=5.0), None, 0.3),  # they are cut (a reset)
    ],
    ids=["gap", "total", "cut"],
)
def test_streams_held_up_by_another_request_are_sent_again_alone_and_name_it(
    serve: Servers, limits: Limits, keepalive: float | None, cut_after: float | None
) -> None:
    """FastChat: healthy streams queued behind a request that held the one slot 28 s. Each
    is sent again alone, answered, and names the request that held the target."""
    behaviour = HeldBySlowRequest(hold=1.5, keepalive=keepalive, cut_after=cut_after)
    server = serve.start(behaviour)
    client = Client(server.url, api_key=API_KEY, limits=limits, concurrency=4)
    with ThreadPoolExecutor(4) as pool:
        slow = pool.submit(client.send, HOLDS)
        assert behaviour.arrived.wait(5)  # it holds the slot before the streams go
        streams = [pool.submit(client.send, case(stream=True)) for _ in range(3)]
        answers = [s.result() for s in streams]
    client.close()
    assert [(a.status, a.bound, a.events[-1].data if a.events else None) for a in answers] == [
        (200, None, "[DONE]")
    ] * 3
    for answer in answers:
        assert answer.sent_alone is not None
        assert "sent again alone, answered" in answer.sent_alone
        assert "the target was held by 'the slow one'" in answer.sent_alone
    stats = client.stats
    assert stats.answered_alone == 3 and stats.min_concurrency_limit == 1
    held = slow.result()
    if limits.total > behaviour.hold:
        assert (held.status, held.bound) == (200, None)  # answered: judged on its answer
    else:
        # It outlasts the total bound alone too: its own finding stands (HTTP-COMPLETE).
        assert held.bound == "total" and "met a bound again" in held.notes[-1]


def test_a_send_alone_waits_for_the_others_and_goes_with_none_beside_it() -> None:
    """Alone means alone: admitted once nothing is in flight, and nothing else is admitted
    beside it, however the adaptive limit has grown back meanwhile."""
    throttle = Throttle(4, Pacer(None))
    first, second = throttle.acquire(), throttle.acquire()
    with ThreadPoolExecutor(2) as pool:
        alone = pool.submit(throttle.acquire, alone=True)
        while not throttle._alone_waiting:  # it waits its turn (no time involved)
            threading.Event().wait(0.001)
        throttle.release(first, rate_limited=False)
        assert not alone.done()  # the second is still in flight
        # A waiting send alone holds back new sends, though a slot is free.
        other = pool.submit(throttle.acquire)
        throttle.release(second, rate_limited=False)
        ticket = alone.result(timeout=5)
        assert not other.done() and throttle.stats().peak_in_flight == 2
        throttle.release(ticket, rate_limited=False)
        throttle.release(other.result(timeout=5), rate_limited=False)
    assert not ticket.crowded


def test_after_a_drop_to_one_the_limit_grows_back_fast_to_half_of_what_it_was() -> None:
    """A time-out in a crowd drops the limit from 8 to 1; it then grows by one per success
    up to 4 (slow start: 3 successes, where one per round took 1 + 2 + 3), and by one per
    round (``limit`` successes) above it."""
    throttle = Throttle(8, Pacer(None))
    crowded = [throttle.acquire() for _ in range(8)]
    throttle.release(crowded[0], rate_limited=False, again_alone=True)
    limits = []
    for flight in crowded[1:]:  # the others answer, one success each
        throttle.release(flight, rate_limited=False)
        limits.append(throttle.stats().concurrency_limit)
    assert throttle.stats().min_concurrency_limit == 1
    assert limits == [2, 3, 4, 4, 4, 4, 5]
