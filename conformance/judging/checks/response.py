"""Transport and schema requirements on every answer, and the completion object's shape.

Statuses of 500 and above are owned by the requirement of the request's kind
(VALID-NO-5XX, INVALID-REJECTED, AUTH-REQUIRED, MODEL-NOT-FOUND): one defect, one finding,
so HTTP-STATUS-DECLARED judges the statuses below 400 and HTTP-4XX-DECLARED
(checks/errors.py) the 4xx, by OpenAPI's reading of a responses object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jsonschema.exceptions import ValidationError, best_match

from conformance.judging.checks.common import (
    answered,
    check_object,
    choices_of,
    completion,
    constrains,
    error_path,
    media_matches,
)
from conformance.judging.document import sure_valid
from conformance.judging.document.contract import Contract
from conformance.judging.document.spec import Spec, describe
from conformance.judging.document.spec_errata import NULLED_FIELDS
from conformance.judging.requirements import Context, Level, Violation, requirement

MUST, SHOULD = Level.MUST, Level.SHOULD
OPENAI = "OpenAI /v1/completions behaviour relied on by OpenAI clients"
NULL_FIELDS_ERRATUM = "null-response-fields"


def _erratum(spec: Spec, rule_id: str) -> bool:
    return spec.uses(rule_id)  # an erratum or a policy (conformance/judging/document/policies.py)


Owned = Callable[[ValidationError], bool]


def schema_problem(spec: Spec, kind: str, instance: Any, owned: Owned | None = None) -> str | None:
    """The most relevant schema problem of ``instance``, leaving out the errors ``owned``
    says a more specific requirement reports on the same answer (one defect, one finding)."""
    validator = spec.validators[kind]
    if validator is None:
        return None
    found = sure_valid.iter_errors(validator, instance)
    errors = [e for e in found if owned is None or not owned(e)]
    worst = best_match(errors)
    return None if worst is None else describe(worst)


def choice_field(error: ValidationError) -> str | None:
    """The field of a choice an error is about (``choices[i].<field>``), or None."""
    path = error_path(error)
    if len(path) >= 3 and path[0] == "choices" and isinstance(path[1], int):
        return str(path[2])
    return None


def finish_outside_enum(error: ValidationError) -> bool:
    """A finish_reason string the schema rejects: FINISH-ENUM's (STREAM-FINISH-ENUM's)."""
    return choice_field(error) == "finish_reason" and isinstance(error.instance, str)


def _owned_in_completion(spec: Spec) -> Owned:
    """Errors of a completion body that RESP-OBJECT, RESP-CHOICE-TEXT and FINISH-ENUM own."""
    # Imported here to keep the registration order of the check modules (catalogue order).
    from conformance.judging.checks.semantics import finish_reasons

    has_enum = bool(finish_reasons(spec))

    def owned(error: ValidationError) -> bool:
        if error_path(error) == ["object"] or choice_field(error) == "text":
            return True
        return has_enum and finish_outside_enum(error)

    return owned


@requirement(
    "HTTP-COMPLETE",
    level=MUST,
    area="transport",
    statement="The target answers every request with a complete HTTP response within the "
    "suite's bounds (time to first byte, gap, total time, size).",
    source="universal HTTP client behaviour (clients time out or fail on a cut answer)",
    evidence="client-visible",
)
def complete_response(ctx: Context) -> None:
    ex = ctx.exchange
    if ex.transport_error:
        raise Violation(ex.transport_error)
    if ex.bound:
        raise Violation(ex.stream_error or f"bound hit: {ex.bound}", actual=ex.bound)


@requirement(
    "HTTP-STATUS-DECLARED",
    level=MUST,
    area="schema",
    statement="Every 1xx-3xx status returned is declared for the operation by the spec (an "
    "undeclared 4xx is HTTP-4XX-DECLARED's, a 5xx the requirement's of the request's kind).",
    source="spec: paths./v1/completions.post.responses; OpenAPI 3 Responses Object",
    evidence="spec-schema",
    applies=lambda ctx: answered(ctx) and (ctx.exchange.status or 0) < 400,
)
def status_declared(ctx: Context) -> None:
    status = ctx.exchange.status
    assert status is not None
    if not ctx.spec.is_declared(status):
        declared = ", ".join(ctx.spec.declared_statuses)
        raise Violation(
            f"status {status} is not declared (declared: {declared})",
            expected=list(ctx.spec.declared_statuses),
            actual=status,
        )


@requirement(
    "RESP-CONTENT-TYPE",
    level=MUST,
    area="schema",
    statement="A non-streamed 200 is served with the JSON media type the spec declares.",
    source="spec: responses.200.content",
    evidence="spec-schema",
    applies=lambda ctx: ctx.exchange.status == 200 and not ctx.case.stream,
)
def response_content_type(ctx: Context) -> None:
    declared = ctx.spec.json_media_types or ("application/json",)
    if not media_matches(ctx.exchange.media_type, declared):
        got = ctx.exchange.content_type or "no Content-Type"
        raise Violation(
            f"Content-Type is {got!r}, expected {' or '.join(declared)}",
            expected=list(declared),
            actual=got,
        )


@requirement(
    "RESP-SCHEMA",
    level=MUST,
    area="schema",
    statement="A non-streamed 200 body is strict JSON (no NaN or Infinity) and validates "
    "against the spec's response schema (errata applied).",
    source="spec: responses.200.content.*.schema; RFC 8259",
    evidence="spec-schema",
    # A body cut short by a bound (the client stopped reading) is HTTP-COMPLETE's finding:
    # what arrived of it is no body to validate.
    applies=lambda ctx: (
        ctx.exchange.status == 200 and not ctx.case.stream and ctx.exchange.bound is None
    ),
)
def response_schema(ctx: Context) -> None:
    ex = ctx.exchange
    if ex.json_error:
        raise Violation(ex.json_error, path="body")
    # In a completion body, a wrong `object`, choice `text` or finish_reason outside the enum
    # is the finding of the requirement named after it, not a second one here.
    owned = _owned_in_completion(ctx.spec) if completion(ctx) else None
    problem = schema_problem(ctx.spec, "response", ex.json, owned)
    if problem:
        raise Violation(problem)


@requirement(
    "RESP-HEADERS-REQUIRED",
    level=MUST,
    area="schema",
    statement="Every 200 carries the response headers the spec marks required.",
    source="spec: responses.200.headers (required: true)",
    evidence="spec-schema",
    scope=lambda spec: None if spec.required_headers else "the spec requires no response header",
    applies=lambda ctx: ctx.exchange.status == 200 and bool(ctx.spec.required_headers),
)
def required_headers(ctx: Context) -> None:
    missing = [h for h in ctx.spec.required_headers if h not in ctx.exchange.headers]
    if missing:
        raise Violation(f"required header(s) missing: {', '.join(missing)}", expected=missing)


@requirement(
    "RESP-OBJECT",
    level=MUST,
    area="schema",
    statement='The completion object says `object: "text_completion"`.',
    source="spec: CreateCompletionResponse.object enum; " + OPENAI,
    evidence="spec-schema",
    stated=constrains("object"),
    otherwise="openai-contract",
    applies=completion,
)
def response_object(ctx: Context) -> None:
    check_object(ctx.exchange.json)


@requirement(
    "RESP-CHOICE-TEXT",
    level=MUST,
    area="schema",
    statement="Every choice carries its generated `text` as a string.",
    source="spec: choices[].text (required string)",
    evidence="spec-schema",
    applies=completion,
)
def choice_text(ctx: Context) -> None:
    for i, choice in enumerate(choices_of(ctx.exchange.json)):
        if not isinstance(choice.get("text"), str):
            raise Violation(
                f"choices[{i}].text is {choice.get('text')!r}, expected a string",
                path=f"choices[{i}].text",
                actual=choice.get("text"),
            )


@requirement(
    "RESP-NULL-FIELDS",
    level=SHOULD,
    area="schema",
    statement="Fields the spec types as non-nullable (logprobs, finish_reason, usage) are "
    "omitted rather than sent as null (under the openai-compatible contract a choice's "
    "logprobs excepted: OpenAI's document makes it nullable and OpenAI sends it null).",
    source="spec: OpenAPI 3.0 types without nullable (policy null-response-fields)",
    evidence="spec-schema",
    scope=lambda spec: (
        None
        if _erratum(spec, NULL_FIELDS_ERRATUM)
        else "the spec lets these fields be null (or the policy is off)"
    ),
    applies=lambda ctx: completion(ctx) and _erratum(ctx.spec, NULL_FIELDS_ERRATUM),
)
def null_fields(ctx: Context) -> None:
    body = ctx.exchange.json
    nulled = [f for f in NULLED_FIELDS if f in body and body[f] is None]
    # Under the openai-compatible contract a choice's `logprobs` is OpenAI's field, which
    # OpenAI's document declares required and nullable and OpenAI's API sends as null when
    # logprobs were not asked for (LiteLLM and vLLM do the same): not a finding. Asked
    # for and null, it is LOGPROBS-PRESENCE's.
    openai = ctx.spec.contract is Contract.OPENAI_COMPATIBLE
    in_choices = [f for f in NULLED_FIELDS if not (openai and f == "logprobs")]
    for i, choice in enumerate(choices_of(body)):
        nulled += [f"choices[{i}].{f}" for f in in_choices if f in choice and choice[f] is None]
    if nulled:
        raise Violation(f"null where the spec forbids it: {', '.join(nulled)}", path=nulled[0])
