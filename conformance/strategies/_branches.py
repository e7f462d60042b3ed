"""Values drawn from one schema branch, within the run's cost caps.

Every alternative of a request field (each prompt form, the stop string and stop list,
suffix, user, ...) is read for its own lengths, item counts, item bounds, enums, patterns
and integer formats, and a strategy draws from exactly that branch. The run's caps (text
length, list length, vocabulary) narrow the branch where they can; where a branch
demands more than a cap allows (``minLength: 50`` against a 24-character cap), the
branch wins: a form the spec allows is always generated.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from hypothesis import strategies as st

from conformance.judging.document.oracle import alternatives
from conformance.strategies._schema import interval, types_of

# Longest string a branch may force on us (beyond a cap) before it is not drawn at all.
MAX_FORCED_LENGTH = 4096
PROMPT_FORMS = ("string", "strings", "tokens", "token-lists")
CHARACTERS = st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Cn", "Co"))


@dataclass(frozen=True, slots=True)
class Caps:
    """The run's cost caps for one field: text length, list length, token ids."""

    text: int = 24
    items: int = 3
    inner_items: int = 8
    ids: tuple[int, int] = (0, 999)
    # Preferred texts (plain sentences, common stops): drawn often where they fit.
    samples: tuple[str, ...] = ()
    non_empty: bool = True


@dataclass(frozen=True, slots=True)
class Branch:
    """One leaf alternative of a request field, hashable (its schema as JSON)."""

    form: str
    schema_json: str

    @property
    def schema(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.schema_json)
        return loaded


def form_of(leaf: Mapping[str, Any]) -> str | None:
    """The prompt form of one branch: string, strings, tokens, token-lists (None: other)."""
    kinds = types_of(leaf)
    if "string" in kinds:
        return "string"
    if "array" not in kinds:
        return None
    items = leaf.get("items")
    if not isinstance(items, Mapping):
        return None
    inner = {t for alt in alternatives(items) for t in types_of(alt)}
    if "string" in inner:
        return "strings"
    if "integer" in inner:
        return "tokens"
    if "array" in inner:
        nested = [alt.get("items") for alt in alternatives(items) if "array" in types_of(alt)]
        if any(
            isinstance(n, Mapping)
            and "integer" in {t for a in alternatives(n) for t in types_of(a)}
            for n in nested
        ):
            return "token-lists"
    return None


def branches(schema: Any) -> tuple[Branch, ...]:
    """The non-null leaf alternatives of ``schema``, with their prompt form (or JSON type)."""
    out = []
    for leaf in alternatives(schema):
        kinds = types_of(leaf)
        if kinds == {"null"} or (not kinds and not leaf.get("enum")):
            continue
        form = form_of(leaf) or "/".join(sorted(kinds)) or "enum"
        out.append(Branch(form, json.dumps(leaf, sort_keys=True)))
    return tuple(out)


def fit(low: int, high: int | None, cap_low: int, cap_high: int) -> tuple[int, int] | None:
    """[low, high] narrowed to [cap_low, cap_high]; the branch's own end when they miss."""
    top = high if high is not None else max(low, cap_high)
    if low > top:
        return None
    lo, hi = max(low, cap_low), min(top, cap_high)
    if lo <= hi:
        return lo, hi
    # The caps leave nothing: keep the branch's end nearest to them.
    nearest = low if low > cap_high else top
    return nearest, nearest


def length_range(leaf: Mapping[str, Any], caps: Caps) -> tuple[int, int] | None:
    """The string lengths to draw for ``leaf``, or None when it forces too much."""
    low = int(leaf.get("minLength") or 0)
    high = leaf.get("maxLength")
    found = fit(low, None if high is None else int(high), 1 if caps.non_empty else 0, caps.text)
    if found is None or found[0] > MAX_FORCED_LENGTH:
        return None
    return found


def item_range(leaf: Mapping[str, Any], cap: int, non_empty: bool) -> tuple[int, int] | None:
    high = leaf.get("maxItems")
    return fit(
        int(leaf.get("minItems") or 0), None if high is None else int(high), int(non_empty), cap
    )


def int_range(leaf: Mapping[str, Any], cap: tuple[int, int]) -> tuple[int, int] | None:
    """The integers to draw for ``leaf`` (formats bound too), narrowed to ``cap``."""
    bounds = interval(leaf, formats=True)
    low, high = bounds.closed_ints(-(2**63), 2**63 - 1)
    if low > high:
        return None
    return fit(low, high, *cap)


