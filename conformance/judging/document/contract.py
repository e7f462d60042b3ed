"""The contract a document is judged under: what reusing OpenAI's names promises.

``openai-compatible`` (the default): a document that declares a field under OpenAI's name,
with a type OpenAI's value could take, promises OpenAI's documented meaning for it. Where
the document says more (a declared default, a narrower or wider schema, its own text) the
document wins; a field it does not declare carries no such promise. This is what makes a
prose-less document such as Nscale's (its generator dropped every description) still
promise that ``max_tokens`` bounds the tokens generated and that ``stop`` stops: its
clients are OpenAI clients, and they break when it does not.

``document`` (``--contract document``): the document alone. Evidence from OpenAI's API
reference is then at most a SHOULD, for a vendor that does not claim compatibility.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any, Protocol


class Contract(StrEnum):
    OPENAI_COMPATIBLE = "openai-compatible"
    DOCUMENT = "document"


DEFAULT_CONTRACT = Contract.OPENAI_COMPATIBLE


class Judged(Protocol):
    """What the contract reads of a document (conformance.judging.document.spec.Spec is one): its
    contract and its resolved schemas. A protocol, so that the spec can import this module."""

    @property
    def contract(self) -> Contract: ...
    @property
    def request_schema(self) -> Any: ...
    @property
    def response_schema(self) -> Any: ...
    @property
    def stream_chunk_schema(self) -> Any: ...


CONTRACT_HELP = {
    Contract.OPENAI_COMPATIBLE: "a field the document declares under OpenAI's name, with a "
    "type OpenAI's value could take, binds OpenAI's documented meaning (MUST); the "
    "document wins where it says otherwise",
    Contract.DOCUMENT: "the document alone: OpenAI's documented meaning of a field the "
    "document is silent on is at most a SHOULD",
}

#: The JSON types OpenAI's own document (specs/openai.yaml) gives each field a requirement
#: rests on, across its completion request, response and chunk schemas (``logprobs`` is the
#: request's integer and the choice's object). Read once from the document and pinned here
#: so that a run need not load its 3 MB; tests/test_contract.py re-derives it.
OPENAI_TYPES: dict[str, frozenset[str]] = {
    "completion_tokens": frozenset({"integer"}),
    "created": frozenset({"integer"}),
    "echo": frozenset({"boolean", "null"}),
    "finish_reason": frozenset({"string", "null"}),
    "id": frozenset({"string"}),
    "include_usage": frozenset({"boolean"}),
    "logprobs": frozenset({"integer", "object", "null"}),
    "max_tokens": frozenset({"integer", "null"}),
    "model": frozenset({"string"}),
    "n": frozenset({"integer", "null"}),
    "object": frozenset({"string"}),
    "prompt_tokens": frozenset({"integer"}),
    "stop": frozenset({"string", "array", "null"}),
    "stream": frozenset({"boolean", "null"}),
    "suffix": frozenset({"string", "null"}),
    "total_tokens": frozenset({"integer"}),
}


def properties_named(node: Any, name: str) -> list[Any]:
    """Every property called ``name`` anywhere in ``node`` (a resolved schema)."""
    found: list[Any] = []
    todo = [node]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            props = item.get("properties")
            if isinstance(props, dict) and name in props:
                found.append(props[name])
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return found


def schemas_of(spec: Judged) -> list[Any]:
    """The request, response and chunk schemas, resolved (errata applied)."""
    return [spec.request_schema, spec.response_schema, spec.stream_chunk_schema]


def json_types(node: Any) -> set[str] | None:
    """The JSON types a schema admits, through its combinators; None when it names none
    (an untyped schema admits every type)."""
    found: set[str] = set()
    untyped = False
    todo: list[Any] = [node]
    while todo:
        item = todo.pop()
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        branches = [b for key in ("anyOf", "oneOf", "allOf") for b in item.get(key) or []]
        if isinstance(kind, str):
            found.add(kind)
        elif isinstance(kind, list):
            found.update(k for k in kind if isinstance(k, str))
        elif not branches:
            untyped = True
        if item.get("nullable") is True:
            found.add("null")
        todo.extend(branches)
    if "integer" in found:
        found.add("number")  # an integer is a number; OpenAPI writes either
    return None if untyped else found


def declared_types(spec: Judged, name: str) -> list[set[str] | None]:
    """The types of each property ``name`` the document declares (empty: not declared)."""
    return [json_types(p) for s in schemas_of(spec) for p in properties_named(s, name)]


def compatible(declared: Iterable[set[str] | None], name: str) -> bool:
    """Some declaration of the field admits a value of one of OpenAI's types for it."""
    openai = OPENAI_TYPES.get(name)
    if openai is None:
        return False
    wanted = openai | ({"number"} if "integer" in openai else set())
    return any(types is None or types & wanted for types in declared)


def binds(spec: Judged, name: str | None) -> bool:
    """Under the spec's contract, OpenAI's meaning of field ``name`` binds the target: the
    contract is openai-compatible and the document declares the field with a type OpenAI's
    value could take."""
    if name is None or spec.contract is not Contract.OPENAI_COMPATIBLE:
        return False
    return compatible(declared_types(spec, name), name)
