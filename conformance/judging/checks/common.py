"""Predicates, scopes and small helpers shared by the check modules."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeGuard

from conformance.judging.document import sure_valid
from conformance.judging.document.contract import properties_named, schemas_of
from conformance.judging.requirements import Context, FieldStated, Violation

if TYPE_CHECKING:
    from conformance.judging.document.spec import Spec

# The earliest plausible `created`: before it, the value is not a Unix time in seconds.
EARLIEST_CREATED = 1_577_836_800  # 2020-01-01T00:00:00Z


def answered(ctx: Context) -> bool:
    """The target sent a status line."""
    return ctx.exchange.status is not None


def completion(ctx: Context) -> bool:
    """A non-streamed 200 whose body is a JSON object: the completion checks apply."""
    ex = ctx.exchange
    # An invalid request answered 200 is INVALID-REJECTED's finding; judging what was
    # generated for a request that should not have been served would only echo it.
    valid = ctx.case.mode != "invalid"
    return valid and ex.status == 200 and not ctx.case.stream and isinstance(ex.json, dict)


def streamed_200(ctx: Context) -> bool:
    """A 200 answer to a streamed, valid request (see ``completion``)."""
    return ctx.exchange.status == 200 and ctx.case.stream and ctx.case.mode != "invalid"


def choices_of(body: Any) -> list[dict[str, Any]]:
    """The choice objects of a body, skipping anything that is not an object."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list):
        return []
    return [c for c in choices if isinstance(c, dict)]


def is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> TypeGuard[int | float]:
    """A finite JSON number (not a bool, not NaN or an infinity)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return not isinstance(value, float) or math.isfinite(value)


def list_or_none(value: Any) -> list[Any] | None:
    return value if isinstance(value, list) else None


def media_matches(media_type: str, declared: tuple[str, ...]) -> bool:
    """Declared media types match with or without their parameters (erratum nscale-charset)."""
    return any(media_type == d.split(";", 1)[0].strip().lower() for d in declared)


def declares(*params: str) -> Callable[[Spec], str | None]:
    """A requirement scope: not applicable when the spec declares none of ``params``."""

    def scope(spec: Spec) -> str | None:
        if any(p in spec.request_properties for p in params):
            return None
        return f"the spec declares no {' or '.join(params)} request parameter"

    return scope


def says(name: str, words: str) -> FieldStated:
    """A requirement's ``stated``: the document's text for property ``name`` (its
    description, its referenced schema's description) says ``words`` (a regex)."""
    pattern = re.compile(words, re.I | re.S)

    def stated(spec: Spec) -> bool:
        texts = (json.dumps(p) for s in schemas_of(spec) for p in properties_named(s, name))
        return any(pattern.search(text) for text in texts)

    return FieldStated(name, stated, f"its text for `{name}` says /{words}/")


def constrains(name: str) -> FieldStated:
    """A requirement's ``stated``: the document's response schemas pin property ``name``
    to given values (``enum`` or ``const``), not only to a type."""

    def stated(spec: Spec) -> bool:
        props = [p for s in schemas_of(spec)[1:] for p in properties_named(s, name)]
        return any("enum" in node or "const" in node for p in props for node in _nodes_of(p))

    return FieldStated(name, stated, f"its schema pins `{name}` to given values")


def _nodes_of(node: Any) -> list[dict[str, Any]]:
    """``node`` and the branches of its combinators (``anyOf``, ``oneOf``, ``allOf``)."""
    out: list[dict[str, Any]] = []
    todo = [node]
    while todo:
        item = todo.pop()
        if isinstance(item, list):
            todo.extend(item)
        elif isinstance(item, dict):
            out.append(item)
            todo.extend(item.get(k, []) for k in ("anyOf", "oneOf", "allOf"))
    return out


def error_path(error: Any) -> list[Any]:
    """Where a schema error is, down to the missing property of a ``required`` error."""
    path = list(error.absolute_path)
    if error.validator == "required" and isinstance(error.instance, dict):
        missing = [p for p in error.validator_value or () if p not in error.instance]
        if len(missing) == 1:
            path.append(missing[0])
    return path


def schema_rejects(spec: Spec, kind: str, instance: Any, field: str) -> bool:
    """The document's own ``kind`` schema rejects ``instance[field]`` (missing where it is
    required, or of the wrong type): that is the schema requirement's finding (RESP-SCHEMA,
    STREAM-CHUNK-SCHEMA), at the level the schema gives it, and not a second one. Where the
    document says nothing of the field, the semantic requirement keeps it."""
    validator = spec.validators[kind]
    if validator is None:
        return False
    return any(error_path(e) == [field] for e in sure_valid.iter_errors(validator, instance))


def schema_owns(ctx: Context, kind: str, body: Any, field: str) -> bool:
    """``body[field]`` is missing or of a type the semantic check cannot read, and the
    document's schema rejects it: the schema requirement's finding (see schema_rejects)."""
    value = body.get(field) if isinstance(body, dict) else None
    readable = isinstance(value, str) if field == "id" else is_int(value)
    return not readable and schema_rejects(ctx.spec, kind, body, field)


def check_object(body: dict[str, Any], where: str = "") -> None:
    if body.get("object") != "text_completion":
        raise Violation(
            f'{where}object is {body.get("object")!r}, expected "text_completion"',
            path=f"{where}object",
            expected="text_completion",
            actual=body.get("object"),
        )


def check_created(body: dict[str, Any], now: float, where: str = "") -> None:
    created = body.get("created")
    path = f"{where}created"
    if not is_int(created):
        raise Violation(f"{path} is {created!r}, not an integer Unix time", path=path)
    latest = now + 86_400
    if created > latest * 100:
        # datetime.fromtimestamp(created) raises here ("year is out of range"): a client
        # that shows the time breaks.
        raise Violation(f"{path} is {created}: milliseconds, not seconds", path=path)
    if not EARLIEST_CREATED <= created <= latest:
        raise Violation(f"{path} is {created}: not a plausible Unix time in seconds", path=path)


def check_id(body: dict[str, Any], where: str = "") -> None:
    value = body.get("id")
    if not isinstance(value, str) or not value.strip():
        raise Violation(
            f"{where}id is {value!r}, expected a non-empty string", path=f"{where}id", actual=value
        )
