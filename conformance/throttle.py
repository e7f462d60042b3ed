"""When a send may start: pacing, a shared back-off gate, and an adaptive concurrency limit.

The client's sends may come from a pool of threads (the engine's ``--concurrency``).
Three rules decide when one of them may start, all under one lock so that they hold
across threads:

* **pacing** (``--rps``): starts are spaced ``1/rps`` apart, run-wide;
* **the gate**: a 429/503 with ``Retry-After`` closes it for every sender, not only the
  one that got it, so in-flight work backs off together instead of each thread
  hammering the target until it hears its own 429;
* **the limit**: at most ``limit`` sends in flight. It starts at the ceiling (the pool's
  size), is halved on a rate-limit answer (once per back-off window: answers to sends
  that started before the last cut do not cut again) and grows by one after ``limit``
  successes in a row: AIMD, as TCP does, so a target that rate-limits by concurrency
  settles near what it accepts. When the gate reopens, only ``limit`` waiters go.
* **queueing**: a send that got no first byte in time while other sends were in flight
  may have spent its time in the target's queue (llama-cpp-python serves one request at
  a time): the limit drops to 1, and the client sends it once more, alone.

It also keeps the memory budget shared by the answers being held: each exchange bounds
its own size (``Limits.max_bytes``), but 32 hostile answers at once would hold 32 times
that. An exchange reserves what it reads; the reservation is the reading thread's until
it starts its next send (by then the engine has judged the previous answer and let go
of it). A read that would overrun the budget ends with the bound named.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass


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
    retries: int  # 429/503 + Retry-After answers waited out and sent again
    reconnects: int  # sends repeated once on a fresh connection (stale keep-alive)
    peak_in_flight: int
    concurrency: int  # the ceiling: the most sends allowed in flight
    concurrency_limit: int  # the adaptive limit at the end
    min_concurrency_limit: int  # the lowest it went
    rate_limited: int  # answers that were rate-limit signals (429, or 503 + Retry-After)
    queue_retries: int  # first-byte time-outs under load, sent again alone

    def to_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}


class Throttle:
    """Admits sends: pacing, the back-off gate and the AIMD concurrency limit."""

    def __init__(self, ceiling: int, pacer: Pacer, *, memory_budget: int = 1 << 62) -> None:
        self.ceiling = max(1, ceiling)
        self.pacer = pacer
        self.memory_budget = memory_budget
        self._held = 0  # bytes reserved by the answers held, all threads
        self._mine = threading.local()  # what this thread's last exchange reserved
        self._cond = threading.Condition()
        self._limit = self.ceiling
        self._min_limit = self.ceiling
        self._in_flight = 0
        self._peak = 0
        self._starts = 0  # sends started so far: one started during ours shared the target
        self._gate_until = 0.0  # monotonic time before which no send starts
        self._last_cut = 0.0  # monotonic time of the last halving
        self._successes = 0
        self.requests_sent = 0
        self.retries = 0
        self.reconnects = 0
        self.rate_limited = 0
        self.queue_retries = 0
        #: A request sent again alone got no first byte either: time-outs are the
        #: target's silence, not its queue, and are no longer sent again.
        self.queue_disproved = False

    def acquire(self) -> float:
        """Wait until a send may start; returns its start time (a ticket for ``release``)."""
        self._let_go()
        with self._cond:
            self._admit()
            self._in_flight += 1
            self._peak = max(self._peak, self._in_flight)
            self._starts += 1
            self._mine.crowded = self._in_flight > 1
            self._mine.starts_seen = self._starts
        # Pacing outside the lock; the pacer holds its own. A gate that closed while we
        # waited for our slot is waited out too, keeping the slot we have.
        self.pacer.wait()
        with self._cond:
            while (wait := self._gate_until - time.monotonic()) > 0:
                self._cond.wait(wait)
            self.requests_sent += 1
        return time.monotonic()

    def _admit(self) -> None:
        while True:
            wait = self._gate_until - time.monotonic()
            if wait > 0:
                self._cond.wait(wait)
            elif self._in_flight >= self._limit:
                self._cond.wait()
            else:
                return

    def crowded(self) -> bool:
        """Whether this thread's current send shared the target with others at any moment
        (one in flight at its start, one started during it, or one still in flight at its
        end): a time-out it met may be time spent queued behind them."""
        with self._cond:
            return (
                bool(getattr(self._mine, "crowded", False))
                or getattr(self._mine, "starts_seen", self._starts) != self._starts
                or self._in_flight > 1
            )

    def release(self, started: float, *, rate_limited: bool, queued_out: bool = False) -> None:
        """A send that started at ``started`` ended; ``rate_limited``: it was told to slow
        down; ``queued_out``: it timed out waiting for a first byte while crowded, and is
        sent again alone (the limit drops to 1 and grows back as sends succeed)."""
        with self._cond:
            self._in_flight -= 1
            if queued_out:
                self.queue_retries += 1
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
                if started >= self._last_cut:
                    self._limit = max(1, self._limit // 2)
                    self._min_limit = min(self._min_limit, self._limit)
                    self._last_cut = time.monotonic()
            else:
                self._successes += 1
                if self._successes >= self._limit and self._limit < self.ceiling:
                    self._limit += 1
                    self._successes = 0
            self._cond.notify_all()

    def back_off(self, seconds: float) -> None:
        """Close the gate for every sender for ``seconds`` (a Retry-After being waited out)."""
        with self._cond:
            self.retries += 1
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
            )
