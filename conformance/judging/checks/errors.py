"""Error answers, credentials and request ids: the envelope, its media type, 401s and 404s.

A 5xx is the finding of the requirement for the request's kind (VALID-NO-5XX,
INVALID-REJECTED, AUTH-REQUIRED, MODEL-NOT-FOUND); the envelope and media type rules judge
the 4xx answers a client is meant to read (one defect, one finding).

Besides the checks, this module builds the probes that exercise them (auth probes, an
unknown model, cheap requests the spec says must be refused), so that the suite and the
project's tests send exactly the requests these requirements recognise.
"""

from __future__ import annotations

from typing import Any

from conformance.judging.checks.common import answered, media_matches, says
from conformance.judging.checks.window import CONTEXT_WINDOW_TAG
from conformance.judging.document.spec import Spec
from conformance.judging.requirements import Context, Level, Violation, requirement
from conformance.judging.wire.case import Auth, Case

MUST, SHOULD = Level.MUST, Level.SHOULD

#: Tag of the probe that names a model the target cannot serve.
UNKNOWN_MODEL_TAG = "probe:unknown-model"
UNKNOWN_MODEL = "conformance-no-such-model"
#: The credentials each auth probe sends, in words (Client.headers_for sends them).
AUTH_PROBES: dict[Auth, str] = {
    "none": "without credentials",
    "malformed": "with a malformed Authorization header (`Bearer` and no key)",
    "wrong": "with a wrong API key",
}


def _client_error(ctx: Context) -> bool:
    """A 4xx answer other than 429 (rate limiting is the run's, not a finding)."""
    status = ctx.exchange.status
    return status is not None and 400 <= status < 500 and status != 429


def _bearer(spec: Spec) -> str | None:
    return None if spec.bearer_auth else "the spec declares no bearer auth"


#: A null spelled as text: Python's ``str(None)`` (LiteLLM's ``"type": "None"``), JSON's
#: and JavaScript's ``null``.
STRINGIFIED_NULLS = frozenset({"None", "null", "Null", "NULL"})
#: The fields of OpenAI's error object that may be null (its document: Error.param, .code),
#: judged where the document has no error schema of its own.
OPENAI_NULLABLE_ERROR_FIELDS = ("param", "code")


def stringified_nulls(spec: Spec, body: Any) -> list[str]:
    """The error fields that say null as a string where the envelope's field can be null.

    Where the document's envelope accepts null for a field, null is how "no value" is
    said; ``"None"`` there is a value a client reads and shows (``APIError.param``).
    """
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return []
    found = []
    for key, value in error.items():
        if not isinstance(value, str) or value.strip() not in STRINGIFIED_NULLS:
            continue
        if spec.error_schema is None:
            nullable = key in OPENAI_NULLABLE_ERROR_FIELDS
        else:
            nullable = spec.validate("error", {**body, "error": {**error, key: None}}) is None
        if nullable:
            found.append(key)
    return found


def _envelope_hint(body: Any) -> str:
    """Name the common wrong shapes, so the message says what the target did."""
    if isinstance(body, dict) and "error" not in body and "detail" in body:
        return ' (a FastAPI-style {"detail": ...} body)'
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return ' (the error is a bare string, as in {"error": "..."})'
    return ""


@requirement(
    "ERROR-ENVELOPE",
    level=MUST,
    area="errors",
    statement="Every 4xx body is strict JSON in the spec's error envelope, with null said as "
    'null (not the string "None" or "null") where the envelope\'s field is nullable.',
    source="spec: responses.4xx.content.*.schema (Nscale ErrorResponse, AIHubMix "
    "GatewayError); OpenAI clients read error.message",
    evidence="spec-schema",
    # A document with no error schema (FastAPI's own, which declares only its 422) promises
    # no envelope: OpenAI's `{"error": {"message": ...}}` is then the OpenAI contract's
    # (the SDK still raises the right error, with the raw body as its message).
    stated=lambda spec: spec.error_schema is not None,
    otherwise="openai-contract",
    # A body cut short by a bound cannot be judged; HTTP-COMPLETE reports the bound.
    applies=lambda ctx: _client_error(ctx) and ctx.exchange.bound is None,
)
def error_envelope(ctx: Context) -> None:
    ex = ctx.exchange
    if not ex.body:
        raise Violation(f"the {ex.status} answer has an empty body, expected an error envelope")
    if ex.json_error:
        raise Violation(f"the {ex.status} error body: {ex.json_error}", path="body")
    body = ex.json
    if (
        ex.status == 422
        and ctx.spec.validation_error_schema is not None
        and ctx.spec.validate("validation-error", body) is None
    ):
        return  # the declared HTTPValidationError (convention fastapi-validation-422)
    if ctx.spec.error_schema is None:
        # A spec without an error schema: hold the target to OpenAI's envelope.
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict) or not isinstance(error.get("message"), str):
            raise Violation(
                f'the {ex.status} error body is not {{"error": {{"message": ...}}}}'
                + _envelope_hint(body),
                path="error.message",
            )
    else:
        problem = ctx.spec.validate("error", body)
        if problem:
            raise Violation(
                f"the {ex.status} error body is not the spec's error envelope: {problem}"
                + _envelope_hint(body)
            )
    nulls = stringified_nulls(ctx.spec, body)
    if nulls:
        error = body["error"]
        spelled = ", ".join(f"error.{k} = {error[k]!r}" for k in nulls)
        raise Violation(
            f"the {ex.status} error envelope spells null as a string: {spelled} (the "
            "envelope's field is nullable: a client reads the string as a value)",
            path=f"error.{nulls[0]}",
            expected=None,
            actual=error[nulls[0]],
        )


