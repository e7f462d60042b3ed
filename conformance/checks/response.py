"""Transport and schema requirements on every answer, and the completion object's shape."""

from __future__ import annotations

from conformance.checks.common import (
    answered,
    check_created,
    check_id,
    check_object,
    choices_of,
    completion,
)
from conformance.requirements import Context, Level, Violation, requirement
from conformance.spec import NULLED_FIELDS

MUST, SHOULD = Level.MUST, Level.SHOULD
OPENAI = "OpenAI /v1/completions behaviour relied on by OpenAI clients"


def _erratum(ctx: Context, rule_id: str) -> bool:
    return ctx.spec.uses(rule_id)  # an erratum or a policy (conformance/policies.py)


@requirement(
    "HTTP-COMPLETE",
    level=MUST,
    area="transport",
    statement="The target answers every request with a complete HTTP response within the "
    "suite's bounds (time to first byte, gap, total time, size).",
    source="universal HTTP client behaviour",
)
def complete_response(ctx: Context) -> None:
    ex = ctx.exchange
    if ex.transport_error:
        raise Violation(ex.transport_error)
    if ex.bound:
        raise Violation(ex.stream_error or f"bound hit: {ex.bound}")


@requirement(
    "HTTP-STATUS-DECLARED",
    level=MUST,
    area="schema",
    statement="Every status code returned is declared for POST /v1/completions by the spec.",
    source="spec: paths./v1/completions.post.responses",
    applies=answered,
)
def status_declared(ctx: Context) -> None:
    status = ctx.exchange.status
    assert status is not None
    if not ctx.spec.is_declared(status):
        declared = ", ".join(ctx.spec.declared_statuses)
        raise Violation(f"status {status} is not declared (declared: {declared})")


def _json_media_ok(media_type: str, declared: tuple[str, ...]) -> bool:
    """Declared JSON media types match with or without parameters (erratum nscale-charset)."""
    return any(media_type == d.split(";", 1)[0].strip().lower() for d in declared)


@requirement(
    "RESP-CONTENT-TYPE",
    level=MUST,
    area="schema",
    statement="A non-streamed 200 is served with the JSON media type the spec declares.",
    source="spec: responses.200.content",
    applies=lambda ctx: ctx.exchange.status == 200 and not ctx.case.stream,
)
def response_content_type(ctx: Context) -> None:
    declared = ctx.spec.json_media_types or ("application/json",)
    if not _json_media_ok(ctx.exchange.media_type, declared):
        got = ctx.exchange.content_type or "no Content-Type"
        raise Violation(f"Content-Type is {got!r}, expected {' or '.join(declared)}")


@requirement(
    "RESP-SCHEMA",
    level=MUST,
    area="schema",
    statement="A non-streamed 200 body is JSON and validates against the spec's response "
    "schema (errata applied).",
    source="spec: responses.200.content.*.schema",
    applies=lambda ctx: ctx.exchange.status == 200 and not ctx.case.stream,
)
def response_schema(ctx: Context) -> None:
    ex = ctx.exchange
    if ex.json_error:
        raise Violation(ex.json_error)
    problem = ctx.spec.validate("response", ex.json)
    if problem:
        raise Violation(problem)


@requirement(
    "RESP-HEADERS-REQUIRED",
    level=MUST,
    area="schema",
    statement="Every 200 carries the response headers the spec marks required.",
    source="spec: responses.200.headers (required: true)",
    applies=lambda ctx: ctx.exchange.status == 200 and bool(ctx.spec.required_headers),
)
def required_headers(ctx: Context) -> None:
    missing = [h for h in ctx.spec.required_headers if h not in ctx.exchange.headers]
    if missing:
        raise Violation(f"required header(s) missing: {', '.join(missing)}")


@requirement(
    "RESP-OBJECT",
    level=MUST,
    area="schema",
    statement='The completion object says `object: "text_completion"`.',
    source="spec: CreateCompletionResponse.object enum; " + OPENAI,
    applies=completion,
)
def response_object(ctx: Context) -> None:
    check_object(ctx.exchange.json)


@requirement(
    "RESP-CREATED",
    level=MUST,
    area="semantics",
    statement="`created` is a plausible Unix time in seconds.",
    source="spec: CreateCompletionResponse.created (format unixtime, seconds)",
    applies=completion,
)
def response_created(ctx: Context) -> None:
    check_created(ctx.exchange.json)


@requirement(
    "RESP-ID",
    level=MUST,
    area="semantics",
    statement="`id` is a non-empty string.",
    source="spec: required id; " + OPENAI,
    applies=completion,
)
def response_id(ctx: Context) -> None:
    check_id(ctx.exchange.json)


@requirement(
    "RESP-CHOICE-TEXT",
    level=MUST,
    area="schema",
    statement="Every choice carries its generated `text` as a string.",
    source="spec: choices[].text (required string)",
    applies=completion,
)
def choice_text(ctx: Context) -> None:
    for i, choice in enumerate(choices_of(ctx.exchange.json)):
        if not isinstance(choice.get("text"), str):
            raise Violation(f"choices[{i}].text is {choice.get('text')!r}, expected a string")


@requirement(
    "RESP-NULL-FIELDS",
    level=SHOULD,
    area="schema",
    statement="Fields the spec types as non-nullable (logprobs, finish_reason, usage) are "
    "omitted rather than sent as null.",
    source="spec: OpenAPI 3.0 types without nullable (policy null-response-fields)",
    applies=lambda ctx: completion(ctx) and _erratum(ctx, "null-response-fields"),
)
def null_fields(ctx: Context) -> None:
    body = ctx.exchange.json
    nulled = [f for f in NULLED_FIELDS if f in body and body[f] is None]
    for i, choice in enumerate(choices_of(body)):
        nulled += [f"choices[{i}].{f}" for f in NULLED_FIELDS if f in choice and choice[f] is None]
    if nulled:
        raise Violation(f"null where the spec forbids it: {', '.join(nulled)}")
