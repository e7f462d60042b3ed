"""What a run's parts share: its settings, its budget, what a send became, and the run's face.

``RunState`` is what an item (conformance/run/item.py) and a scenario
(conformance/run/scenarios.py) read and call of the run they play in; ``engine.Run`` is the
one that has it. A protocol, so that the engine may import the items and scenarios it plays
and none of them imports the engine.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from conformance.judging.document.contract import DEFAULT_CONTRACT, Contract
from conformance.judging.document.spec import Spec
from conformance.judging.exceptions import ConformanceError
from conformance.judging.requirements import Requirement
from conformance.judging.verdict.decision import applicability
from conformance.judging.verdict.events import Emitter
from conformance.judging.verdict.record import RunRecord, SkipCause
from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange
from conformance.judging.wire.redaction import Limits
from conformance.run.client import Client
from conformance.run.health import Health

Sender = Callable[[Client, Case], Exchange]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Settings:
    """What the run was asked for (the pytest options map onto these, see options.py)."""

    model: str = "reference-model"
    max_examples: int = 10
    max_tokens: int = 8
    vocab_size: int = 1000
    seed: int = 0
    strict: bool = False
    budget_requests: int = 500
    budget_tokens: int = 100_000
    checks: tuple[str, ...] = ()
    skip_checks: tuple[str, ...] = ()
    # Requirements failing in the --baseline run: reported, but they fail no test.
    known_failures: frozenset[str] = frozenset()
    # Requests in flight at once (the command line's default is option_table.DEFAULT_CONCURRENCY,
    # 16; the engine's own is serial).
    concurrency: int = 1
    # Capabilities the target must offer (--require-capabilities).
    require_capabilities: tuple[str, ...] = ()
    # Requests drawn from schemathesis's own generation (--fuzz N, opt-in, nightly).
    fuzz: int = 0

    def selected(self, rid: str) -> bool:
        return (not self.checks or rid in self.checks) and rid not in self.skip_checks


def record_of(spec: Spec, settings: Settings, **identity: Any) -> RunRecord:
    """The run record a run of ``settings`` under ``spec`` starts with (``identity``: the
    RunRecord's run_id, target...)."""
    return RunRecord(
        seed=settings.seed,
        spec=spec.name,
        contract=spec.contract.value,
        model=settings.model,
        strict=settings.strict,
        require_capabilities=tuple(settings.require_capabilities),
        known_failures=tuple(sorted(settings.known_failures)),
        **applicability(spec, settings.selected),
        **identity,
    )


class BudgetSpent(ConformanceError):
    """The run's request or token budget is used up."""


class ScenarioSkipped(ConformanceError):
    """A scenario cannot run here; ``covers`` names the requirements left unjudged and
    ``cause`` says why (only NOT_DECLARED, DESELECTED and NO_KEY may stand in a passed run,
    so a skip that does not say why is never green)."""

    def __init__(
        self, reason: str, covers: Iterable[str] = (), cause: SkipCause = SkipCause.UNAVAILABLE
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.covers = tuple(covers)
        self.cause = cause


@dataclass
class Budget:
    """Requests and tokens this process may still spend (shared by its items and threads).

    A request is taken before it is sent, under the lock, so the request budget is exact
    however many are in flight; tokens are known only from answers, so in-flight
    requests may overspend the token budget by what they use.
    """

    requests: int
    tokens: int
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def take_request(self) -> None:
        with self._lock:
            if self.requests <= 0:
                raise BudgetSpent("request budget spent (--budget-requests)")
            if self.tokens <= 0:
                raise BudgetSpent("token budget spent (--budget-tokens)")
            self.requests -= 1

    def spend_tokens(self, n: int) -> None:
        with self._lock:
            self.tokens -= n


@dataclass(frozen=True, slots=True)
class Sent:
    """What became of one case: its exchange, or None and why not."""

    exchange: Exchange | None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class Setup:
    """Everything a run needs to start: the engine's Settings plus the target and spec."""

    settings: Settings = field(default_factory=Settings)
    spec: str = "aihubmix"
    strict_spec: bool = False
    contract: Contract = DEFAULT_CONTRACT
    target_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    headers: tuple[tuple[str, str], ...] = ()
    limits: Limits = field(default_factory=Limits)
    rps: float | None = None
    baseline: str | None = None
    workers: int = 1  # xdist workers sharing the budgets and --rps
    preflight: bool = True  # False where another process (the xdist controller) did it


class RunState(Protocol):
    """What items and scenarios use of the run they play in (engine.Run)."""

    settings: Settings
    spec: Spec
    client: Client
    requirements: list[Requirement]
    budget: Budget
    rate_limited: bool
    emit: Emitter
    concurrency: int
    health: Health

    def dispatch(
        self, case: Case, via: Sender | None = None, *, wait: bool = False, urgent: bool = False
    ) -> Future[Sent]: ...

    def shared(self, key: str, build: Callable[[], T]) -> T: ...