@requirement(
    "ERROR-CONTENT-TYPE",
    level=MUST,
    area="errors",
    statement="Every 4xx answer is served with the JSON media type the spec declares for "
    "its status.",
    source="spec: responses.4xx.content media types",
    evidence="spec-schema",
    applies=_client_error,
)
def error_content_type(ctx: Context) -> None:
    ex = ctx.exchange
    assert ex.status is not None
    # An undeclared status has no media type of its own; JSON is what clients parse.
    declared = ctx.spec.media_types_for(ex.status) or ("application/json",)
    if not media_matches(ex.media_type, declared):
        got = ex.content_type or "no Content-Type"
        raise Violation(
            f"the {ex.status} error is served as {got!r}, expected {' or '.join(declared)}",
            expected=list(declared),
            actual=got,
        )


@requirement(
    "AUTH-REQUIRED",
    level=MUST,
    area="auth",
    statement="Where the spec declares bearer auth, a request without credentials, with a "
    "malformed Authorization header or with a wrong key is answered 401.",
    source="spec: components.securitySchemes (type http, scheme bearer); RFC 6750 §3.1",
    evidence="spec-schema",
    scope=_bearer,
    # A 429 says nothing about auth; the run reports rate limiting on its own.
    applies=lambda ctx: (
        ctx.case.auth != "default"
        and ctx.spec.bearer_auth
        and ctx.exchange.status is not None
        and ctx.exchange.status != 429
    ),
)
def auth_required(ctx: Context) -> None:
    what = AUTH_PROBES.get(ctx.case.auth, ctx.case.auth)
    _expect_status(ctx, 401, f"a request {what}", "credentials are not checked")


def _expect_status(ctx: Context, expected: int, what: str, if_served: str) -> None:
    """Fail unless the answer is ``expected``; a 2xx says ``if_served`` about why."""
    status = ctx.exchange.status
    if status is not None and 200 <= status < 300:
        raise Violation(
            f"{what} was served ({status}), expected {expected}: {if_served}",
            expected=expected,
            actual=status,
        )
    if status != expected:
        raise Violation(
            f"{what} was answered {status}, expected {expected}", expected=expected, actual=status
        )


def _unknown_model(ctx: Context) -> bool:
    status = ctx.exchange.status
    return UNKNOWN_MODEL_TAG in ctx.case.tags and status is not None and status != 429


@requirement(
    "MODEL-NOT-FOUND",
    level=MUST,
    area="errors",
    statement="A request naming a model the target does not serve is refused with a 4xx "
    "(its envelope is ERROR-ENVELOPE's, whether that 4xx is declared HTTP-4XX-DECLARED's), "
    "never served or answered 5xx.",
    source="spec text: CreateCompletionRequest.model (ID of the model to use); OpenAI "
    "clients raise NotFoundError / BadRequestError on a 4xx",
    evidence="spec-text",
    stated=says("model", r"ID of the model"),
    otherwise="client-visible",
    applies=_unknown_model,
)
def model_not_found(ctx: Context) -> None:
    status = ctx.exchange.status
    assert status is not None
    what = f"the unknown model {ctx.case.body.get('model')!r}"
    if 200 <= status < 300:
        raise Violation(f"{what} was served ({status}): model not checked", actual=status)
    if not 400 <= status < 500:
        raise Violation(
            f"{what} was answered {status}, expected a 4xx", expected="4xx", actual=status
        )


