"""A valid request must not stop the target from serving (conformance/health.py probes it).

The health probe is the preflight's minimal request, sent after an answer that a dead
target gives; the engine judges it by TARGET-ALIVE alone, with the first failure and then
the requests in flight when the target died (what the client saw of each: its answer, or
still in flight) as related exchanges. Every other answer holds the rule too: the target
answered it.
"""

from __future__ import annotations

import json

from conformance.checks.common import answered
from conformance.exchange import Exchange
from conformance.health import HEALTH_TAG, SUSPECTS_SHOWN, alive
from conformance.requirements import Context, Level, Violation, requirement

#: The requirement the engine judges a failed health probe by (and nothing else).
LIVENESS_REQUIREMENTS = frozenset({"TARGET-ALIVE"})


def _request(exchange: Exchange) -> str:
    """A request as a reader can find and resend it: its label and its body (short)."""
    case = exchange.case
    body = json.dumps(case.body, ensure_ascii=False)
    body = body if len(body) <= 240 else body[:240] + "…"
    return f"{case.label or case.mode!r} {body}"


def _answer(exchange: Exchange) -> str:
    if exchange.status is None:
        return exchange.transport_error or "no answer"
    return f"answered {exchange.status}"


@requirement(
    "TARGET-ALIVE",
    level=Level.MUST,
    area="transport",
    statement="A valid request does not stop the target from serving: after any answer, "
    "the minimal request (the preflight's, max_tokens 1) is still answered with a "
    "completion. MUST: every later client is refused, whatever it asks.",
    source="client-visible: a server that stops serving fails every later request",
    evidence="client-visible",
    applies=lambda ctx: answered(ctx) or HEALTH_TAG in ctx.case.tags,
)
def target_alive(ctx: Context) -> None:
    if HEALTH_TAG not in ctx.case.tags or alive(ctx.exchange):
        return
    first = ctx.related[0] if ctx.related else None
    suspects = ctx.related[1:]
    message = f"the target stopped serving: the minimal request was {_answer(ctx.exchange)}"
    if first is not None:
        message += f"; the first failure seen: {_request(first)} {_answer(first)}"
    if suspects:
        # With requests in flight at once, the failure seen first is often not the culprit:
        # the request that killed it was on the wire after the last normal answer, and
        # the one that killed it started before those that merely found it dead.
        shown = "; ".join(f"{_request(s)} {_answer(s)}" for s in suspects[:SUSPECTS_SHOWN])
        more = len(suspects) - SUSPECTS_SHOWN
        message += (
            "; in flight when it died (after the last normal answer), the first started "
            f"first: {shown}" + (f"; and {more} more" if more > 0 else "")
        )
    message += "; later requests were not sent or not judged"
    raise Violation(message, expected="a 200 completion", actual=ctx.exchange.status)
