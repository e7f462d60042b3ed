"""Predicates and small helpers shared by the check modules."""

from __future__ import annotations

import time
from typing import Any, TypeGuard

from conformance.requirements import Context, Violation

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


def choices_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The choice objects of a body, skipping anything that is not an object."""
    choices = body.get("choices")
    if not isinstance(choices, list):
        return []
    return [c for c in choices if isinstance(c, dict)]


def is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def check_object(body: dict[str, Any]) -> None:
    if body.get("object") != "text_completion":
        raise Violation(f'object is {body.get("object")!r}, expected "text_completion"')


def check_created(body: dict[str, Any], now: float | None = None) -> None:
    created = body.get("created")
    if not is_int(created):
        raise Violation(f"created is {created!r}, not an integer Unix time")
    latest = (now or time.time()) + 86_400
    if created > latest * 100:
        raise Violation(f"created is {created}: milliseconds, not seconds")
    if not EARLIEST_CREATED <= created <= latest:
        raise Violation(f"created is {created}: not a plausible Unix time in seconds")


def check_id(body: dict[str, Any]) -> None:
    value = body.get("id")
    if not isinstance(value, str) or not value.strip():
        raise Violation(f"id is {value!r}, expected a non-empty string")