@requirement(
    "HTTP-4XX-DECLARED",
    level=SHOULD,
    area="errors",
    statement="Where the spec lists its client errors, every 4xx returned (but 429) is one "
    "of them. OpenAPI does not ask a responses object to list every status, so this is "
    "a SHOULD, and a spec that lists no 4xx promises nothing here.",
    source="spec: paths./v1/completions.post.responses (4xx entries); OpenAPI 3 Responses "
    "Object ('not expected to cover all possible HTTP response codes')",
    evidence="spec-schema",
    scope=lambda spec: (
        None
        if spec.declares_client_errors
        else "the spec declares no 4xx (convention no-client-errors-declared)"
    ),
    applies=lambda ctx: _client_error(ctx) and ctx.spec.declares_client_errors,
)
def client_error_declared(ctx: Context) -> None:
    status = ctx.exchange.status
    assert status is not None
    if not ctx.spec.is_declared(status):
        listed = ", ".join(ctx.spec.client_error_statuses)
        raise Violation(
            f"status {status} is not among the spec's declared 4xx ({listed})",
            expected=list(ctx.spec.client_error_statuses),
            actual=status,
        )


@requirement(
    "MODEL-NOT-FOUND-404",
    level=SHOULD,
    area="errors",
    statement="The refusal of an unknown model is 404 (OpenAI's model_not_found).",
    source="OpenAI behaviour (404 model_not_found); LiteLLM and others answer 400",
    evidence="server-habit",
    scope=lambda spec: None if spec.is_declared(404) else "the spec declares no 404",
    applies=lambda ctx: (
        _unknown_model(ctx)
        and ctx.spec.is_declared(404)
        and 400 <= (ctx.exchange.status or 0) < 500
    ),
)
def model_not_found_404(ctx: Context) -> None:
    model = ctx.case.body.get("model")
    _expect_status(ctx, 404, f"the unknown model {model!r}", "model not found")


@requirement(
    "INVALID-REJECTED",
    level=MUST,
    area="errors",
    statement="A request that breaks the spec is rejected with a declared 4xx.",
    source="spec: request schema and cross-field rules; responses.400",
    evidence="spec-schema",
    applies=lambda ctx: (
        ctx.case.mode == "invalid"
        and ctx.case.auth == "default"
        and ctx.exchange.status is not None
        and UNKNOWN_MODEL_TAG not in ctx.case.tags  # MODEL-NOT-FOUND judges that one
        and CONTEXT_WINDOW_TAG not in ctx.case.tags  # and CONTEXT-WINDOW-REJECTED that one
        and ctx.exchange.status != 429  # rate limited: no answer to judge
    ),
)
def invalid_rejected(ctx: Context) -> None:
    status = ctx.exchange.status
    assert status is not None
    if not 400 <= status < 500 or status == 429:
        raise Violation(
            f"request breaking {ctx.case.breaks} answered {status}, expected a 4xx",
            expected="4xx",
            actual=status,
        )


@requirement(
    "REQUEST-ID-HEADER",
    level=SHOULD,
    area="transport",
    statement="Every answer carries the request-id header the spec names.",
    source="spec text: GatewayError (request_id lives in the X-Request-Id response header)",
    evidence="spec-text",
    scope=lambda spec: None if spec.request_id_header else "the spec names no request-id header",
    applies=lambda ctx: answered(ctx) and ctx.spec.request_id_header is not None,
)
def request_id_header(ctx: Context) -> None:
    name = ctx.spec.request_id_header
    assert name is not None
    value = ctx.exchange.headers.get(name)
    if value is None or not value.strip():
        raise Violation(f"the {ctx.exchange.status} answer has no {name} header", expected=name)


# -- the probes these requirements judge -------------------------------------------------


def auth_probes(model: str) -> list[Case]:
    """One cheap, otherwise valid request per kind of bad credentials."""
    return [
        Case(
            {"model": model, "prompt": "Say hi", "max_tokens": 1},
            mode="invalid",  # refused by design; INVALID-REJECTED skips auth probes
            label=f"auth probe: {words}",
            breaks=f"credentials: {words}",
            auth=auth,
        )
        for auth, words in AUTH_PROBES.items()
    ]


def unknown_model_probe() -> Case:
    """A cheap request for a model no target serves."""
    return Case(
        {"model": UNKNOWN_MODEL, "prompt": "Say hi", "max_tokens": 1},
        mode="invalid",
        label="unknown model",
        breaks="model: names a model the target does not serve",
        tags=frozenset({UNKNOWN_MODEL_TAG}),
    )


def bad_request_probes(spec: Spec, model: str) -> list[Case]:
    """Cheap requests every target must refuse with 400: a broken body, a wrong type."""
    cases = [
        Case(
            {},
            mode="invalid",
            label="400 probe: body is not JSON",
            breaks="request body: not JSON",
            raw_body=b'{"model": "' + model.encode() + b'", "prompt": ',
        ),
    ]
    if "max_tokens" in spec.request_properties:
        cases.append(
            Case(
                {"model": model, "prompt": "Say hi", "max_tokens": "one"},
                mode="invalid",
                label="400 probe: max_tokens is a string",
                breaks="max_tokens:type",
            )
        )
    return cases
