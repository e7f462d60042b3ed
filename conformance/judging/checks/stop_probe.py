"""STOP-PROBE: a stop sequence taken from the target's own first answer ends the second.

Its own module because it reads both the semantics (stop sequences, finish reasons) and the
token counts (a "length" finish that FINISH-LENGTH owns), and those modules import each
other's helpers in one direction only.
"""

from __future__ import annotations

from conformance.judging.checks import tokens
from conformance.judging.checks.common import choices_of, completion, declares, says
from conformance.judging.checks.semantics import (
    STOP_PROBE_TAG,
    finish_reasons,
    stop_head,
    stop_in_text,
    stops,
)
from conformance.judging.checks.views import answer_of, labelled
from conformance.judging.requirements import Context, Level, Violation, requirement

SHOULD = Level.SHOULD


@requirement(
    "STOP-PROBE",
    level=SHOULD,
    area="semantics",
    statement="At temperature 0 with a fixed seed, a stop sequence taken from a first answer "
    'ends the second answer just before it, with finish_reason "stop".',
    source="spec: StopConfiguration; determinism is best effort (seed), hence SHOULD",
    evidence="spec-text",
    stated=says("stop", r"stop generating further tokens"),
    otherwise="openai-contract",
    scope=declares("stop"),
    applies=lambda ctx: (
        completion(ctx)
        and STOP_PROBE_TAG in ctx.case.tags
        and bool(ctx.related)
        and bool(stops(ctx))
    ),
    needs=("stop",),
)
def stop_probe(ctx: Context) -> None:
    first = choices_of(ctx.related[0].json)
    first_text = first[0].get("text") if first else None
    stop = stops(ctx)[0]
    if not isinstance(first_text, str) or stop not in first_text:
        return  # the first answer changed shape: nothing to compare
    named = labelled(ctx.exchange.json)
    if stop_in_text(ctx, named) is not None or stop_head(ctx, named) is not None:
        # One defect, one finding: a stop sequence, or its head, returned in the text is
        # STOP-ABSENT's (MUST); the probe judges what that rule cannot see, a text cut
        # elsewhere or a finish_reason other than "stop".
        return
    choices = choices_of(ctx.exchange.json)
    if not choices:
        raise Violation("the probe's answer has no choice", path="choices")
    want = first_text[: first_text.index(stop)]
    got, reason = choices[0].get("text"), choices[0].get("finish_reason")
    # A value outside the declared enum is FINISH-ENUM's finding: then only the text counts,
    # and so it does when FINISH-LENGTH counts fewer tokens than max_tokens under "length".
    allowed = finish_reasons(ctx.spec)
    foreign = bool(allowed) and reason is not None and reason not in allowed
    owned = foreign or (reason == "length" and _short_length(ctx))
    if got != want or (reason != "stop" and not owned):
        raise Violation(
            f"with stop={stop!r} expected text {want!r} and finish_reason 'stop', got {got!r} "
            f"and {reason!r}",
            path="choices[0]",
            expected={"text": want, "finish_reason": "stop"},
            actual={"text": got, "finish_reason": reason},
        )


def _short_length(ctx: Context) -> bool:
    """FINISH-LENGTH fails this answer: it counts fewer tokens than max_tokens under a
    "length" finish (a stop honoured but reported as "length" is its finding)."""
    if declares("max_tokens")(ctx.spec) is not None or tokens.max_tokens(ctx) is None:
        return False
    try:
        tokens.finish_length(ctx, answer_of(ctx.exchange))
    except Violation:
        return True
    return False
