"""The errata applied: each known defect detected in the document itself, then fixed.

conformance/judging/document/errata.py names the defects (``ERRATA``); this module is where each is
looked for in a loaded document and, when present and errata are not switched off
(``--strict-spec``), corrected by a schema transformation named after it
(:func:`apply_errata`, which conformance/judging/document/spec.py calls once per document, after it
has extracted the schemas). The policy ``null-response-fields`` is settled here too, since
it reads the same schemas: it stays in force only where the document forbids those nulls.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from conformance.judging.document.errata import (
    ECHO_FIRST_LOGPROB_NOT_NULLABLE,
    EVENT_STREAM_MEDIA_TYPE_UNDECLARED,
    EVENT_STREAM_SCHEMA_IS_ARRAY,
    NULL_DEFAULT_ON_OBJECT_SCHEMA,
    NULLABLE_IN_OPENAPI_3_1,
    OBJECT_TYPE_BESIDE_STRING_ARRAY_ANYOF,
    STREAM_CHUNK_NULLS_FORBIDDEN,
    Erratum,
)
from conformance.judging.document.policies import NULL_RESPONSE_FIELDS, Policy
from conformance.judging.document.quick_schema import compile_validator

Schema = dict[str, Any]

# Response fields that real servers send as null although OpenAPI 3.0 documents type them
# as non-nullable (docs/design.md): tolerated at MUST level, reported at SHOULD level.
NULLED_FIELDS = ("logprobs", "finish_reason", "usage", "param")


class Document(Protocol):
    """What the errata read and correct of a loaded document (a ``Spec`` being built)."""

    strict: bool
    is_31: bool
    request_schema: Schema
    response_schema: Schema | None
    stream_chunk_schema: Schema | None
    error_schema: Schema | None
    stream_media_type: str | None
    errata: list[Erratum]
    policies: tuple[Policy, ...]

    def uses(self, rule_id: str) -> bool: ...


def object_branches(schema: Schema) -> list[Schema]:
    """The object schemas a chunk may be: the schema itself, or the branches of its
    top-level anyOf/oneOf (FastAPI's ``anyOf: [Completion, string]``)."""
    if "properties" in schema:
        return [schema]
    branches = schema.get("anyOf") or schema.get("oneOf") or []
    return [b for b in branches if isinstance(b, dict) and "properties" in b]


def _nodes(node: Any) -> Iterator[dict[str, Any]]:
    """Every mapping in a resolved schema tree, parents first."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from _nodes(value)


def _drop_key(nodes: list[dict[str, Any]], key: str) -> None:
    for node in nodes:
        node.pop(key, None)


def _allow_null(schema: Schema) -> Schema:
    """A schema that accepts what ``schema`` accepts, and null."""
    return {"anyOf": [{"type": "null"}, schema]}


def _apply(doc: Document, erratum: Erratum, applies: bool, fix: Callable[[], None]) -> None:
    """Apply one erratum when its defect is present and errata are not switched off."""
    if applies and not doc.strict:
        fix()
        doc.errata.append(erratum)


def apply_errata(doc: Document) -> None:
    """Detect every known defect in ``doc``'s schemas and correct those present, in the
    order of ``ERRATA``; then settle the policy ``null-response-fields``."""
    says_null = any(
        n.get("nullable") is True or "null" in str(n.get("type"))
        for s in (doc.response_schema, doc.stream_chunk_schema, doc.error_schema)
        for n in _nodes(s or {})
    )
    schemas = [doc.request_schema, doc.response_schema, doc.stream_chunk_schema]
    live = [s for s in schemas if s]

    # `type: object` beside an anyOf whose branches are strings and arrays.
    def contradictory(node: dict[str, Any]) -> bool:
        branches = node.get("anyOf") or node.get("oneOf") or []
        return (
            node.get("type") == "object"
            and bool(branches)
            and all(isinstance(b, dict) and b.get("type") in ("string", "array") for b in branches)
        )

    bad = [n for s in live for n in _nodes(s) if contradictory(n)]
    _apply(doc, OBJECT_TYPE_BESIDE_STRING_ARRAY_ANYOF, bool(bad), lambda: _drop_key(bad, "type"))

    # An event-stream schema typed as an array of chunks: each event is one item.
    chunk = doc.stream_chunk_schema
    is_array = chunk is not None and chunk.get("type") == "array" and "items" in chunk

    def per_event() -> None:
        doc.stream_chunk_schema = chunk["items"]  # type: ignore[index]

    _apply(doc, EVENT_STREAM_SCHEMA_IS_ARRAY, is_array, per_event)

    # No event-stream media type, though `stream` promises server-sent events.
    stream_prop = (doc.request_schema.get("properties") or {}).get("stream") or {}
    promises_sse = "server-sent events" in json.dumps(stream_prop).lower()

    def share_shape() -> None:
        doc.stream_media_type = "text/event-stream"
        doc.stream_chunk_schema = copy.deepcopy(doc.response_schema)

    _apply(
        doc,
        EVENT_STREAM_MEDIA_TYPE_UNDECLARED,
        doc.stream_media_type is None and promises_sse and doc.response_schema is not None,
        share_shape,
    )

    # `default: null` on a branch typed `object`, which openapi-spec-validator rejects;
    # the null branch beside it is the intent.
    null_defaults = [
        n
        for n in _nodes(doc.request_schema)
        if "default" in n and n["default"] is None and n.get("type") == "object"
    ]
    _apply(
        doc,
        NULL_DEFAULT_ON_OBJECT_SCHEMA,
        bool(null_defaults),
        lambda: _drop_key(null_defaults, "default"),
    )

    # OpenAPI 3.0 `nullable` inside a 3.1 document.
    def nullable_nodes() -> list[dict[str, Any]]:
        return [
            n
            for s in (doc.request_schema, doc.response_schema, doc.error_schema)
            if s
            for n in _nodes(s)
            if n.get("nullable") is True
        ]

    _apply(
        doc,
        NULLABLE_IN_OPENAPI_3_1,
        doc.is_31 and bool(nullable_nodes()),
        lambda: _rewrite_nullable(doc),
    )

    # Streamed chunks: finish_reason/logprobs null until the last chunk, usage null
    # on every chunk but the usage chunk. A defect only where the chunk schema
    # forbids those nulls.
    _apply(
        doc,
        STREAM_CHUNK_NULLS_FORBIDDEN,
        doc.stream_chunk_schema is not None and _chunk_forbids_nulls(doc),
        lambda: _relax_chunk_nulls(doc),
    )

    # With echo, the first prompt token has no logprob; OpenAI sends null in
    # token_logprobs and top_logprobs, which both documents type as numbers/objects.
    arrays = _logprobs_arrays(doc)
    _apply(
        doc,
        ECHO_FIRST_LOGPROB_NOT_NULLABLE,
        any(not _accepts_null(doc, a["items"]) for a in arrays),
        lambda: _allow_null_logprob_items(doc),
    )

    # Policy null-response-fields: in force only where the document forbids those nulls
    # without ever saying null anywhere in its answers (a document that marks other
    # fields nullable meant these ones not to be).
    if doc.uses(NULL_RESPONSE_FIELDS.id):
        if _forbidden_null_fields(doc) and not says_null:
            _allow_null_fields(doc, NULLED_FIELDS)
        else:
            doc.policies = tuple(p for p in doc.policies if p != NULL_RESPONSE_FIELDS)


def _forbidden_null_fields(doc: Document) -> list[str]:
    """The NULLED_FIELDS some response schema types non-nullable."""
    return [
        field
        for schema in (doc.response_schema, doc.stream_chunk_schema, doc.error_schema)
        for node in _nodes(schema or {})
        for props in [node.get("properties")]
        if isinstance(props, dict)
        for field in NULLED_FIELDS
        if isinstance(props.get(field), dict) and not _accepts_null(doc, props[field])
    ]


def _accepts_null(doc: Document, schema: Any) -> bool:
    validator = compile_validator(schema if isinstance(schema, dict) else {}, doc.is_31)
    return bool(validator.is_valid(None))


def _chunk_forbids_nulls(doc: Document) -> bool:
    fields: list[Any] = []
    for chunk in object_branches(doc.stream_chunk_schema or {}):
        props = chunk.get("properties") or {}
        items = (props.get("choices") or {}).get("items") or {}
        fields += [props.get("usage")] + [
            (items.get("properties") or {}).get(f) for f in ("finish_reason", "logprobs")
        ]
    return any(isinstance(f, dict) and not _accepts_null(doc, f) for f in fields)


def _rewrite_nullable(doc: Document) -> None:
    def rewrite(node: Any) -> Any:
        if isinstance(node, dict):
            out = {k: rewrite(v) for k, v in node.items() if k != "nullable"}
            return _allow_null(out) if node.get("nullable") is True else out
        if isinstance(node, list):
            return [rewrite(v) for v in node]
        return node

    doc.request_schema = rewrite(doc.request_schema)
    doc.response_schema = rewrite(doc.response_schema)
    doc.error_schema = rewrite(doc.error_schema)
    if doc.stream_chunk_schema is not None:
        doc.stream_chunk_schema = rewrite(doc.stream_chunk_schema)


def _relax_chunk_nulls(doc: Document) -> None:
    whole = copy.deepcopy(doc.stream_chunk_schema) or {}
    for chunk in object_branches(whole):
        props = chunk.get("properties") or {}
        if "usage" in props:
            props["usage"] = _nullable(doc, props["usage"])
        items = (props.get("choices") or {}).get("items") or {}
        for field in ("finish_reason", "logprobs"):
            if field in (items.get("properties") or {}):
                items["properties"][field] = _nullable(doc, items["properties"][field])
    doc.stream_chunk_schema = whole


def _logprobs_arrays(doc: Document) -> list[dict[str, Any]]:
    """The token_logprobs / top_logprobs array schemas of the response schemas."""
    return [
        props[name]
        for schema in (doc.response_schema, doc.stream_chunk_schema)
        for node in _nodes(schema or {})
        for props in [node.get("properties")]
        if isinstance(props, dict) and "token_logprobs" in props
        for name in ("token_logprobs", "top_logprobs")
        if isinstance(props.get(name), dict) and "items" in props[name]
    ]


def _allow_null_logprob_items(doc: Document) -> None:
    for array in _logprobs_arrays(doc):
        array["items"] = _nullable(doc, array["items"])


def _nullable(doc: Document, schema: Schema) -> Schema:
    """``schema`` or null, in the dialect of this document."""
    # OpenAPI 3.0 has no null type: its validators honour `nullable` instead.
    return _allow_null(schema) if doc.is_31 else {**schema, "nullable": True}


def _allow_null_fields(doc: Document, fields: tuple[str, ...]) -> None:
    for schema in (doc.response_schema, doc.stream_chunk_schema, doc.error_schema):
        for node in _nodes(schema or {}):
            props = node.get("properties")
            if not isinstance(props, dict):
                continue
            for field in fields:
                if isinstance(props.get(field), dict) and not _accepts_null(doc, props[field]):
                    props[field] = _nullable(doc, props[field])
