"""Judging one exchange: the one function every judge of the suite goes through.

The engine judges the exchanges it sends, ``completions-conformance judge`` the traffic
recorded in files, the proxy the traffic it forwards, ``conformance.judge`` one exchange a
user hands it: all call :func:`judge_into`, which judges an exchange by every requirement
that applies and tallies the findings into a ``Results``. Attribution (one defect, one
finding: conformance.judging.verdict.attribution) runs over that Results once its exchanges are in, before
the verdict: the engine at the end of a run, the traffic judges whenever they show a
verdict, :func:`judge_alone` over the single exchange it was given.
"""

from __future__ import annotations

from collections.abc import Sequence

from conformance.judging.checks import load_checks
from conformance.judging.document.spec import Spec
from conformance.judging.requirements import REGISTRY, Requirement
from conformance.judging.verdict.attribution import attribute
from conformance.judging.verdict.capabilities import observed
from conformance.judging.verdict.examples import Outcome
from conformance.judging.verdict.results import Finding, Results, evaluate
from conformance.judging.verdict.run_info import Withheld
from conformance.judging.wire.exchange import Exchange

#: A 429 answer is judged by these alone: it answers no request (the request was not
#: served), so a check of the request would blame the target for rate limiting.
RATE_LIMITED = 429


def judges_of(requirements: Sequence[Requirement], exchange: Exchange) -> list[Requirement]:
    """The requirements that judge ``exchange``: the rate-limit ones alone for a 429."""
    if exchange.status != RATE_LIMITED:
        return list(requirements)
    from conformance.judging.checks.ratelimit import RATE_LIMIT_REQUIREMENTS

    return [r for r in requirements if r.id in RATE_LIMIT_REQUIREMENTS]


def judge_into(
    results: Results,
    requirements: Sequence[Requirement],
    spec: Spec,
    exchange: Exchange,
    related: tuple[Exchange, ...] = (),
    *,
    spend: bool = True,
) -> list[Finding]:
    """Judge ``exchange`` by ``requirements`` (the rate-limit ones alone for a 429), tally
    the findings and the answer's status in ``results``, and return the findings.

    ``spend=False``: the exchange cost nothing of the run's budget (a 429 waited out,
    counted on the request that was finally answered).
    """
    findings = evaluate(judges_of(requirements, exchange), spec, exchange, related)
    results.record(exchange, findings, spend=spend)
    # What a conformance request shows of a capability by itself: a valid edge value
    # declined, an invalid best_of served (capabilities.observed).
    shown = observed(exchange.case, exchange)
    if shown is not None:
        results.note_capability(*shown)
    if exchange.status is not None:
        results.note_status(exchange.status)
    return findings


def standing(findings: Sequence[Finding], withheld: Sequence[Withheld]) -> list[Finding]:
    """``findings`` without the failures attribution withheld (``attribute``'s return):
    every failure of a requirement resting on a witness another requirement showed wrong."""
    gone = {(w.requirement, w.witness) for w in withheld}
    return [
        f
        for f in findings
        if not (f.outcome == Outcome.FAILED and (f.requirement, f.witness) in gone)
    ]


def judge_alone(
    spec: Spec,
    exchange: Exchange,
    related: tuple[Exchange, ...] = (),
    requirements: Sequence[Requirement] | None = None,
) -> list[Finding]:
    """One exchange judged on its own, as a run judges it: by every registered requirement
    (or ``requirements``), with attribution over this exchange's findings; the findings
    that stand (a withheld one is named in no list: it is not evidence here)."""
    if requirements is None:
        load_checks()
        requirements = list(REGISTRY.values())
    results = Results.for_requirements(list(requirements))
    findings = judge_into(results, requirements, spec, exchange, related, spend=False)
    return standing(findings, attribute(results))
