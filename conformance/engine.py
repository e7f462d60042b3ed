"""One conformance run: settings, budget, and sending Cases through the checks.

The plugin builds one ``Run`` per pytest process. Each suite test asks it for an
``ItemRun``, sends its cases through it, and ends with ``ItemRun.verdict()``, which fails
the test when a requirement that decides the verdict failed on one of its exchanges.
Each item's Results travel to the pytest controller in its report, so xdist workers and
CI shards merge into one report.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

import pytest

from conformance.case import Case
from conformance.client import Client
from conformance.exchange import Exchange
from conformance.latency import stream_latency
from conformance.requirements import REGISTRY, Level, Requirement
from conformance.results import Finding, Results, evaluate, tokens_used
from conformance.spec import Spec

EXIT_NO_VERDICT = 3  # distinct from pytest's 1 (tests failed): no verdict was reached


@dataclass(frozen=True, slots=True)
class Settings:
    """What the command line asked for (see plugin.py for the options)."""

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


class BudgetSpent(Exception):
    """The run's request or token budget is used up."""


@dataclass
class Budget:
    """Requests and tokens this process may still spend (shared by its tests)."""

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


class Run:
    """Per-process state of a conformance run."""

    def __init__(self, settings: Settings, spec: Spec, client: Client, *, workers: int = 1) -> None:
        self.settings = settings
        self.spec = spec
        self.client = client
        self.requirements: list[Requirement] = [REGISTRY[r] for r in REGISTRY if self._selected(r)]
        # Budgets are split between xdist workers so that the run as a whole honours them.
        self.budget = Budget(
            max(1, settings.budget_requests // workers), max(1, settings.budget_tokens // workers)
        )
        self.rate_limited = False

    def _selected(self, rid: str) -> bool:
        s = self.settings
        return (not s.checks or rid in s.checks) and rid not in s.skip_checks

    def item(self) -> ItemRun:
        return ItemRun(self)


class ItemRun:
    """The exchanges and findings of one suite test."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.results = Results.for_requirements(run.requirements)
        self.failures: list[tuple[Finding, Exchange]] = []
        self.budget_note: str | None = None

    @property
    def spec(self) -> Spec:
        return self.run.spec

    @property
    def settings(self) -> Settings:
        return self.run.settings

    def send(self, case: Case, related: tuple[Exchange, ...] = ()) -> Exchange | None:
        """Send one case and judge it; None when the budget is spent."""
        try:
            self.run.budget.take_request()
        except BudgetSpent as exc:
            self.budget_note = str(exc)
            return None
        exchange = self.run.client.send(case)
        self.run.budget.spend_tokens(tokens_used(exchange))
        if exchange.status == 429 and exchange.retries >= self.run.client.retry.max_retries:
            self.run.rate_limited = True
        self.judge(exchange, related)
        return exchange

    def judge(self, exchange: Exchange, related: tuple[Exchange, ...] = ()) -> list[Finding]:
        findings = evaluate(self.run.requirements, self.spec, exchange, related)
        self.results.record(exchange, findings)
        latency = stream_latency(exchange)
        if latency is not None:
            self.results.latency.append(latency)
        self.failures += [(f, exchange) for f in findings if f.outcome == "failed"]
        return findings

    def send_all(self, cases: Iterable[Case]) -> list[Exchange]:
        out = []
        for case in cases:
            exchange = self.send(case)
            if exchange is None:
                break
            out.append(exchange)
        return out

    def verdict(self) -> None:
        """Fail the test when a deciding requirement failed; skip when nothing was judged."""
        if self.run.rate_limited:
            pytest.exit(
                "conformance: the target kept answering 429 after retries; no verdict reached",
                returncode=EXIT_NO_VERDICT,
            )
        deciding = {Level.MUST.value} | ({Level.SHOULD.value} if self.settings.strict else set())
        lines: list[str] = []
        seen: set[str] = set()
        for finding, exchange in self.failures:
            tally = self.results.tallies[finding.requirement]
            if tally.level not in deciding or finding.requirement in seen:
                continue
            seen.add(finding.requirement)
            count = tally.failed
            lines.append(
                f"{finding.requirement} [{tally.level}] {tally.statement}\n"
                f"    failed on {count} of {tally.checked} exchange(s), e.g. "
                f"{exchange.case.label or exchange.case.mode}: {finding.message}"
            )
        if lines:
            pytest.fail("\n".join(lines), pytrace=False)
        if self.budget_note and not self.results.spent["requests"]:
            pytest.skip(self.budget_note)
