"""When a send may start: pacing, a shared back-off gate, and an adaptive concurrency limit.

The client's sends may come from a pool of threads (the engine's ``--concurrency``).
Four rules decide when one of them may start, all under one lock so that they hold
across threads:

* **pacing** (``--rps``): starts are spaced ``1/rps`` apart, run-wide;
* **the gate**: a 429/503 with ``Retry-After`` closes it for every sender, not only the
  one that got it, so in-flight work backs off together instead of each thread
  hammering the target until it hears its own 429;
* **the limit**: at most ``limit`` sends in flight. It starts at the ceiling (the pool's
  size), is halved on a rate-limit answer (once per back-off window: answers to sends
  that started before the last cut do not cut again) and grows by one after ``limit``
  successes in a row: AIMD, as TCP does, so a target that rate-limits by concurrency
  settles near what it accepts. The limit a rate limit refused is probed again only
  after ``REPROBE`` times as many successes: a target that serves 2 at once would
  otherwise refuse every fourth request (1, 2, 3: refused, 1, ...), and one request
  whose retries kept landing on the probe ran out of them. After a drop to 1 (a time-out in a crowd, below) it
  grows by one per success up to half the limit it dropped from, TCP's slow start: one
  request that held the target for a while must not keep the rest of the run at a
  fraction of its capacity. When the gate reopens, only ``limit`` waiters go.
* **alone**: a send that met a bound load can cause (a time-out, a cut stream) while
  other sends were in flight may have spent its time in the target's queue (llama-cpp-
  python serves one request at a time; FastChat spent 28 s on one request while streams
  waited): the limit drops to 1, and the client sends it once more *alone*, admitted
  only when nothing else is in flight and admitting nothing beside it, once the target
  answered the minimal request (``wait_free``: work the client left is done). Once two
  requests of one kind met their bound again alone and none was answered alone, that
  kind of bound is the target's for that kind of request, not its queue's: later ones
  stand without a second wait (``resend_alone``).
* **retries first**: a send that waits to go again after a rate limit goes before any
  fresh send, so that the requests a rate limit refused are not refused again and again
  while the limit settles (one ran out of its retries while fresh sends took the slots).

Each send is a ``Flight`` (conformance/run/flights.py): the flights in flight together know
each other, which names the request that held the target, or was in flight when it died.

It also keeps the memory budget shared by the answers being held: each exchange bounds
its own size (``Limits.max_bytes``), but 32 hostile answers at once would hold 32 times
that. An exchange reserves what it reads; the reservation is the reading thread's until
it starts its next send (by then the engine has judged the previous answer and let go
of it). A read that would overrun the budget ends with the bound named.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange
from conformance.run.flights import Flight, Flights, in_flight_since


class Pacer:
    """Spaces request starts so that at most ``rps`` are sent per second (thread-safe)."""

    def __init__(self, rps: float | None) -> None:
        self.interval = 1.0 / rps if rps else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        if not self.interval:
            return
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            time.sleep(start - now)


@dataclass(frozen=True, slots=True)
class ClientStats:
    """What the client saw of the target's capacity, for the reports."""

    requests_sent: int
    retries: int  # rate-limit answers waited out (Retry-After, or a back-off) and sent again
    reconnects: int  # sends repeated once on a fresh connection (stale keep-alive)
    peak_in_flight: int
    concurrency: int  # the ceiling: the most sends allowed in flight
    concurrency_limit: int  # the adaptive limit at the end
    min_concurrency_limit: int  # the lowest it went
    rate_limited: int  # answers that were rate-limit signals (429, or 503 + Retry-After)
    queue_retries: int  # time-outs and cut streams met beside other sends, sent again alone
    answered_alone: int  # of those, answered when sent alone (not findings)
    free_probes: int  # minimal requests sent to see the target free before a send alone

    def to_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}


#: A kind of bound that this many requests of one kind met again alone, with none
#: answered alone, is the target's for that kind: later ones stand without being sent again.
REPEATS_TO_STAND = 2
#: Between two minimal requests that failed without a bound (a refused connection).
PROBE_PAUSE = 0.5


