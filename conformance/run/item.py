"""One played scenario: its exchanges judged in case order, its findings, how it ended.

An ``ItemRun`` sends through its ``RunState`` (conformance/run/engine.py: the budget, the slots,
the pool) and judges every answer by the run's requirements: a 429 waited out by the
rate-limit requirements alone, a dead target's failed health probe by TARGET-ALIVE alone,
a request answered alone after a time-out beside others entered in the run's report
(``RunInfo.sent_alone``). ``outcome()`` says passed, failed (a deciding requirement failed)
or skipped, and ``scenario_run`` how the run record keeps it. Nothing here imports pytest.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

from conformance.judging.document.spec import Spec
from conformance.judging.judge import judge_into
from conformance.judging.verdict.events import ExchangeJudged
from conformance.judging.verdict.examples import Outcome
from conformance.judging.verdict.latency import stream_latency
from conformance.judging.verdict.record import ScenarioOutcome, ScenarioRun, SkipCause
from conformance.judging.verdict.results import Finding, Results
from conformance.judging.verdict.run_info import SentAlone
from conformance.judging.verdict.verdict import deciding_levels
from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange
from conformance.run.health import DOWN_NOTE
from conformance.run.resend import RetryPolicy

if TYPE_CHECKING:
    from conformance.run.session import RunState, ScenarioSkipped, Sender, Sent, Settings


def no_verdict_reason(retry: RetryPolicy) -> str:
    """Why a rate-limited run reached no verdict, in one line."""
    return (
        f"the target kept answering 429 (rate limited) after {retry.max_retries} retries "
        f"within {retry.max_wait:g} s"
    )


@dataclass(frozen=True, slots=True)
class ItemOutcome:
    """How one played scenario ended, in the words a test runner needs."""

    word: ScenarioOutcome
    message: str = ""


class ItemRun:
    """The exchanges and findings of one played scenario (one pytest item)."""

    def __init__(self, run: RunState, *, urgent: bool = False) -> None:
        self.run = run
        # A started chain's item: its sends go before queued independent cases.
        self.urgent = urgent
        self.results = Results.for_requirements(run.requirements)
        self.failures: list[tuple[Finding, Exchange]] = []
        self.budget_note: str | None = None
        self.skip_reason: str | None = None
        self.skip: ScenarioSkipped | None = None
        self.unsent = 0  # cases the budget kept from being sent

    def adopt(self, played: ItemRun) -> None:
        """Take over what a chain played in its own thread (RunState.plan) into this item."""
        self.results, self.failures = played.results, played.failures
        self.budget_note, self.skip_reason = played.budget_note, played.skip_reason
        self.skip, self.unsent = played.skip, played.unsent

    @property
    def spec(self) -> Spec:
        return self.run.spec

    @property
    def settings(self) -> Settings:
        return self.run.settings

    def send(
        self, case: Case, related: tuple[Exchange, ...] = (), *, via: Sender | None = None
    ) -> Exchange | None:
        """Send one case now and judge it; None when the budget is spent or rate limited.

        ``via`` sends it: the suite's own client by default, or another one
        (conformance.run.sdk.send).
        """
        return self._collect(
            self.run.dispatch(case, via, wait=True, urgent=self.urgent).result(), related
        )

    def dispatch(self, case: Case, *, via: Sender | None = None) -> Future[Sent]:
        """Send one case without waiting for it (up to ``concurrency`` at once); see receive."""
        return self.run.dispatch(case, via, urgent=self.urgent)

    def receive(self, sent: Future[Sent], related: tuple[Exchange, ...] = ()) -> Exchange | None:
        """Wait for a dispatched case and judge it; None when it was not sent."""
        return self._collect(sent.result(), related)

    def send_all(self, cases: Iterable[Case], *, via: Sender | None = None) -> list[Exchange]:
        """Send independent cases (up to ``concurrency`` at once), judged in case order."""
        return self.collect([self.dispatch(c, via=via) for c in cases])

    def collect(self, sends: Sequence[Future[Sent]]) -> list[Exchange]:
        """Judge dispatched sends in their order; the exchanges that got an answer."""
        out = []
        for future in sends:
            exchange = self._collect(future.result())
            if exchange is not None:
                out.append(exchange)
        return out

    def _collect(self, sent: Sent, related: tuple[Exchange, ...] = ()) -> Exchange | None:
        exchange = sent.exchange
        if self.run.health.down is not None:
            self._target_down()
        if exchange is None:
            if sent.note == DOWN_NOTE:
                return None
            if sent.note:
                self.budget_note = self.budget_note or sent.note
                self.unsent += 1
                self.results.note_unsent(sent.note)
            return None
        for limited in exchange.throttled:
            self.judge_rate_limit(limited)
        if exchange.status == 429:
            # Still rate limited after the retries the policy allows: the case got no
            # answer, so it is judged only as a rate-limit answer (a check of the case
            # would blame the target for the 429).
            reason = no_verdict_reason(self.run.client.retry)
            self.results.note_no_verdict(reason)
            self.results.spent.requests += 1 + exchange.retries
            self.results.spent.retries += exchange.retries
            self.judge_rate_limit(exchange)
            return exchange
        self.judge(exchange, related)
        return exchange

    def judge(self, exchange: Exchange, related: tuple[Exchange, ...] = ()) -> list[Finding]:
        findings = judge_into(self.results, self.run.requirements, self.spec, exchange, related)
        if exchange.sent_alone is not None:
            # A time-out met beside other requests, answered alone: not a finding, and the
            # request that held the target is named for the run's report.
            alone = SentAlone(
                exchange.case.label or exchange.case.mode, exchange.sent_alone, exchange.held_by
            )
            self.results.note_sent_alone(alone)
        failed = tuple(f.requirement for f in findings if f.outcome == Outcome.FAILED)
        label = exchange.case.label or exchange.case.mode
        self.run.emit(ExchangeJudged(label, exchange.status, failed))
        latency = stream_latency(exchange)
        if latency is not None:
            self.results.latency.append(latency)
        self.failures += [(f, exchange) for f in findings if f.outcome == "failed"]
        return findings

    def _target_down(self) -> None:
        """The target stopped serving: report it once (TARGET-ALIVE, on the failed health
        probe), and say so as this item's skip reason when nothing else failed."""
        from conformance.judging.checks.liveness import LIVENESS_REQUIREMENTS

        self.skip_reason = self.skip_reason or DOWN_NOTE.split(":")[0]
        down = self.run.health.claim()
        if down is None:
            return
        judges = [r for r in self.run.requirements if r.id in LIVENESS_REQUIREMENTS]
        findings = judge_into(self.results, judges, self.spec, down.probe, down.related)
        self.failures += [(f, down.probe) for f in findings if f.outcome == "failed"]

    def judge_rate_limit(self, exchange: Exchange) -> None:
        """Judge a 429 answer by the rate-limit requirements alone, and count its status.

        Its request is counted on the exchange that was finally judged (as a retry), so
        it is recorded without spending (judge_into judges a 429 by the rate-limit
        requirements alone)."""
        findings = judge_into(self.results, self.run.requirements, self.spec, exchange, spend=False)
        self.failures += [(f, exchange) for f in findings if f.outcome == "failed"]

    def skipped(self, exc: ScenarioSkipped) -> None:
        """Note that the scenario was skipped, why, and which requirements it leaves unjudged."""
        self.skip_reason, self.skip = exc.reason, exc

    def scenario_run(self, item_id: str, outcome: ItemOutcome) -> ScenarioRun:
        """This item as the run record keeps it: how it ended, and what it left unrun."""
        if self.unsent:  # a skip after the budget cut a chain short is the budget's
            note = self.budget_note or "the budget ran out"
            return ScenarioRun(item_id, outcome.word, SkipCause.BUDGET, note, unsent=self.unsent)
        if self.skip is not None:
            skip = self.skip
            return ScenarioRun(
                item_id, outcome.word, skip.cause, skip.reason, tuple(sorted(skip.covers))
            )
        if outcome.word == ScenarioOutcome.SKIPPED and self.run.rate_limited:
            return ScenarioRun(item_id, outcome.word, SkipCause.RATE_LIMITED, outcome.message)
        return ScenarioRun(item_id, outcome.word)

    def outcome(self) -> ItemOutcome:
        """Failed when a deciding requirement failed; skipped when nothing was judged."""
        deciding = deciding_levels(strict=self.settings.strict)
        lines: list[str] = []
        seen: set[str] = set()
        for finding, exchange in self.failures:
            tally = self.results.tallies[finding.requirement]
            known = finding.requirement in self.settings.known_failures
            if tally.level not in deciding or finding.requirement in seen or known:
                continue
            seen.add(finding.requirement)
            lines.append(
                f"{finding.requirement} [{tally.level}] {tally.statement}\n"
                f"    failed on {tally.failed} of {tally.checked} exchange(s), e.g. "
                f"{exchange.case.label or exchange.case.mode}: {finding.message}"
            )
        if lines:
            return ItemOutcome(ScenarioOutcome.FAILED, "\n".join(lines))
        if self.run.rate_limited:
            # Skipped, not failed: the run as a whole ends without a verdict.
            reason = no_verdict_reason(self.run.client.retry)
            return ItemOutcome(
                ScenarioOutcome.SKIPPED, f"conformance: no verdict reached: {reason}"
            )
        if self.skip_reason:
            return ItemOutcome(ScenarioOutcome.SKIPPED, self.skip_reason)
        if self.budget_note and not self.results.spent.requests:
            return ItemOutcome(ScenarioOutcome.SKIPPED, self.budget_note)
        return ItemOutcome(ScenarioOutcome.PASSED)
