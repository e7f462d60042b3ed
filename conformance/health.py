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
last request answered normally before the first failure and that failure. Probes are
few: one at a time (a failure that waited for one takes its verdict), and after
``MAX_HEALTHY`` healthy probes the target has shown that its failures are not deaths.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

from conformance.case import Case
from conformance.exchange import Exchange

HEALTH_TAG = "probe:health"
MAX_HEALTHY = 3
DOWN_NOTE = "the target stopped serving (TARGET-ALIVE): not sent"


def alive(exchange: Exchange) -> bool:
    """The minimal request got what the preflight asked for (429: it answers, limited).

    A completion as preflight.is_completion recognises one (not whether it conforms),
    written here so that this core module does not import the engine layer."""
    if exchange.status == 429:
        return True
    if exchange.status != 200 or exchange.bound is not None:
        return False
    body = exchange.json
    return isinstance(body, dict) and ("choices" in body or "completion" in str(body.get("object")))


def suspicious(case: Case, exchange: Exchange) -> bool:
    """An answer a dead target gives, to a request that a live one must serve."""
    if case.mode == "invalid" or case.auth != "default" or HEALTH_TAG in case.tags:
        return False
    status = exchange.status
    if status is None:
        return exchange.bound is None  # a bound hit is HTTP-COMPLETE's, not a death
    return status == 404 or status >= 500


def _normal(exchange: Exchange) -> bool:
    return exchange.status is not None and 200 <= exchange.status < 300


@dataclass(frozen=True, slots=True)
class Down:
    """The target stopped serving: the failed probe, the first failure, the last good answer."""

    probe: Exchange
    first_failed: Exchange
    last_ok: Exchange | None

    @property
    def related(self) -> tuple[Exchange, ...]:
        return (self.first_failed,) if self.last_ok is None else (self.first_failed, self.last_ok)


class Health:
    """The run's view of whether the target still serves (thread-safe)."""

    def __init__(self, send: Callable[[Case], Exchange], probe: Callable[[], Case | None]) -> None:
        self._send = send
        self._probe = probe
        self._lock = threading.Lock()
        self.down: Down | None = None
        self._reported = False
        self._last_ok: Exchange | None = None
        self._healthy = 0

    def unjudged(self, case: Case, exchange: Exchange, take: Callable[[], bool]) -> bool:
        """Note one answer; True when the target is down and the answer is not to be judged.

        ``take`` takes a request of the budget for a probe (False: none left, no probe)."""
        if self.down is not None:
            return True
        if not suspicious(case, exchange):
            if _normal(exchange):
                self._last_ok = exchange
            return False
        with self._lock:
            if self.down is not None:
                return True
            if self._healthy >= MAX_HEALTHY:
                return False
            probe = self._probe()
            if probe is None or not take():
                return False
            answer = self._send(replace(probe, label="health probe", tags=frozenset({HEALTH_TAG})))
            if alive(answer):
                self._healthy += 1
                return False
            self.down = Down(answer, exchange, self._last_ok)
            return True

    def claim(self) -> Down | None:
        """The Down to report, once per run (the first item to ask reports it)."""
        with self._lock:
            if self.down is None or self._reported:
                return None
            self._reported = True
            return self.down