def request_kind(case: Case | None) -> str:
    """The kind of request the rule of repeats counts by: Prism never answers a body that
    is not JSON, which says nothing of how it answers a completion."""
    if case is None:
        return "a request"
    body = "a body that is not JSON" if case.raw_body is not None else "a JSON body"
    return f"{case.mode}, {'streamed' if case.stream else 'not streamed'}, {body}"


@dataclass(frozen=True, slots=True)
class Free:
    """What the wait for a free target showed before a send alone."""

    answered: bool  # the minimal request was answered (False: not within the wait)
    waited: float = 0.0
    probes: int = 0  # 0: no minimal request is known (a bare client), none was sent

    def describe(self) -> str:
        """For the note of a send alone (made only once the target answered): how the
        target was shown free, if a minimal request is known."""
        if not self.probes:
            return ""
        return (
            f" once the target answered the minimal request ({self.waited:.1f} s, "
            f"{self.probes} sent)"
        )


@dataclass(frozen=True, slots=True)
class Stopped:
    """The target answered no minimal request within ``wait`` seconds (``Throttle.wait_free``):
    it stopped serving, at ``at`` (monotonic); ``probe``: the last one sent."""

    probe: Exchange
    at: float
    wait: float


#: How many times more successes it takes to grow back to a limit a rate limit refused.
REPROBE = 4


