"""Is the target still serving? A health probe after answers that may mean it died.

A valid request can kill a target (mlx-lm: a one-item prompt list kills its generation
thread, and every later request is answered 404). Judged request by request, the later
answers would blame features: declined capabilities, 404s, VALID-ACCEPTED. So an answer
that a dead target gives (no answer at all without a bound hit, a 5xx, a 404) to a request
the suite calls valid is followed by the health probe: the preflight's minimal request
(max_tokens 1; a target that serves no GET cannot be asked more cheaply, and a GET
proves nothing of a dead generation thread behind a live HTTP server). "Alive" means
what the preflight asked: a 200 that is a completion (or a 429: it answers).

If the probe fails, the target is down from then on: the run sends nothing more, the
answers that come back later are not judged, and one finding (TARGET-ALIVE) names the
first failure seen and the requests **in flight when it died**: those on the wire after
the last normal answer and before the probe that did not end normally, the first started
first (conformance/run/flights.py). Not the last request answered normally: with requests in
flight at once, the culprit is often still in flight when another request's failure
comes back (mlx-lm died of a one-item prompt list while a token prompt's 404 came back).
Probes are few: one at a time (a failure that waited for one takes its verdict), and
after ``MAX_HEALTHY`` healthy probes the target has shown that its failures are not
deaths.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from conformance.judging.checks.liveness import HEALTH_TAG, alive
from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange
from conformance.run.flights import Flight
from conformance.run.throttle import Stopped

MAX_HEALTHY = 3
DOWN_NOTE = "the target stopped serving (TARGET-ALIVE): not sent"


def suspicious(case: Case, exchange: Exchange) -> bool:
    """An answer a dead target gives, to a request that a live one must serve."""
    if case.mode == "invalid" or case.auth != "default" or HEALTH_TAG in case.tags:
        return False
    status = exchange.status
    if status is None:
        return exchange.bound is None  # a bound hit is HTTP-COMPLETE's, not a death
    return status == 404 or status >= 500


def as_health_probe(probe: Case) -> Case:
    """The minimal request, as the probe of whether the target still serves."""
    return replace(probe, label="health probe", tags=frozenset({HEALTH_TAG}))


@dataclass(frozen=True, slots=True)
class Down:
    """The target stopped serving: the failed probe, the first failure seen, and the
    requests that were in flight when it died (Flights, still updated as they end)."""

    probe: Exchange
    first_failed: Exchange
    in_flight: tuple[Flight, ...] = ()

    @property
    def suspects(self) -> list[Flight]:
        """The requests in flight when it died that did not end normally (by now), health
        probes left out: first those the client left or lost (a bound, a cut: a request
        that holds a one-slot target is one), then those answered with an error status,
        each group the first started first. Behind LiteLLM, llama-cpp-python's holder was
        listed after 33 requests answered 500 in a second."""
        suspects = [
            f
            for f in self.in_flight
            if not f.normal and f.case is not None and HEALTH_TAG not in f.case.tags
        ]
        return sorted(suspects, key=lambda f: (f.failure is None, f.started))

    @property
    def related(self) -> tuple[Exchange, ...]:
        """The first failure, then what the client saw of each suspect (TARGET-ALIVE)."""
        return (self.first_failed, *(f.summary() for f in self.suspects))


#: What the run's throttle knows of the flights: those in flight between two moments that
#: did not end normally, after the last normal answer (Throttle.in_flight_after_last_ok).
InFlight = Callable[[float], list[Flight]]


class Health:
    """The run's view of whether the target still serves (thread-safe)."""

    def __init__(
        self,
        send: Callable[[Case], Exchange],
        probe: Callable[[], Case | None],
        in_flight: InFlight | None = None,
        stopped: Callable[[], Stopped | None] = lambda: None,
    ) -> None:
        self._send = send
        self._probe = probe
        self._in_flight = in_flight
        self._stopped = stopped
        self._lock = threading.Lock()
        self.down: Down | None = None
        self._reported = False
        self._healthy = 0

    def unjudged(self, case: Case, exchange: Exchange, take: Callable[[], bool]) -> bool:
        """Note one answer; True when the target is down and the answer is not to be judged.

        ``take`` takes a request of the budget for a probe (False: none left, no probe)."""
        if self.down is not None:
            return True
        if (stopped := self._stopped()) is not None:
            # The client waited for the target to answer the minimal request before a send
            # alone, and it answered none within that wait (resend.py): it stopped serving.
            with self._lock:
                if self.down is None:
                    flights = self._in_flight(stopped.at) if self._in_flight is not None else []
                    self.down = Down(stopped.probe, exchange, tuple(flights))
            return True
        if not suspicious(case, exchange):
            return False
        with self._lock:
            if self.down is not None:
                return True
            if self._healthy >= MAX_HEALTHY:
                return False
            probe = self._probe()
            if probe is None or not take():
                return False
            probed_at = time.monotonic()
            answer = self._send(as_health_probe(probe))
            if alive(answer):
                self._healthy += 1
                return False
            flights = self._in_flight(probed_at) if self._in_flight is not None else []
            self.down = Down(answer, exchange, tuple(flights))
            return True

    def claim(self) -> Down | None:
        """The Down to report, once per run (the first item to ask reports it)."""
        with self._lock:
            if self.down is None or self._reported:
                return None
            self._reported = True
            return self.down
