"""The document's validators, with arrays of plain values judged in one pass.

Why: jsonschema descends into every item of an array (about 25 µs each) and, under a
``oneOf`` or ``anyOf``, into every branch, collecting an error per item of each branch
that fails. An 8,192-token prompt under the four prompt forms took 0.2 s to validate; the
reference target answered nothing else meanwhile, and every stream the judge reads spends
the same on its token arrays.

Here a schema of one narrow shape (a scalar type, with a format at most, or an array of
such things with item bounds, and annotations) is decided in one pass when the answer is
certain: every item of the right Python type, or one item of a JSON type the schema
cannot take. Only what is certain is short-cut, and only to say "no error": whenever a
keyword would report an error, or the shape or a value is anything else (``nullable``,
a float against ``integer``, a ``$ref``), jsonschema's own keyword runs, so the errors
are the same, to the message, as without this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from jsonschema.exceptions import ValidationError
from jsonschema.validators import extend
from openapi_schema_validator import (
    OAS30Validator,
    OAS31Validator,
    oas30_format_checker,
    oas31_format_checker,
)

Schema = Mapping[str, Any]
Keyword = Callable[[Any, Any, Any, Schema], Iterator[ValidationError]]

#: Keywords that never make a value invalid.
ANNOTATIONS = frozenset({"description", "default", "example", "examples", "title"})
SCALAR_KEYS = ANNOTATIONS | {"type", "format"}
ARRAY_KEYS = ANNOTATIONS | {"type", "items", "minItems", "maxItems"}
#: The Python types a JSON value is; others (bytes, tuples...) are never decided here.
JSON_TYPES = frozenset({str, int, float, bool, type(None), list, dict})
#: Each scalar type's values, by exact Python type (so a bool is never an integer).
#: A JSON type name -> the exact Python types certainly of it (both dialects' checkers
#: accept these; what else they accept, e.g. 1.0 as an integer in 3.1, is left to
#: jsonschema). conformance/judging/document/sure_valid.py reads it too.
EXACT: Mapping[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}
#: The scalar types' values, by exact Python type (so a bool is never an integer).
SCALARS: Mapping[str, frozenset[type]] = {
    name: frozenset(EXACT[name]) for name in ("string", "integer", "number", "boolean")
}
#: What a type may take that the exact types above do not say: 1.0 is an integer in
#: OpenAPI 3.1 (JSON Schema 2020-12). Such a value is left to jsonschema.
UNDECIDED: Mapping[str, frozenset[type]] = {"integer": frozenset({float})}


def _scalar(schema: Any) -> tuple[frozenset[type], str | None] | None:
    """The exact types and the format of a plain scalar schema, or None."""
    if not isinstance(schema, dict) or not schema.keys() <= SCALAR_KEYS:
        return None
    kind, fmt = schema.get("type"), schema.get("format")
    if not isinstance(kind, str) or kind not in SCALARS or not isinstance(fmt, (str, type(None))):
        return None
    return SCALARS[kind], fmt


def _conforms(validator: Any, value: Any, fmt: str | None) -> bool:
    checker = validator.format_checker
    return fmt is None or checker is None or checker.conforms(value, fmt)


def sure(validator: Any, schema: Any, instance: Any) -> bool | None:
    """Whether ``instance`` is valid under ``schema``, when that is certain from one pass;
    None when jsonschema must say."""
    scalar = _scalar(schema)
    if scalar is not None:
        kinds, fmt = scalar
        if type(instance) in kinds:
            return _conforms(validator, instance, fmt)
        wrong = type(instance) in JSON_TYPES
        return False if wrong and type(instance) not in UNDECIDED.get(schema["type"], ()) else None
    if not isinstance(schema, dict) or schema.get("type") != "array":
        return None
    if not schema.keys() <= ARRAY_KEYS:
        return None
    if type(instance) is not list:
        return False if type(instance) in JSON_TYPES else None
    low, high = schema.get("minItems"), schema.get("maxItems")
    if not isinstance(low, (int, type(None))) or not isinstance(high, (int, type(None))):
        return None
    if (low is not None and len(instance) < low) or (high is not None and len(instance) > high):
        return False
    if "items" not in schema:
        return True
    return all_items(validator, schema["items"], instance)


def all_items(validator: Any, items: Any, instance: list[Any]) -> bool | None:
    """Whether every item of ``instance`` is valid under ``items``, when certain."""
    scalar = _scalar(items)
    if scalar is not None:
        kinds, fmt = scalar
        if all(type(x) in kinds for x in instance):
            return all(_conforms(validator, x, fmt) for x in instance) if fmt else True
        undecided = UNDECIDED.get(items["type"], frozenset())
        if any(type(x) in JSON_TYPES and type(x) not in kinds | undecided for x in instance):
            return False
        return None
    found: bool | None = True
    for item in instance:
        verdict = sure(validator, items, item)
        if verdict is False:
            return False
        if verdict is None:
            found = None
    return found


def _items_hold(validator: Any, items: Any, instance: Any, schema: Schema) -> bool:
    """Every item valid for certain: jsonschema's ``items`` would find nothing either."""
    return (
        type(instance) is list
        and "prefixItems" not in schema
        and bool(all_items(validator, items, instance))
    )


def _any_of_holds(validator: Any, branches: Any, instance: Any, schema: Schema) -> bool:
    """A branch valid for certain after branches invalid for certain. In jsonschema's order:
    it stops at the first valid branch, and a branch before it that this module cannot
    decide may raise (an unknown type)."""
    if "discriminator" in schema or not isinstance(branches, list):
        return False
    for branch in branches:
        verdict = sure(validator, branch, instance)
        if verdict is not False:
            return bool(verdict)
    return False


def _one_of_holds(validator: Any, branches: Any, instance: Any, schema: Schema) -> bool:
    """Exactly one branch valid for certain, the others invalid for certain."""
    if "discriminator" in schema or not isinstance(branches, list):
        return False
    verdicts = [sure(validator, branch, instance) for branch in branches]
    return verdicts.count(True) == 1 and verdicts.count(False) == len(verdicts) - 1


def _shortcut(original: Keyword, holds: Callable[[Any, Any, Any, Schema], bool]) -> Keyword:
    """jsonschema's keyword ``original``, skipped where ``holds`` says it finds no error."""

    def keyword(
        validator: Any, value: Any, instance: Any, schema: Schema
    ) -> Iterator[ValidationError]:
        if not holds(validator, value, instance, schema):
            yield from original(validator, value, instance, schema)

    return keyword


def _quick(base: Any) -> Any:
    keywords = base.VALIDATORS
    return extend(
        base,
        {
            "items": _shortcut(keywords["items"], _items_hold),
            "anyOf": _shortcut(keywords["anyOf"], _any_of_holds),
            "oneOf": _shortcut(keywords["oneOf"], _one_of_holds),
        },
    )


QuickOAS30Validator = _quick(OAS30Validator)
QuickOAS31Validator = _quick(OAS31Validator)


def compile_validator(schema: Schema, is_31: bool) -> Any:
    """A compiled validator of ``schema`` in the document's dialect (OpenAPI 3.1 or 3.0)."""
    if is_31:
        return QuickOAS31Validator(schema, format_checker=oas31_format_checker)
    return QuickOAS30Validator(schema, format_checker=oas30_format_checker)
