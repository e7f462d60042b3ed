"""The requirement registry: every check belongs to one requirement with a stable ID.

A check is a plain function of a :class:`Context`. It returns None when the requirement
holds, raises :class:`Violation` when it does not, and raises :class:`Unsupported` when
the target declined a declared feature with a proper 4xx (a CAPABILITY finding, not a
failure). ``applies`` says which exchanges a requirement judges, so every exchange is
judged by every requirement that applies to it: tokens cost money.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conformance.case import Case
    from conformance.exchange import Exchange
    from conformance.spec import Spec


class Level(StrEnum):
    """How much a requirement weighs in the verdict (DESIGN.md)."""

    MUST = "MUST"
    SHOULD = "SHOULD"
    CAPABILITY = "CAPABILITY"


class Violation(Exception):
    """The requirement does not hold; the message says how."""


class Unsupported(Exception):
    """The target declined a declared feature properly (4xx with its error envelope)."""


@dataclass(frozen=True, slots=True)
class Context:
    """What a check may look at: the request, the response, the contract.

    ``related`` holds earlier exchanges that a cross-request check compares against
    (the first answer of a stop probe, the non-streamed twin of a stream).
    """

    case: Case
    exchange: Exchange
    spec: Spec
    related: tuple[Exchange, ...] = ()


Check = Callable[[Context], None]
Predicate = Callable[[Context], bool]


@dataclass(frozen=True, slots=True)
class Requirement:
    """A rule the target must (or should) follow, with the check that judges it."""

    id: str
    level: Level
    area: str
    statement: str
    source: str
    check: Check = field(compare=False, repr=False)
    applies: Predicate = field(compare=False, repr=False)


REGISTRY: dict[str, Requirement] = {}
AREAS = ("transport", "schema", "semantics", "streaming", "errors", "auth", "sdk")


def always(_: Context) -> bool:
    return True


def requirement(
    id: str,
    *,
    level: Level,
    area: str,
    statement: str,
    source: str,
    applies: Predicate = always,
) -> Callable[[Check], Check]:
    """Register the decorated check as the judge of requirement ``id``."""
    if area not in AREAS:
        raise ValueError(f"unknown area {area!r}")

    def register(check: Check) -> Check:
        known = REGISTRY.get(id)
        # A module imported again (pytester restores sys.modules between runs) registers
        # the same function again: replace it. Two different checks for one ID is a bug.
        if known is not None and (known.check.__module__, known.check.__qualname__) != (
            check.__module__,
            check.__qualname__,
        ):
            raise ValueError(f"requirement {id} registered twice")
        REGISTRY[id] = Requirement(id, level, area, statement, source, check, applies)
        return check

    return register


def select(only: Iterable[str] = (), skip: Iterable[str] = ()) -> list[Requirement]:
    """The requirements to run, by ID (``--checks`` / ``--skip-checks``)."""
    load_checks()
    only, skip = set(only), set(skip)
    unknown = (only | skip) - set(REGISTRY)
    if unknown:
        raise KeyError(f"unknown requirement ID(s): {', '.join(sorted(unknown))}")
    return [r for r in REGISTRY.values() if (not only or r.id in only) and r.id not in skip]


def load_checks() -> None:
    """Import every check module so that its requirements are registered."""
    import conformance.checks  # noqa: F401  (registers on import)
