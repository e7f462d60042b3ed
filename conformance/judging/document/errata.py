"""The catalogue of spec errata: defects found in vendored documents, named after the defect.

Each is detected in the document loaded and applied only where present
(conformance/judging/document/spec.py does both); this module only names them, so that ``--help`` can list
them without loading a spec. specs/README.md describes each with its evidence.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Erratum:
    """A named correction of a defect in a vendored document."""

    id: str
    title: str
    detail: str


OBJECT_TYPE_BESIDE_STRING_ARRAY_ANYOF = Erratum(
    "object-type-beside-string-array-anyof",
    "`type: object` beside an anyOf of string/array branches",
    "Such a schema as written accepts no value (Nscale's PromptValue and "
    "StopSequence); the anyOf alone is meant, so `type: object` is dropped.",
)
EVENT_STREAM_SCHEMA_IS_ARRAY = Erratum(
    "event-stream-schema-is-array",
    "event-stream schema is an array of chunks",
    "`type: array, format: event-stream, items: ...`: each SSE event's data is "
    "validated as one item.",
)
EVENT_STREAM_MEDIA_TYPE_UNDECLARED = Erratum(
    "event-stream-media-type-undeclared",
    "streamed 200 not declared",
    "Only application/json is declared for 200, but `stream` is described as "
    "data-only server-sent events ending in `data: [DONE]` with the same shape: a "
    "streamed 200 is text/event-stream whose events validate against the "
    "response schema.",
)
NULL_DEFAULT_ON_OBJECT_SCHEMA = Erratum(
    "null-default-on-object-schema",
    "`default: null` on an object-typed schema",
    "An object branch that defaults to null, which its own type forbids "
    "(AIHubMix's ChatCompletionStreamOptions); the default is dropped (the "
    "`type: 'null'` branch beside it allows null).",
)
NULLABLE_IN_OPENAPI_3_1 = Erratum(
    "nullable-in-openapi-3.1",
    "OpenAPI 3.0 `nullable` in a 3.1 document",
    "JSON Schema 2020-12 ignores `nullable: true`; its authors meant that null "
    "is allowed, so such schemas accept null.",
)
STREAM_CHUNK_NULLS_FORBIDDEN = Erratum(
    "stream-chunk-nulls-forbidden",
    "null finish_reason, logprobs and usage forbidden on streamed chunks",
    "Non-final chunks carry `finish_reason: null` and `logprobs: null`, and every "
    "chunk but the usage chunk `usage: null`, as the stream's own description "
    "implies; exactly one non-null finish_reason per choice is required by a "
    "separate check.",
)
ECHO_FIRST_LOGPROB_NOT_NULLABLE = Erratum(
    "echo-first-logprob-not-nullable",
    "null logprob for the first echoed token forbidden",
    "With `echo`, the first prompt token has no logprob and OpenAI sends null in "
    "token_logprobs[0] and top_logprobs[0]; the schema allows null items there and "
    "LOGPROBS-VALUES allows it only for the first echoed token.",
)

#: Every erratum the suite knows, in the order spec.py checks for them.
ERRATA: tuple[Erratum, ...] = (
    OBJECT_TYPE_BESIDE_STRING_ARRAY_ANYOF,
    EVENT_STREAM_SCHEMA_IS_ARRAY,
    EVENT_STREAM_MEDIA_TYPE_UNDECLARED,
    NULL_DEFAULT_ON_OBJECT_SCHEMA,
    NULLABLE_IN_OPENAPI_3_1,
    STREAM_CHUNK_NULLS_FORBIDDEN,
    ECHO_FIRST_LOGPROB_NOT_NULLABLE,
)


# -- conventions: how real documents say things, not defects ----------------------------


@dataclass(frozen=True, slots=True)
class Convention:
    """A way documents of a common origin say something, read as their tooling means it.

    Unlike an erratum it corrects nothing, so ``--strict-spec`` keeps it: reading
    FastAPI's ``type: string`` stream schema as a schema for every event would be the
    suite's mistake, not the document's. Each is detected per document and listed in
    the header and reports beside the errata and policies.
    """

    id: str
    title: str
    detail: str


EVENT_STREAM_SCHEMA_IS_STRING = Convention(
    "event-stream-schema-is-string",
    "the event-stream 200 schema is `type: string` (the raw stream)",
    "FastAPI servers (llama-cpp-python, ...) declare `text/event-stream` as a string: the "
    "stream as a whole, not the data of one event. Each event's data is judged by the "
    "200 JSON schema instead, as the non-streamed answer is.",
)
FASTAPI_VALIDATION_422 = Convention(
    "fastapi-validation-422",
    "422 HTTPValidationError is FastAPI's automatic validation answer",
    'FastAPI adds a 422 `{"detail": [{"loc", "msg", "type"}]}` response to every '
    "operation. A 422 answer may carry that body (or the API's error envelope); it is not "
    "the error envelope of other statuses, and it does not count as the document listing "
    "its client errors.",
)
NO_CLIENT_ERRORS_DECLARED = Convention(
    "no-client-errors-declared",
    "no 4xx declared (besides 429 and FastAPI's automatic 422)",
    "OpenAPI's responses object need not list every status, so an undeclared 4xx is not "
    "judged here (HTTP-4XX-DECLARED does not apply). Refusals must still be 4xx "
    "(INVALID-REJECTED, AUTH-REQUIRED, MODEL-NOT-FOUND) in the document's error schema, "
    'else OpenAI\'s `{"error": {"message": ...}}` envelope (ERROR-ENVELOPE).',
)

#: Every convention the suite knows, in the order spec.py detects them.
CONVENTIONS: tuple[Convention, ...] = (
    EVENT_STREAM_SCHEMA_IS_STRING,
    FASTAPI_VALIDATION_422,
    NO_CLIENT_ERRORS_DECLARED,
)