class Throttle:
    """Admits sends: pacing, the back-off gate, the AIMD concurrency limit, sends alone."""

    def __init__(
        self, ceiling: int, pacer: Pacer, *, memory_budget: int = 1 << 62, gap: float = 0.0
    ) -> None:
        self.ceiling = max(1, ceiling)
        self.pacer = pacer
        self.memory_budget = memory_budget
        self.gap = gap  # the gap bound: when a gap time-out's wait began
        self._held = 0  # bytes reserved by the answers held, all threads
        self._mine = threading.local()  # what this thread's last exchange reserved
        self._cond = threading.Condition()
        self._limit = self.ceiling
        self._min_limit = self.ceiling
        # Where growth slows down: half the limit a queue time-out dropped it from (the
        # limit that overloaded the target); a 429's cut sets it to the halved limit.
        self._threshold = self.ceiling
        self._in_flight = 0
        self._peak = 0
        self._alone_waiting = 0  # sends waiting to go alone: nothing else is admitted
        self._retries_waiting = 0  # sends waiting to go again after a rate limit: first
        # The crowded flights to be sent again alone: they go in the order they first
        # started, so that a request that held the target is judged before those that
        # waited behind it (resend.py excuses these by it).
        self._alone_queue: list[Flight] = []
        self._alone: Flight | None = None  # the send in flight alone
        self._gate_until = 0.0  # monotonic time before which no send starts
        self._last_cut = 0.0  # monotonic time of the last halving
        self._refused_at = self.ceiling + 1  # the limit a rate limit last refused
        self._successes = 0
        self.flights = Flights()
        #: Per kind of bound and kind of request: [met again alone, answered alone].
        self._alone_outcomes: dict[tuple[str, str], list[int]] = {}
        #: Sends the minimal request (the preflight's) bypassing the throttle, to see the
        #: target free before a send alone (``wait_free``); None: not known.
        self.probe: Callable[[], Exchange] | None = None
        #: The target answered no minimal request within the wait: it stopped serving.
        self.stopped: Stopped | None = None
        self.free_probes = 0
        self.requests_sent = 0
        self.retries = 0
        self.reconnects = 0
        self.rate_limited = 0
        self.queue_retries = 0
        self.answered_alone = 0

    def acquire(
        self,
        case: Case | None = None,
        *,
        alone: bool = False,
        crowded: Flight | None = None,
        retry: bool = False,
    ) -> Flight:
        """Wait until a send may start; returns its Flight (the ticket for ``release``).

        ``alone``: wait until nothing else is in flight, and admit nothing beside it;
        ``crowded``: the flight it repeats (released with ``again_alone``), which waits its
        turn among those to be sent alone, the first started first; ``retry``: it goes
        again after a rate limit, before any fresh send.
        """
        self._let_go()
        with self._cond:
            if alone:
                self._alone_waiting += 1
                try:
                    self._admit(alone=True, turn=crowded)
                finally:
                    self._alone_waiting -= 1
                    if crowded in self._alone_queue:
                        self._alone_queue.remove(crowded)
            elif retry:
                self._retries_waiting += 1
                try:
                    self._admit(alone=False, retry=True)
                finally:
                    self._retries_waiting -= 1
            else:
                self._admit(alone=False)
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)
            flight = self.flights.begin(case, time.monotonic())
            if alone:
                self._alone = flight
        # Pacing outside the lock; the pacer holds its own. A gate that closed while we
        # waited for our slot is waited out too, keeping the slot we have.
        self.pacer.wait()
        with self._cond:
            while (wait := self._gate_until - time.monotonic()) > 0:
                self._cond.wait(wait)
            self.requests_sent += 1
            flight.started = time.monotonic()
        return flight

    def _admit(self, *, alone: bool, turn: Flight | None = None, retry: bool = False) -> None:
        while True:
            wait = self._gate_until - time.monotonic()
            if wait > 0:
                self._cond.wait(wait)
            elif self._blocked(alone=alone, turn=turn, retry=retry):
                self._cond.wait()
            else:
                return

    def _blocked(self, *, alone: bool, turn: Flight | None = None, retry: bool = False) -> bool:
        """A send that goes alone is in flight; or, alone: something else is in flight, or
        a crowded flight that started before ``turn`` waits to go alone; or not alone: one
        waits to go alone, or the limit is reached, or (a fresh send) a retry waits."""
        if self._alone is not None:
            return True
        if alone:
            first = min(self._alone_queue, key=lambda f: f.started, default=None)
            return self._in_flight > 0 or (first is not None and first is not turn)
        if not retry and self._retries_waiting:
            return True
        return bool(self._alone_waiting) or self._in_flight >= self._limit

    def release(
        self,
        flight: Flight,
        exchange: Exchange | None = None,
        *,
        rate_limited: bool,
        again_alone: bool = False,
    ) -> None:
        """The send of ``flight`` ended with ``exchange``; ``rate_limited``: it was told to
        slow down; ``again_alone``: it met a bound beside other sends and goes again alone
        (the limit drops to 1 and grows back as sends succeed)."""
        with self._cond:
            self._in_flight -= 1
            self.flights.end(flight, exchange, time.monotonic(), self.gap)
            if self._alone is flight:
                self._alone = None
            if again_alone:
                self.queue_retries += 1
                self._alone_queue.append(flight)
                if flight.started >= self._last_cut:  # once per window, as for a 429
                    self._threshold = max(1, self._limit // 2)
                self._limit = self._min_limit = 1
                self._successes = 0
                self._last_cut = time.monotonic()
                self._cond.notify_all()
                return
            if rate_limited:
                self.rate_limited += 1
                self._successes = 0
                # One cut per window: sends already in flight when we cut answer from
                # the old load, and cutting again for each would collapse the limit.
                if flight.started >= self._last_cut:
                    self._refused_at = self._limit
                    self._limit = self._threshold = max(1, self._limit // 2)
                    self._min_limit = min(self._min_limit, self._limit)
                    self._last_cut = time.monotonic()
            else:
                self._successes += 1
                # Below the threshold, one more per success (the limit doubles per round:
                # TCP's slow start); above it, one more per round (``limit`` successes).
                step = 1 if self._limit < self._threshold else self._limit
                if self._limit + 1 >= self._refused_at:
                    step *= REPROBE
                if self._successes >= step and self._limit < self.ceiling:
                    self._limit += 1
                    self._successes = 0
            self._cond.notify_all()

    def cancel(self, flight: Flight) -> None:
        """``flight`` was admitted but nothing was sent: as if it had never been."""
        with self._cond:
            self._in_flight -= 1
            self.requests_sent -= 1
            if self._alone is flight:
                self._alone = None
            self.flights.forget(flight)
            self._cond.notify_all()

    def wait_free(self, flight: Flight, wait: float) -> Free:
        """``flight`` goes alone: first send the minimal request until the target answers
        it (whatever it was still doing for requests the client left is then done), for at
        most ``wait`` seconds. Nothing else is admitted meanwhile (``flight`` holds the
        turn alone); its start is then moved to after the wait."""
        if self.probe is None:
            return Free(answered=True)
        began = time.monotonic()
        probes = 0
        while True:
            exchange = self.probe()
            probes += 1
            with self._cond:
                self.requests_sent += 1
                self.free_probes += 1
            waited = time.monotonic() - began
            if exchange.status is not None and exchange.bound is None:
                break
            if waited >= wait:
                exchange.transport_error = (
                    f"{exchange.transport_error or 'no answer'}; none of the {probes} sent "
                    f"alone in {waited:.0f} s (the client's wait) was answered"
                )
                with self._cond:
                    self.stopped = Stopped(exchange, time.monotonic(), wait)
                break
            if exchange.bound is None:  # failed at once (refused): not a busy loop
                time.sleep(min(PROBE_PAUSE, wait - waited))
        flight.started = time.monotonic()
        answered = exchange.status is not None and exchange.bound is None
        return Free(answered=answered, waited=waited, probes=probes)

    def in_flight_after_last_ok(self, until: float) -> list[Flight]:
        """The flights on the wire between the last normal answer that ended before
        ``until`` and ``until``, that had not ended normally, the first started first: the
        requests that were in flight when a target found dead at ``until`` died."""
        with self._cond:
            flights = list(self.flights.history)
        last_ok = max(
            (f.ended for f in flights if f.normal and f.ended is not None and f.ended <= until),
            default=float("-inf"),
        )
        return in_flight_since(flights, last_ok, until)

    def resend_alone(self, kind: str, case: Case | None) -> bool:
        """Whether a ``kind`` of bound met beside other sends by ``case`` is still sent
        again alone: not once the target answered no minimal request within the wait, nor
        once REPEATS_TO_STAND requests of its kind met it again alone and none was answered
        alone."""
        with self._cond:
            if self.stopped is not None:
                return False
            repeated, answered = self._alone_outcomes.get((kind, request_kind(case)), (0, 0))
            return answered > 0 or repeated < REPEATS_TO_STAND

    def judged_alone(self, kind: str, case: Case | None, *, answered: bool) -> None:
        """A send of ``case`` that met ``kind`` beside others was sent alone, on a target
        shown free: answered, or met it again (the rule of repeats counts it)."""
        with self._cond:
            self.answered_alone += answered
            outcome = self._alone_outcomes.setdefault((kind, request_kind(case)), [0, 0])
            outcome[1 if answered else 0] += 1

    def back_off(self, seconds: float, *, shared: bool = True) -> None:
        """Count one rate-limited send waited out; ``shared`` (a Retry-After): close the
        gate for every sender for ``seconds``. Otherwise (a back-off of the sender's own,
        as the openai SDK does when the target does not say) the caller waits alone."""
        with self._cond:
            self.retries += 1
            if shared:
                self._gate_until = max(self._gate_until, time.monotonic() + seconds)

    def reserve(self, size: int) -> bool:
        """Count ``size`` more bytes held by this thread's answer; False: over the budget."""
        with self._cond:
            if self._held + size > self.memory_budget:
                return False
            self._held += size
        self._mine.held = getattr(self._mine, "held", 0) + size
        return True

    def _let_go(self) -> None:
        """This thread starts a new send: its previous answer is no longer held."""
        size = getattr(self._mine, "held", 0)
        if size:
            self._mine.held = 0
            with self._cond:
                self._held -= size

    def reconnected(self) -> None:
        """A send is repeated on a fresh connection: one more request on the wire."""
        with self._cond:
            self.reconnects += 1
            self.requests_sent += 1

    def stats(self) -> ClientStats:
        with self._cond:
            return ClientStats(
                requests_sent=self.requests_sent,
                retries=self.retries,
                reconnects=self.reconnects,
                peak_in_flight=self._peak,
                concurrency=self.ceiling,
                concurrency_limit=self._limit,
                min_concurrency_limit=self._min_limit,
                rate_limited=self.rate_limited,
                queue_retries=self.queue_retries,
                answered_alone=self.answered_alone,
                free_probes=self.free_probes,
            )
