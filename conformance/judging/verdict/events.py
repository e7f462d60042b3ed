"""A run told as typed events: what the engine emits, for runners, progress and reports.

The engine emits, in this order per run: ``RunStarted``; for each judged exchange an
``ExchangeJudged`` (sent, answered, judged); for each played item a ``ScenarioFinished``
(with the record entry: how it ended, and when it was not run or cut short, why); and the
runner ends with ``RunFinished`` carrying the typed Results and the verdict the judge
core decided. A listener is any callable taking an ``Event``, added with
``Emitter.listen`` (``Run.emit``; ``run_suite(listeners=...)``): the reports are written
by one (conformance.reports.ReportWriter) and the terminal's closing block is built by
another (conformance.front.terminal.ClosingBlock), so a new consumer needs no hook into
the engine. Chains play in threads of their own, so the engine delivers events under a
lock, one at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from conformance.judging.verdict.record import RunRecord, ScenarioRun
from conformance.judging.verdict.results import Results
from conformance.judging.verdict.verdict import Verdict


@dataclass(frozen=True, slots=True)
class RunStarted:
    """The run is assembled: what it is (identity, selection, applicability)."""

    record: RunRecord


@dataclass(frozen=True, slots=True)
class ExchangeJudged:
    """One request was sent, answered (or not: ``status`` None) and judged."""

    label: str
    status: int | None
    failed: tuple[str, ...] = ()  # requirements that failed on it


@dataclass(frozen=True, slots=True)
class ScenarioFinished:
    """One scenario item ended; ``run.cause`` says why it was not run or cut short."""

    run: ScenarioRun

    @property
    def skipped(self) -> bool:
        return self.run.cause is not None


@dataclass(frozen=True, slots=True)
class RunFinished:
    """The run ended: its merged Results (attributed, ``results.verdict`` kept) and the
    verdict the judge core decided. ``partial``: one shard of a run (the merge decides)."""

    results: Results
    verdict: Verdict
    partial: bool = False


Event = RunStarted | ExchangeJudged | ScenarioFinished | RunFinished
Listener = Callable[[Event], None]
#: The events of one process's scenario items, which a pytest-xdist worker ships to its
#: controller (with each item's Results) so that the controller's listeners hear them too.
ItemEvent = ExchangeJudged | ScenarioFinished


def item_event_to_json(event: ItemEvent) -> dict[str, Any]:
    if isinstance(event, ExchangeJudged):
        return {"judged": event.label, "status": event.status, "failed": list(event.failed)}
    return {"finished": event.run.to_json()}


def item_event_from_json(data: dict[str, Any]) -> ItemEvent:
    if "finished" in data:
        return ScenarioFinished(ScenarioRun.from_json(data["finished"]))
    status = data.get("status")
    return ExchangeJudged(
        str(data["judged"]),
        None if status is None else int(status),
        tuple(str(f) for f in data.get("failed", ())),
    )


@dataclass
class Emitter:
    """Delivers events to listeners, one at a time (chains emit from their own threads)."""

    listeners: list[Listener] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def listen(self, listener: Listener) -> Listener:
        """Add ``listener``: it hears every event from now on, in order; returned as given."""
        with self._lock:
            self.listeners.append(listener)
        return listener

    def __call__(self, event: Event) -> None:
        if not self.listeners:
            return
        with self._lock:
            for listener in self.listeners:
                listener(event)
