"""Scheduling a run's sends for the critical path: a slot gate that lets dependent chains go first.

Against a slow target a run's wall time is bounded by two things: its requests divided
by ``--concurrency`` (rounds of one latency each), and its longest chain of requests
that must wait for an earlier answer (the stop probe, the seed probe's twin). The engine
therefore starts every chain before it queues the independent cases, and a chain's next
request takes the next free slot ahead of any queued independent case (``urgent``), so
the chains finish within their own few latencies instead of after the whole queue.
"""

from __future__ import annotations

import threading


class Slots:
    """At most ``size`` sends in flight; urgent acquirers are served before the others.

    A plain semaphore is not fair: a pool thread that has just released its slot takes it
    straight back for the next queued case, and a chain's next request can wait behind the
    whole queue. Here an ordinary acquirer yields while an urgent one is waiting.
    """

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._free = self.size
        self._urgent_waiting = 0
        self._cond = threading.Condition()

    def acquire(self, *, urgent: bool = False, count: int = 1) -> None:
        """Take ``count`` slots (``count == size``: the run alone), waiting as needed."""
        with self._cond:
            if urgent:
                self._urgent_waiting += 1
            try:
                while self._free < count or (not urgent and self._urgent_waiting):
                    self._cond.wait()
            finally:
                if urgent:
                    self._urgent_waiting -= 1
            self._free -= count

    def release(self, count: int = 1) -> None:
        with self._cond:
            self._free += count
            self._cond.notify_all()
