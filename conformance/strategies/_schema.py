"""Reading the request schema: alternatives, JSON types, bounds, and what it accepts.

Everything the strategies know about a vendor comes through here, so that two specs
differ in what they generate without a line of per-vendor code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from conformance.judging.document.oracle import (
    alternatives,
    declared_default,
    request_schema_errors,
)
from conformance.judging.document.spec import Spec

Schema = Mapping[str, Any]

# Integer formats bound a value as surely as `minimum`/`maximum` do (OpenAPI formats).
INT_FORMATS = {
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
# What a generic draft-2020 `type` accepts, as Python types (bool is not a number here).
_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}


def types_of(schema: Schema) -> set[str]:
    """The ``type`` names one leaf declares (a 3.1 list or a single name)."""
    declared = schema.get("type")
    if isinstance(declared, list):
        return {str(t) for t in declared}
    return {str(declared)} if declared else set()


def json_type(value: Any) -> str:
    """The JSON type name of a Python value decoded from JSON."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    for name, kinds in _PY_TYPES.items():
        if isinstance(value, kinds):
            return name
    raise TypeError(f"not a JSON value: {value!r}")


def leaf_of_type(schema: Any, *names: str) -> Schema | None:
    """The first leaf alternative whose type is one of ``names``."""
    for leaf in alternatives(schema):
        if types_of(leaf) & set(names):
            return leaf
    return None


@dataclass(frozen=True, slots=True)
class Interval:
    """Numeric bounds as a schema states them; None where it states none."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def closed_ints(self, low: int, high: int) -> tuple[int, int]:
        """The closed integer range inside these bounds and inside [low, high]."""
        if self.low is not None:
            low = max(low, math.floor(self.low) + 1 if self.low_open else math.ceil(self.low))
        if self.high is not None:
            high = min(high, math.ceil(self.high) - 1 if self.high_open else math.floor(self.high))
        return low, high

    def with_defaults(self, low: float, high: float) -> Interval:
        """These bounds, with ``low``/``high`` where the schema states none."""
        # A default end never crosses a stated one (a spec's minimum 3 above OpenAI's 2).
        lo = min(low, self.high) if self.low is None and self.high is not None else low
        hi = max(high, self.low) if self.high is None and self.low is not None else high
        return Interval(
            lo if self.low is None else self.low,
            hi if self.high is None else self.high,
            self.low_open and self.low is not None,
            self.high_open and self.high is not None,
        )


def interval(schema: Any, *, formats: bool = False) -> Interval:
    """The numeric bounds of the first integer or number alternative of ``schema``.

    With ``formats``, an integer format (int32, int64) bounds the value too.
    """
    leaf = leaf_of_type(schema, "integer", "number")
    if leaf is None:
        return Interval()
    low, high = leaf.get("minimum"), leaf.get("maximum")
    low_open = high_open = False
    ex_low, ex_high = leaf.get("exclusiveMinimum"), leaf.get("exclusiveMaximum")
    # OpenAPI 3.0 spells exclusivity as booleans beside minimum/maximum, 3.1 as numbers.
    if ex_low is True:
        low_open = True
    elif isinstance(ex_low, int | float) and not isinstance(ex_low, bool):
        low, low_open = ex_low, True
    if ex_high is True:
        high_open = True
    elif isinstance(ex_high, int | float) and not isinstance(ex_high, bool):
        high, high_open = ex_high, True
    fmt = INT_FORMATS.get(str(leaf.get("format", "")))
    if formats and fmt is not None and "integer" in types_of(leaf):
        low = fmt[0] if low is None else max(low, fmt[0])
        high = fmt[1] if high is None else min(high, fmt[1])
    return Interval(low, high, low_open, high_open)


def array_bounds(schema: Any) -> tuple[int | None, int | None]:
    """``minItems``/``maxItems`` of the first array alternative of ``schema``."""
    leaf = leaf_of_type(schema, "array")
    if leaf is None:
        return None, None
    return leaf.get("minItems"), leaf.get("maxItems")


def example(schema: Any, index: int = 0) -> Any:
    """A small value of ``schema``'s first non-null alternative (``index`` varies strings)."""
    leaves = [leaf for leaf in alternatives(schema) if types_of(leaf) != {"null"}]
    if not leaves:
        return None
    leaf = leaves[0]
    kinds = types_of(leaf)
    if leaf.get("enum"):
        return leaf["enum"][0]
    if "string" in kinds:
        word = ("end", "stop", "halt", "done", "over", "fin")[index % 6]
        low, high = leaf.get("minLength"), leaf.get("maxLength")
        word = word[:high] if isinstance(high, int) else word
        return word.ljust(low, "x") if isinstance(low, int) else word
    if kinds & {"integer", "number"}:
        low, high = interval(leaf).closed_ints(-1_000_000, 1_000_000)
        return min(max(1, low), high)
    if "boolean" in kinds:
        return False
    if "array" in kinds:
        min_items, _ = array_bounds(leaf)
        return [example(leaf.get("items"), i) for i in range(max(min_items or 0, 1))]
    if "object" in kinds:
        props = leaf.get("properties") or {}
        return {name: example(props.get(name)) for name in leaf.get("required") or ()}
    return None


class SchemaView:
    """The request schema of one Spec, asked about its properties."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.properties: dict[str, Any] = dict(spec.request_properties)
        self.required: tuple[str, ...] = tuple(spec.request_schema.get("required") or ())

    def declares(self, name: str) -> bool:
        """Whether the request schema declares the property ``name``."""
        return name in self.properties

    def errors(self, body: Any) -> list[Any]:
        """The validation errors of a whole body (none without a request schema)."""
        return request_schema_errors(self.spec, body)

    def accepts(self, name: str, value: Any, **context: Any) -> bool:
        """Whether ``value`` is a valid ``name`` (errors elsewhere in the body ignored)."""
        if not self.declares(name):
            return False
        body = {"model": "m", "prompt": "x", **context, name: value}
        return not any(e.path and e.path[0] == name for e in self.errors(body))

    def default(self, name: str) -> Any:
        """The ``default`` the schema declares for ``name`` (first alternative that has one)."""
        return declared_default(self.properties.get(name))

    def interval(self, name: str, *, formats: bool = False) -> Interval:
        """The bounds the schema states for property ``name``."""
        return interval(self.properties.get(name), formats=formats)

    def array_bounds(self, name: str) -> tuple[int | None, int | None]:
        """``minItems``/``maxItems`` of property ``name``'s array alternative."""
        return array_bounds(self.properties.get(name))


@lru_cache(maxsize=16)
def view_of(spec: Spec) -> SchemaView:
    """The (cached) SchemaView of ``spec``: rule checks ask for it on every Case."""
    return SchemaView(spec)