def _text(leaf: Mapping[str, Any], caps: Caps) -> st.SearchStrategy[Any] | None:
    if leaf.get("enum"):
        listed: list[Any] = [v for v in leaf["enum"] if isinstance(v, str)]
        return st.sampled_from(listed or [None])
    if isinstance(leaf.get("pattern"), str):
        try:
            return st.from_regex(leaf["pattern"], fullmatch=True)
        except Exception:  # an ECMA regex Python cannot read: no draw from this branch
            return None
    found = length_range(leaf, caps)
    if found is None:
        return None
    lo, hi = found
    drawn = st.text(CHARACTERS, min_size=lo, max_size=hi)
    fitting = [s for s in caps.samples if lo <= len(s) <= hi]
    return st.one_of(st.sampled_from(fitting), drawn) if fitting else drawn


def _integer(leaf: Mapping[str, Any], cap: tuple[int, int]) -> st.SearchStrategy[Any] | None:
    if leaf.get("enum"):
        return st.sampled_from(leaf["enum"])
    found = int_range(leaf, cap)
    return None if found is None else st.integers(*found)


def value_strategy(schema: Any, caps: Caps, *, depth: int = 0) -> st.SearchStrategy[Any] | None:
    """Values of one branch (or any branch of ``schema``), None if none can be drawn."""
    options = []
    for leaf in alternatives(schema):
        kinds = types_of(leaf)
        drawn: st.SearchStrategy[Any] | None = None
        if kinds == {"null"}:
            continue
        if "string" in kinds:
            drawn = _text(leaf, caps)
        elif "integer" in kinds:
            drawn = _integer(leaf, caps.ids)
        elif "array" in kinds:
            cap = caps.items if depth == 0 else caps.inner_items
            counts = item_range(leaf, cap, caps.non_empty)
            items = value_strategy(leaf.get("items") or {}, caps, depth=depth + 1)
            if counts is not None and items is not None:
                drawn = st.lists(items, min_size=counts[0], max_size=counts[1])
            elif counts == (0, 0) or (counts is not None and counts[0] == 0):
                drawn = st.just([])
        elif "boolean" in kinds:
            drawn = st.booleans()
        if drawn is not None:
            options.append(drawn)
    return st.one_of(options) if options else None


@lru_cache(maxsize=512)
def branch_values(branch: Branch, caps: Caps) -> st.SearchStrategy[Any] | None:
    """The (cached) strategy of one branch under ``caps``."""
    return value_strategy(branch.schema, caps)


def smallest(branch: Branch, caps: Caps) -> Any:
    """The shortest, lowest value of a branch within caps (an edge)."""
    return _end(branch.schema, caps, low=True, depth=0)


def largest(branch: Branch, caps: Caps) -> Any:
    """The longest, highest value of a branch within caps (an edge)."""
    return _end(branch.schema, caps, low=False, depth=0)


def _end(leaf: Mapping[str, Any], caps: Caps, *, low: bool, depth: int) -> Any:
    kinds = types_of(leaf)
    if leaf.get("enum"):
        return leaf["enum"][0 if low else -1]
    if "string" in kinds:
        found = length_range(leaf, caps)
        if found is None:
            return None
        size = found[0] if low else found[1]
        base = next((s for s in caps.samples if len(s) == size), None)
        return base if base is not None else ("Say hi " * size)[:size] if size else ""
    if "integer" in kinds:
        ints = int_range(leaf, caps.ids)
        return None if ints is None else ints[0 if low else 1]
    if "array" in kinds:
        cap = caps.items if depth == 0 else caps.inner_items
        counts = item_range(leaf, cap, caps.non_empty)
        item = leaf.get("items")
        if counts is None or not isinstance(item, Mapping):
            return None
        leaf_item = next(iter(alternatives(item)), {})
        value = _end(leaf_item, caps, low=low, depth=depth + 1)
        if value is None:
            return None
        return [value] * (counts[0] if low else counts[1])
    return None


def bounded_ints_of(schema: Any, cap: tuple[int, int]) -> tuple[int, int] | None:
    """The first integer branch's range (formats included) narrowed to ``cap``."""
    for leaf in alternatives(schema):
        if "integer" in types_of(leaf):
            return int_range(leaf, cap)
    return None
