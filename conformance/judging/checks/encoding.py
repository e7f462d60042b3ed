"""The body is what its headers say it is: a Content-Encoding the body does not have.

The client decodes gzip and deflate bodies under its byte bound; a body said to be gzip
that does not start as gzip does is kept as sent and flagged (``Exchange.false_encoding``),
so the other requirements still judge what it says, and this one names the false header.
"""

from __future__ import annotations

from conformance.judging.checks.common import answered
from conformance.judging.requirements import Context, Level, Violation, requirement


@requirement(
    "HTTP-CONTENT-ENCODING",
    level=Level.MUST,
    area="transport",
    statement="A Content-Encoding header names a coding the body has: a body said to be "
    "gzip is gzip. MUST: every client that honours the header (httpx, requests, the openai "
    "SDK, browsers) fails to decode the answer.",
    source="RFC 9110 §8.4 (Content-Encoding: the codings that have been applied to the "
    "representation); client-visible",
    evidence="client-visible",
    applies=answered,
)
def content_encoding(ctx: Context) -> None:
    coding = ctx.exchange.false_encoding
    if coding:
        raise Violation(
            f"the {ctx.exchange.status} answer says Content-Encoding: {coding}, but its body "
            f"is not {coding} (it does not start with the gzip magic bytes 1f 8b)",
            path="headers.Content-Encoding",
            actual=coding,
        )
