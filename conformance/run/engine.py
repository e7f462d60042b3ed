"""One conformance run, runner-agnostic: settings, budget, sending Cases, judging them.

A ``Run`` holds what one process shares (spec, client, budget, the selected
requirements, a pool of ``concurrency`` senders). A scenario (conformance/run/scenarios.py)
is played into an ``ItemRun``, which sends its cases and judges each exchange in case
order; its ``outcome()`` says passed, failed (a deciding requirement failed) or skipped.
``execute`` plays a list of scenarios without any test runner; the pytest plugin plays
one scenario per pytest item instead and ships each item's Results to its controller.
Before the first item plays, ``Run.plan`` starts every dependent chain (a scenario with a
``body``) in a thread of its own and then queues the independent cases, so that against a
slow target the chains run beside the queue, not after it (conformance/run/schedule.py).
Nothing here imports pytest.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from conformance.judging.checks import load_checks
from conformance.judging.document.spec import Spec
from conformance.judging.requirements import REGISTRY, Requirement
from conformance.judging.verdict.events import Emitter, ScenarioFinished
from conformance.judging.verdict.record import ScenarioOutcome, ScenarioRun
from conformance.judging.verdict.results import Results, tokens_used
from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange
from conformance.run.client import Client
from conformance.run.health import DOWN_NOTE, Health, as_health_probe
from conformance.run.item import ItemOutcome, ItemRun
from conformance.run.pool import Pool
from conformance.run.schedule import Slots
from conformance.run.session import (
    Budget,
    BudgetSpent,
    ScenarioSkipped,
    Sender,
    Sent,
    Settings,
)

if TYPE_CHECKING:
    from conformance.run.scenarios import Scenario

T = TypeVar("T")


def status_summary(results: Results, spec: Spec) -> str:
    """One line: the statuses answered, and the declared ones never seen."""
    counts = results.info.observed_statuses or {}
    seen = ", ".join(f"{s} x{n}" for s, n in sorted(counts.items())) or "none"
    unseen = [
        d
        for d in spec.declared_statuses
        if not any(s == d or (d.endswith("XX") and s[0] == d[0]) for s in counts) and d != "default"
    ]
    undeclared = [s for s in sorted(counts) if not spec.is_declared(int(s))]
    line = f"statuses observed: {seen}"
    if unseen:
        line += f"; declared but not observed: {', '.join(unseen)}"
    if undeclared:
        line += f"; undeclared: {', '.join(undeclared)}"
    return line


class RunInterrupted(KeyboardInterrupt):
    """The run was interrupted (Ctrl-C, ``Run.interrupt``), raised where a thread waits for
    a send or starts one. The KeyboardInterrupt a signal handler raises is lost when the
    handler ran inside a gc callback (Hypothesis keeps one) or a ``__del__``: Python reports
    it as unraisable and the main thread goes on, so this one stops it where it next waits."""


def _done(sent: Sent) -> Future[Sent]:
    future: Future[Sent] = Future()
    future.set_result(sent)
    return future


class Run:
    """Per-process state of a conformance run."""

    def __init__(self, settings: Settings, spec: Spec, client: Client, *, workers: int = 1) -> None:
        load_checks()
        self.settings = settings
        self.spec = spec
        self.client = client
        # Each at the level this spec's evidence supports (Requirement.under).
        self.requirements: list[Requirement] = [
            REGISTRY[r].under(spec) for r in REGISTRY if settings.selected(r)
        ]
        # Budgets are split between xdist workers so that the run as a whole honours them.
        self.budget = Budget(
            max(1, settings.budget_requests // workers), max(1, settings.budget_tokens // workers)
        )
        self.rate_limited = False
        #: How a Ctrl-C stopped the run (``interrupt``): nothing more is sent from then on.
        self.interrupted: str | None = None
        # The run told as events (conformance/judging/verdict/events.py): add listeners to ``emit``.
        self.emit = Emitter()
        self.concurrency = max(1, settings.concurrency)
        self._slots = Slots(self.concurrency)
        self._alone_lock = threading.Lock()
        # Independent cases queue on the pool; a chain's sends (urgent) on a pool of their
        # own, so they never wait behind the queue; each chain plays in a thread of its own.
        self._pools: dict[str, Pool] = {}
        self._planned: dict[tuple[str, Any], list[Future[Sent]] | Exception] = {}
        self._chains: dict[tuple[str, Any], Future[ItemRun]] = {}
        # Every send and chain not yet waited for, to fail them when the run is abandoned.
        self._futures: weakref.WeakSet[Future[Any]] = weakref.WeakSet()
        self._shared: dict[str, Any] = {}
        self._shared_lock = threading.Lock()
        # Whether the target still serves (conformance/run/health.py): probed after answers a
        # dead target gives; once down, nothing more is sent or judged.
        throttle = client.throttle
        self.health = Health(
            client.send, self._health_probe, throttle.in_flight_after_last_ok,
            lambda: throttle.stopped,
        )  # fmt: skip
        # The same minimal request shows the target free before a send alone (resend.py);
        # one that is never answered is the health probe that found the target stopped.
        if (probe := self._health_probe()) is not None:
            client.probe_with(as_health_probe(probe))

    def _health_probe(self) -> Case | None:
        from conformance.run.preflight import PreflightFailed, probe_case

        try:
            return probe_case(self.settings.model, self.spec)
        except PreflightFailed:
            return None

    def _take_probe_request(self) -> bool:
        try:
            self.budget.take_request()
        except BudgetSpent:
            return False
        return True

    def item(self, *, urgent: bool = False) -> ItemRun:
        return ItemRun(self, urgent=urgent)

    def shared(self, key: str, build: Callable[[], T]) -> T:
        """What ``build`` returns, built once per run (a case list that batches slice)."""
        with self._shared_lock:
            if key not in self._shared:
                self._shared[key] = build()
            return cast("T", self._shared[key])

    def _pool(self, kind: str, size: int) -> Pool:
        pool = self._pools.get(kind)
        if pool is None:
            pool = Pool(size, f"conformance-{kind}")
            self._pools[kind] = pool
        return pool

    # -- sending -------------------------------------------------------------------------

    def dispatch(
        self, case: Case, via: Sender | None = None, *, wait: bool = False, urgent: bool = False
    ) -> Future[Sent]:
        """Take the budget for ``case`` now (in call order) and send it.

        With ``wait`` or at concurrency 1 it is sent in this thread; otherwise on a pool,
        at most ``concurrency`` at once. ``urgent``: a chain's request, which takes the
        next free slot before any queued independent case.
        """
        if self.interrupted:
            raise RunInterrupted(self.interrupted)
        if self.rate_limited or self.health.down is not None:
            return _done(Sent(None))
        try:
            self.budget.take_request()
        except BudgetSpent as exc:
            return _done(Sent(None, str(exc)))
        if wait or self.concurrency == 1:
            return _done(self._transmit(case, via, urgent))
        pool = self._pool("chain-sends" if urgent else "sends", self.concurrency)
        future = pool.submit(self._transmit, case, via, urgent)
        self._futures.add(future)
        return future

    def _transmit(self, case: Case, via: Sender | None, urgent: bool = False) -> Sent:
        if self.rate_limited or self.health.down is not None or self.interrupted:
            return Sent(None)  # while this one waited
        self._slots.acquire(urgent=urgent)
        try:
            exchange = self._send(case, via)
        finally:
            self._slots.release()
        if self.interrupted:  # an answer nobody will judge: no resend, no health probe
            return Sent(None)
        if exchange.status == 429 and self.concurrency > 1 and not self.rate_limited:
            exchange = self._alone(case, via, exchange)
        self.budget.spend_tokens(tokens_used(exchange))
        if exchange.status == 429:
            self.rate_limited = True
        if self.health.unjudged(case, exchange, self._take_probe_request):
            return Sent(None, DOWN_NOTE)
        return Sent(exchange)

    def _send(self, case: Case, via: Sender | None) -> Exchange:
        client = self.client
        # Another sender (the SDK) is paced and retried like the client's own sends.
        return client.send(case) if via is None else client.paced(lambda: via(client, case), case)

    def _alone(self, case: Case, via: Sender | None, limited: Exchange) -> Exchange:
        """Send a rate-limited case once more with nothing else in flight.

        Sends in flight together may have drawn the 429s between them (a limit on every
        third request, say): the run adapts down to one at a time before it concludes
        that the limit never clears. Its attempts count as retries.
        """
        with self._alone_lock:
            if self.rate_limited:
                return limited
            # Every slot at once: wait until nothing else is in flight, and hold them all.
            self._slots.acquire(urgent=True, count=self.concurrency)
            try:
                exchange = self._send(case, via)
            finally:
                self._slots.release(self.concurrency)
        exchange.retries += limited.retries + 1
        exchange.throttled = [*limited.throttled, limited, *exchange.throttled]
        return exchange

    def interrupt(self, why: str) -> None:
        """Stop sending (Ctrl-C): no case is sent from now on, and no attempt of a send in
        flight (a retry, a resend alone, a probe) either. Only flags are set, so a signal
        handler may call it whatever the thread it interrupted held; ``close`` then
        abandons what is in flight instead of waiting for it."""
        self.interrupted = why
        self.client.stop()

    def abandon(self) -> None:
        """After ``interrupt``, from a thread other than the one it interrupted: every send
        and chain not done fails with RunInterrupted now, so that nothing waits for one (a
        slow target's answer); the threads that run them are left to the process's end."""
        why = self.interrupted or "interrupted"
        for future in list(self._futures):
            with contextlib.suppress(InvalidStateError):  # done meanwhile
                future.set_exception(RunInterrupted(why))

    def plan(self, items: Iterable[tuple[Scenario, Any]]) -> None:
        """Start what ``items`` will send, before the first of them plays (concurrency > 1).

        The slots fill first: the independent cases that are cheap to build are queued at
        once (a few ms for a hundred), then every dependent chain starts, in a thread of
        its own, its requests urgent (they take the next free slot ahead of the queue), and
        last the costly cases (drawn by Hypothesis) are built and queued while the first
        requests are on the wire. Each item collects its own exchanges when it plays, and
        judges them in case order.
        """
        if self.concurrency == 1:
            return
        items = list(items)
        for scenario, param in items:
            if not scenario.costly:
                self.prefetch(scenario, param)
        for scenario, param in items:
            self.start_chain(scenario, param)
        for scenario, param in items:
            if scenario.costly:
                self.prefetch(scenario, param)

    def start_chain(self, scenario: Scenario, param: Any) -> None:
        """Play a dependent scenario now, in its own thread; its item adopts the result."""
        key = (scenario.name, param)
        if scenario.body is None or key in self._chains:
            return
        pool = self._pool("chains", 8)
        self._chains[key] = pool.submit(_play_body, self.item(urgent=True), scenario, param)
        self._futures.add(self._chains[key])

    def chain(self, scenario: Scenario, param: Any) -> Future[ItemRun] | None:
        """The started chain of this item, if ``plan`` started one."""
        return self._chains.pop((scenario.name, param), None)

    def prefetch(self, scenario: Scenario, param: Any) -> None:
        """Send the cases of an independent scenario now; its item collects them later.

        Called for every item before the first one runs, so that up to ``concurrency``
        requests are in flight across items, not only within one.
        """
        if scenario.cases is None or (scenario.name, param) in self._planned:
            return
        try:
            cases = scenario.cases(self, param)
        except Exception as exc:  # a skip, or a defect: raised again when the item plays
            self._planned[scenario.name, param] = exc
            return
        self._planned[scenario.name, param] = [self.dispatch(c, scenario.via) for c in cases]

    def planned(self, scenario: Scenario, param: Any) -> list[Future[Sent]]:
        """The sends of an independent scenario: prefetched, or dispatched now."""
        plan = self._planned.pop((scenario.name, param), None)
        if plan is None:
            assert scenario.cases is not None
            plan = [self.dispatch(c, scenario.via) for c in scenario.cases(self, param)]
        if isinstance(plan, Exception):
            raise plan
        return plan

    def close(self) -> None:
        """Stop the pools; prefetched sends no item collected are cancelled.

        Started chains end first (their sends are on a pool of their own), so that none
        waits on a send cancelled under it. An interrupted run waits for nothing: what is
        queued is cancelled, what is in flight is abandoned (conformance/run/pool.py).
        """
        wait = self.interrupted is None
        for kind in ("chains", "chain-sends", "sends"):
            pool = self._pools.pop(kind, None)
            if pool is not None:
                pool.shutdown(wait=wait, cancel_futures=kind == "sends" or not wait)
        self._chains.clear()
        if wait and "conformance.run.sdk" in sys.modules:
            sys.modules["conformance.run.sdk"].join_preload()


def _play_body(item: ItemRun, scenario: Scenario, param: Any) -> ItemRun:
    assert scenario.body is not None
    try:
        scenario.body(item, param)
    except ScenarioSkipped as exc:
        item.skipped(exc)
    return item


def play(item: ItemRun, scenario: Scenario, param: Any = None) -> ItemOutcome:
    """Play one scenario into ``item`` (or adopt its started chain), say how it ended, and
    enter it in the item's run record."""
    run = item.run
    assert isinstance(run, Run), "an item plays in the engine's Run (session.RunState)"
    chain = run.chain(scenario, param)
    if chain is not None:
        item.adopt(chain.result())
    elif scenario.cases is not None:
        try:
            item.collect(run.planned(scenario, param))
        except ScenarioSkipped as exc:
            item.skipped(exc)
    else:
        _play_body(item, scenario, param)
    outcome = item.outcome()
    ran = item.scenario_run(scenario.item_id(param), outcome)
    item.results.note_played(ran)
    item.run.emit(ScenarioFinished(ran))
    return outcome


def merge_item(into: Results, item: Results) -> None:
    """Fold one item's results (tallies and run record) into the run's."""
    into.merge(item)


@dataclass(frozen=True, slots=True)
class Played:
    """One played item: its scenario, parameter and outcome."""

    name: str
    outcome: ItemOutcome


def execute(run: Run, scenarios: Sequence[Scenario], results: Results) -> list[Played]:
    """Play every scenario (each of its params) into ``results``, without a test runner."""
    items = [(s, p) for s in scenarios for p in s.params]
    run.plan(items)
    played = []
    try:
        for scenario, param in items:
            item = run.item()
            try:
                outcome = play(item, scenario, param)
            except Exception as exc:  # a defect of the suite: reported, the run goes on
                error = ScenarioOutcome.ERROR
                outcome = ItemOutcome(error, f"{type(exc).__name__}: {exc}")
                ran = ScenarioRun(scenario.item_id(param), error, reason=outcome.message)
                item.results.note_played(ran)
                run.emit(ScenarioFinished(ran))
            merge_item(results, item.results)
            played.append(Played(scenario.item_id(param), outcome))
    finally:
        run.close()
    return played
