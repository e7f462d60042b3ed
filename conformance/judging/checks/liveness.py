"""A valid request must not stop the target from serving (conformance/run/health.py probes it).

The health probe is the preflight's minimal request, sent after an answer that a dead
target gives; the engine judges it by TARGET-ALIVE alone, with the first failure and then
the requests in flight when the target died (what the client saw of each: its answer, or
still in flight) as related exchanges. Every other answer holds the rule too: the target
answered it.
"""

from __future__ import annotations

import json

from conformance.judging.checks.common import answered
from conformance.judging.requirements import Context, Level, Violation, requirement
from conformance.judging.wire.exchange import Exchange

#: The requirement the engine judges a failed health probe by (and nothing else).
LIVENESS_REQUIREMENTS = frozenset({"TARGET-ALIVE"})
#: The tag of the health probe (conformance/run/health.py sends it).
HEALTH_TAG = "probe:health"
#: The requests in flight when the target died named in its finding (the others counted).
SUSPECTS_SHOWN = 3


def alive(exchange: Exchange) -> bool:
    """The minimal request got what the preflight asked for (429: it answers, limited).

    A completion as preflight.is_completion recognises one (not whether it conforms),
    written here so that the judge does not import the run layer."""
    if exchange.status == 429:
        return True
    if exchange.status != 200 or exchange.bound is not None:
        return False
    body = exchange.json
    return isinstance(body, dict) and ("choices" in body or "completion" in str(body.get("object")))


def _request(exchange: Exchange) -> str:
    """A request as a reader can find and resend it: its label and its body (short)."""
    case = exchange.case
    body = json.dumps(case.body, ensure_ascii=False)
    body = body if len(body) <= 240 else body[:240] + "…"
    return f"{case.label or case.mode!r} {body}"


def _answer(exchange: Exchange) -> str:
    if exchange.status is None:
        return exchange.transport_error or "no answer"
    # A stream's head came, then its body stopped: the bound is what the reader needs.
    cut = exchange.transport_error or (exchange.bound and f"bound hit: {exchange.bound}")
    return f"answered {exchange.status}" + (f", then {cut}" if cut else "")


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
