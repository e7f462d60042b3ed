"""Rate-limit answers (429): judged as what they are, not as the case's answer.

The client waits a 429 out when it says how long (``Retry-After``) and sends the case
again; each 429 it met is kept on the final exchange (``Exchange.throttled``) and the
engine judges it by these requirements alone (``ItemRun.judge_rate_limit``), so a
rate-limited run still shows whether its 429s can be read by a client. No other
requirement applies to a 429 (errors.py leaves them out).
"""

from __future__ import annotations

import re
from email.utils import parsedate_to_datetime

from conformance.judging.checks.errors import error_envelope
from conformance.judging.requirements import Context, Level, Violation, requirement

MUST, SHOULD = Level.MUST, Level.SHOULD
#: The requirements the engine judges a 429 answer by (and nothing else).
RATE_LIMIT_REQUIREMENTS = frozenset({"RATE-LIMIT-ENVELOPE", "RETRY-AFTER-FORMAT"})
#: RFC 9110 §10.2.3: Retry-After = HTTP-date / delay-seconds, delay-seconds = 1*DIGIT.
DELAY_SECONDS = re.compile(r"[0-9]+")


def _rate_limited(ctx: Context) -> bool:
    return ctx.exchange.status == 429 and ctx.exchange.bound is None


@requirement(
    "RATE-LIMIT-ENVELOPE",
    level=MUST,
    area="errors",
    statement="A 429 answer's body is strict JSON in the spec's error envelope (both "
    "documents declare 429 with it; clients read error.message to say why they wait).",
    source="spec: responses.429.content.*.schema",
    evidence="spec-schema",
    # Every answer: the rule holds of the answers that are not 429s, so a run that met no
    # rate limit has exercised it (as STREAM-ERROR-EVENT holds of streams with no error).
    applies=lambda ctx: ctx.exchange.status is not None and ctx.exchange.bound is None,
)
def rate_limit_envelope(ctx: Context) -> None:
    if _rate_limited(ctx):
        error_envelope(ctx)


@requirement(
    "RETRY-AFTER-FORMAT",
    level=SHOULD,
    area="errors",
    statement="A Retry-After header on a 429 is delay-seconds (a non-negative integer) or "
    "an HTTP-date. SHOULD: neither document declares the header; a client that honours it "
    "(the openai SDK) ignores a value it cannot read and falls back to its own back-off.",
    source="RFC 9110 §10.2.3 (Retry-After = HTTP-date / delay-seconds)",
    evidence="client-visible",
    applies=lambda ctx: _rate_limited(ctx) and "retry-after" in ctx.exchange.headers,
)
def retry_after_format(ctx: Context) -> None:
    value = (ctx.exchange.headers.get("retry-after") or "").strip()
    if DELAY_SECONDS.fullmatch(value):
        return
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        when = None
    if when is None or when.tzinfo is None:
        raise Violation(
            f"Retry-After is {value!r}: neither delay-seconds (a non-negative integer) nor "
            "an HTTP-date",
            path="headers.Retry-After",
            actual=value,
        )
