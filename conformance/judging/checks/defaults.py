"""A parameter left out means the default the document declares: max_tokens.

One request omits `max_tokens` (scenarios.DECLARED_DEFAULTS); under a document that
declares its default (AIHubMix/OpenAI: 16), the answer generates at most that many tokens
per choice, and says "length" when it reached it. Every other request the suite sends sets
max_tokens, so this is the only one whose cost the target's default decides. The count is
the answer's usage alone (witness "usage"): where usage is shown wrong on the target, the
finding is withheld (conformance.judging.verdict.attribution).
"""

from __future__ import annotations

from typing import Any

from conformance.judging.checks.common import choices_of, completion, is_int
from conformance.judging.checks.views import usage_of
from conformance.judging.document.spec import Spec
from conformance.judging.requirements import Context, Level, Violation, requirement

#: The tag of the request that omits max_tokens on purpose.
DEFAULT_MAX_TOKENS_TAG = "probe:default-max-tokens"


def declared_default(schema: Any) -> int | None:
    """The integer ``default`` of a parameter's schema, looked for in its alternatives too."""
    if not isinstance(schema, dict):
        return None
    value = schema.get("default")
    if is_int(value):
        return value
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in schema.get(key) or ():
            found = declared_default(branch)
            if found is not None:
                return found
    return None


def default_max_tokens(spec: Spec) -> int | None:
    return declared_default(spec.request_properties.get("max_tokens"))


def _scope(spec: Spec) -> str | None:
    if default_max_tokens(spec) is None:
        return "the spec declares no default for max_tokens"
    return None


@requirement(
    "MAX-TOKENS-DEFAULT",
    level=Level.MUST,
    area="semantics",
    statement="A request without max_tokens generates at most the default the document "
    'declares for it per choice, and finishes with "length" when it reaches it. MUST: the '
    "schema's `default` is the value a server assumes when the field is left out (OpenAPI), "
    "and a client that omits it budgets by it.",
    source="spec: CreateCompletionRequest.max_tokens.default (16 in the AIHubMix/OpenAI document)",
    evidence="spec-schema",
    scope=_scope,
    applies=lambda ctx: (
        completion(ctx)
        and DEFAULT_MAX_TOKENS_TAG in ctx.case.tags
        and "max_tokens" not in ctx.case.body
        and default_max_tokens(ctx.spec) is not None
    ),
)
def max_tokens_default(ctx: Context) -> None:
    default = default_max_tokens(ctx.spec)
    assert default is not None
    choices = choices_of(ctx.exchange.json)
    counted = (usage_of(ctx.exchange.json) or {}).get("completion_tokens")
    if not is_int(counted) or not choices:
        return  # no count to judge: USAGE-TOTAL's / RESP-SCHEMA's finding
    bound = default * len(choices)
    if counted > bound:
        raise Violation(
            f"{counted} completion tokens for {len(choices)} choice(s) without max_tokens: "
            f"the document's default is {default}",
            path="usage.completion_tokens",
            expected=f"at most {bound}",
            actual=counted,
            witness="usage",  # the count alone: withheld where usage is shown wrong
        )
    # Only "stop" is judged here: a value outside the enum is FINISH-ENUM's finding.
    if len(choices) == 1 and counted == default and choices[0].get("finish_reason") == "stop":
        reason = choices[0].get("finish_reason")
        raise Violation(
            f"finish_reason is {reason!r} after {counted} tokens, the document's default "
            'max_tokens: expected "length"',
            path="choices[0].finish_reason",
            expected="length",
            actual=reason,
            witness="usage",
        )
