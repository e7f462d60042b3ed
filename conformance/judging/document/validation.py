"""openapi-core as the independent judge of requests and answers, on the corrected document.

The suite generates its requests itself (strategies/) and judges answers with its own
checks; openapi-core is a second, independent reading of the same document. It is given
the operation as corrected by the errata (conformance/judging/document/spec.py): one OpenAPI object is
built per Spec, from the resolved operation whose request, response and error schemas are
replaced by the corrected ones.

- :func:`request_errors` / :func:`request_rules`: openapi-core's request validation of the
  whole operation (path, method, content type, security, body); the rules a body breaks,
  named as conformance/judging/document/oracle.py names them (``<field>:<keyword>``, ``body:*``).
- :func:`response_verdict`: status declared, media type declared, required headers, the
  JSON body against the operation's response schema. SSE bodies are left to the suite's
  own parser and chunk checks (openapi-core reads a body as one document).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from jsonschema.exceptions import ValidationError, best_match
from openapi_core import OpenAPI
from openapi_core.templating.media_types.exceptions import MediaTypeNotFound
from openapi_core.templating.responses.exceptions import ResponseNotFound
from openapi_core.testing import MockRequest, MockResponse
from openapi_core.validation.request.exceptions import (
    InvalidRequestBody,
    MissingRequiredRequestBody,
    RequestBodyValidationError,
    SecurityValidationError,
)
from openapi_core.validation.request.validators import (
    V30RequestBodyValidator,
    V31RequestBodyValidator,
)
from openapi_core.validation.response.exceptions import (
    DataValidationError,
    HeadersError,
    InvalidData,
    MissingRequiredHeader,
)

from conformance.judging.document.oracle import BODY_NOT_JSON, cross_rules, rule_names
from conformance.judging.document.policies import MEDIA_TYPE_PARAMETERS
from conformance.judging.document.spec import OPERATION_PATH, Spec, describe
from conformance.judging.exceptions import ConformanceError

HOST = "http://target"
VALIDATION_KEY = "Bearer validation-only"
# A media-type problem is a rule of the operation, not of the body.
BODY_MEDIA_TYPE = "body:media-type"


class ValidatorUnavailable(ConformanceError):
    """openapi-core cannot load the corrected document (the reason is the message)."""


def corrected_document(spec: Spec) -> dict[str, Any]:
    """The operation as a standalone OpenAPI document, with the errata applied.

    Servers are reduced to ``/`` (the suite's target URL decides the host), and the
    schemas of the request, of the JSON 200 and of the error answers are the Spec's
    corrected ones. The 200 event-stream entry keeps its media type without a schema.
    """
    op = copy.deepcopy(spec.operation)
    op["requestBody"] = {
        **(op.get("requestBody") or {}),
        "content": {spec.request_media_type: {"schema": spec.request_schema}},
    }
    responses: dict[str, Any] = {}
    for status, response in (op.get("responses") or {}).items():
        response = dict(response or {})
        content: dict[str, Any] = {}
        for media in response.get("content") or {}:
            if str(status) == "200":
                schema = spec.response_schema if "json" in media else None
            else:
                schema = spec.error_schema if "json" in media else None
            content[media] = {"schema": schema} if schema is not None else {}
        if (
            str(status) == "200"
            and spec.stream_media_type
            and spec.stream_media_type not in content
        ):
            content[spec.stream_media_type] = {}
        if content:
            response["content"] = content
        responses[str(status)] = response
    op["responses"] = responses
    document: dict[str, Any] = {
        "openapi": spec.openapi_version,
        "info": {"title": spec.title, "version": spec.version or "0"},
        "servers": [{"url": "/"}],
        "paths": {OPERATION_PATH: {"post": op}},
    }
    if spec.security_schemes:
        document["components"] = {"securitySchemes": spec.security_schemes}
    if "security" in spec.document:
        document["security"] = spec.document["security"]
    return document


@lru_cache(maxsize=16)
def openapi_of(spec: Spec) -> OpenAPI:
    """The openapi-core object of ``spec``'s corrected document (built once per Spec)."""
    try:
        return OpenAPI.from_dict(corrected_document(spec))
    except Exception as exc:  # openapi-core raises many kinds; one reason is enough
        raise ValidatorUnavailable(f"{type(exc).__name__}: {str(exc)[:300]}") from None


def _request(spec: Spec, payload: bytes, *, content_type: str | None, auth: bool) -> MockRequest:
    headers = {"Authorization": VALIDATION_KEY} if auth else {}
    return MockRequest(
        HOST,
        "post",
        OPERATION_PATH,
        headers=headers,
        data=payload,
        content_type=content_type or spec.request_media_type,
    )


def request_errors(
    spec: Spec,
    body: Any,
    *,
    raw: bytes | None = None,
    content_type: str | None = None,
    auth: bool = True,
) -> list[Exception]:
    """openapi-core's request errors for ``body`` (or the ``raw`` bytes) sent to the operation."""
    payload = raw if raw is not None else json.dumps(body).encode()
    request = _request(spec, payload, content_type=content_type, auth=auth)
    return list(openapi_of(spec).iter_request_errors(request))


def schema_errors(error: Exception) -> list[ValidationError]:
    """The JSON Schema errors behind an openapi-core body error (none for other errors)."""
    cause = error.__cause__
    found = getattr(cause, "schema_errors", None) or getattr(error, "schema_errors", None)
    return list(found or [])


def request_rules(spec: Spec, body: Any, *, raw: bytes | None = None) -> set[str]:
    """The request rules openapi-core finds broken, named by the oracle's rule_names.

    Security is not judged here (the suite sends its credentials separately). Memoised
    per body: openapi-core spends about 8-10 ms on one request (jsonschema alone 0.5-2).
    """
    payload = raw if raw is not None else json.dumps(body, sort_keys=True).encode()
    return set(_request_rules(spec, payload, raw is not None))


@lru_cache(maxsize=16)
def _body_validator(spec: Spec) -> Any:
    """openapi-core's request-body validator of the operation: path, method, media type and
    body, without security and parameters, which the suite does not take from a case (the
    client sends its own credentials and headers). About 30% cheaper per request than the
    whole request validation (1.7 vs 2.4 ms), on the hot path of every valid case."""
    api = openapi_of(spec)
    v31 = spec.openapi_version.startswith("3.1")
    return (V31RequestBodyValidator if v31 else V30RequestBodyValidator)(api.spec)


@lru_cache(maxsize=4096)
def _request_rules(spec: Spec, payload: bytes, is_raw: bool) -> frozenset[str]:
    body = _loads(payload)
    rules: set[str] = set()
    request = _request(spec, payload, content_type=None, auth=True)
    for error in _body_validator(spec).iter_errors(request):
        if isinstance(error, SecurityValidationError):
            continue
        if isinstance(error, MissingRequiredRequestBody):
            rules.add(BODY_NOT_JSON)
            continue
        if not isinstance(error, RequestBodyValidationError):
            rules.add(f"operation:{type(error).__name__}")
            continue
        found = schema_errors(error) if isinstance(error, InvalidRequestBody) else []
        if not found:
            # Not deserialisable at all: the body is not JSON.
            rules.add(BODY_NOT_JSON)
            continue
        rules |= rule_names(found, body)
    return frozenset(rules)


def _loads(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _declared_media(spec: Spec, status: int, content_type: str) -> str:
    """``content_type``, or the declared media type it names with other parameters.

    Policy media-type-parameters: ``application/json`` and ``application/json;
    charset=utf-8`` are one type. Under --strict-spec the answer's own type is judged.
    """
    if not spec.uses(MEDIA_TYPE_PARAMETERS.id):
        return content_type
    declared = spec.media_types_for(status)
    if status == 200 and spec.stream_media_type:
        declared = (*declared, spec.stream_media_type)

    def bare(media: str) -> str:
        return media.split(";", 1)[0].strip().lower()

    if content_type in declared:
        return content_type
    same = [m for m in declared if bare(m) == bare(content_type)]
    return same[0] if same else content_type


@dataclass(frozen=True, slots=True)
class ResponseVerdict:
    """What openapi-core says of one answer; None in a field means no problem found."""

    status: str | None = None  # the status code is not declared
    media_type: str | None = None  # the media type is not declared for that status
    headers: str | None = None  # a required header is missing or invalid
    body: str | None = None  # the JSON body does not match the schema

    @property
    def ok(self) -> bool:
        return not (self.status or self.media_type or self.headers or self.body)


def response_verdict(
    spec: Spec,
    status: int,
    content_type: str,
    body: bytes,
    headers: dict[str, str] | None = None,
) -> ResponseVerdict:
    """Judge one answer by openapi-core's response validation of the operation.

    Event-stream bodies are not parsed here (their media type is still judged).
    """
    api = openapi_of(spec)
    request = _request(spec, b"{}", content_type=None, auth=True)
    bare = content_type.split(";", 1)[0].strip().lower()
    data = b"" if bare == "text/event-stream" else body
    media = _declared_media(spec, status, content_type)
    response = MockResponse(data, status_code=status, headers=headers or {}, content_type=media)
    found: dict[str, str] = {}
    for error in api.iter_response_errors(request, response):
        if isinstance(error, ResponseNotFound) or isinstance(error.__cause__, ResponseNotFound):
            found.setdefault("status", f"status {status} is not declared for the operation")
        elif isinstance(error, MediaTypeNotFound) or isinstance(error.__cause__, MediaTypeNotFound):
            found.setdefault(
                "media_type", f"media type {bare!r} is not declared for status {status}"
            )
        elif isinstance(error, HeadersError | MissingRequiredHeader):
            context = getattr(error, "context", None) or [error]
            names = ", ".join(sorted(str(getattr(e, "name", e)) for e in context))
            found.setdefault("headers", f"required header(s) missing or invalid: {names}")
        elif isinstance(error, InvalidData | DataValidationError):
            if bare == "text/event-stream":
                continue
            problems = schema_errors(error)
            worst = best_match(problems) if problems else None
            found.setdefault("body", describe(worst) if worst is not None else str(error)[:200])
        else:
            found.setdefault("body", f"{type(error).__name__}: {str(error)[:200]}")
    return ResponseVerdict(**found)


def oracle_rules(spec: Spec, body: Any, *, raw: bytes | None = None) -> set[str]:
    """The rules a request breaks, by openapi-core (schema) and the stated cross-field rules."""
    rules = request_rules(spec, body, raw=raw)
    if raw is None and isinstance(body, Mapping):
        rules |= cross_rules(spec, body, rules)
    return rules
