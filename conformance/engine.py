"""One conformance run: settings, budget, and sending Cases through the checks.

The plugin builds one ``Run`` per pytest process. Each suite test asks it for an
``ItemRun``, sends its cases through it, and ends with ``ItemRun.verdict()``, which fails
the test when a requirement that decides the verdict failed on one of its exchanges.
Each item's Results travel to the pytest controller in its report, so xdist workers and
CI shards merge into one report.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import pytest

from conformance.case import Case
from conformance.client import Client, RetryPolicy
from conformance.exchange import Exchange
from conformance.latency import stream_latency
from conformance.requirements import REGISTRY, Level, Requirement
from conformance.results import OBSERVED, Finding, Results, evaluate, tokens_used
from conformance.spec import Spec

# Generated tests are split into this many items (the same cases in all), so that
# pytest-xdist and --shard can balance a run.
BATCHES = 4
EXIT_NO_VERDICT = 6  # not one of pytest's own codes (0-5): no verdict was reached
#: Results.meta key: how often each status code was answered (status as a string).


def no_verdict_reason(retry: RetryPolicy) -> str:
    """Why a rate-limited run reached no verdict, in one line."""
    return (
        f"the target kept answering 429 (rate limited) after {retry.max_retries} retries "
        f"within {retry.max_wait:g} s"
    )


def status_summary(results: Results, spec: Spec) -> str:
    """One line: the statuses answered, and the declared ones never seen."""
    counts: dict[str, int] = results.meta.get(OBSERVED, {})
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
    # Requirements failing in the --baseline run: reported, but they fail no test.
    known_failures: frozenset[str] = frozenset()


batched = pytest.mark.parametrize(
    "batch", range(BATCHES), ids=[f"batch{b + 1}of{BATCHES}" for b in range(BATCHES)]
)


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

    def send(
        self,
        case: Case,
        related: tuple[Exchange, ...] = (),
        *,
        via: Callable[[Client, Case], Exchange] = Client.send,
    ) -> Exchange | None:
        """Send one case and judge it; None when the budget is spent or the target rate-limits.

        ``via`` sends it: the suite's own client, or another one (conformance.sdk.send).
        """
        if self.run.rate_limited:
            return None
        try:
            self.run.budget.take_request()
        except BudgetSpent as exc:
            self.budget_note = str(exc)
            return None
        client = self.run.client
        if via is Client.send:
            exchange = client.send(case)
        else:
            # Another sender (the SDK) is paced and retried like the client's own sends.
            exchange = client.paced(lambda: via(client, case))
        self.run.budget.spend_tokens(tokens_used(exchange))
        if exchange.status == 429:
            # Still rate limited after the retries the policy allows: the case got no
            # answer, so it is not judged (a check would blame the target for the 429);
            # stop sending, and let the controller end the run without a verdict.
            self.run.rate_limited = True
            self.results.meta["no_verdict"] = no_verdict_reason(self.run.client.retry)
            self.results.spent["requests"] += 1 + exchange.retries
            self.results.spent["retries"] += exchange.retries
            self._observe(exchange)
            return exchange
        self.judge(exchange, related)
        return exchange

    def judge(self, exchange: Exchange, related: tuple[Exchange, ...] = ()) -> list[Finding]:
        findings = evaluate(self.run.requirements, self.spec, exchange, related)
        self.results.record(exchange, findings)
        self._observe(exchange)
        latency = stream_latency(exchange)
        if latency is not None:
            self.results.latency.append(latency)
        self.failures += [(f, exchange) for f in findings if f.outcome == "failed"]
        return findings

    def _observe(self, exchange: Exchange) -> None:
        """Count the answer's status code (Results.meta["observed_statuses"])."""
        if exchange.status is not None:
            observed = self.results.meta.setdefault(OBSERVED, {})
            observed[str(exchange.status)] = observed.get(str(exchange.status), 0) + 1

    def send_all(self, cases: Iterable[Case]) -> list[Exchange]:
        out = []
        for case in cases:
            exchange = self.send(case)
            if exchange is None:
                break
            out.append(exchange)
        return out

    def verdict(self) -> None:
        """Fail the test when a deciding requirement failed; skip when nothing was judged.

        A rate-limited item is skipped, not ended with pytest.exit (which breaks xdist
        workers): its results carry ``meta["no_verdict"]`` to the controller, which
        ends the run with EXIT_NO_VERDICT (plugin.pytest_sessionfinish).
        """
        deciding = {Level.MUST.value} | ({Level.SHOULD.value} if self.settings.strict else set())
        lines: list[str] = []
        seen: set[str] = set()
        for finding, exchange in self.failures:
            tally = self.results.tallies[finding.requirement]
            known = finding.requirement in self.settings.known_failures
            if tally.level not in deciding or finding.requirement in seen or known:
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
        if self.run.rate_limited:
            pytest.skip(
                f"conformance: no verdict reached: {no_verdict_reason(self.run.client.retry)}"
            )
        if self.budget_note and not self.results.spent["requests"]:
            pytest.skip(self.budget_note)
