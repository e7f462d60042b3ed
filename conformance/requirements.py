"""The requirement registry: every check belongs to one requirement with a stable ID.

A check is a plain function of a :class:`Context`. It returns None when the requirement
holds, raises :class:`Violation` when it does not, and raises :class:`Unsupported` when
the target declined a declared feature with a proper 4xx (a CAPABILITY finding, not a
failure). ``applies`` says which exchanges a requirement judges, so every exchange is
judged by every requirement that applies to it: tokens cost money.

Each requirement names the evidence it rests on, and its level follows that evidence
(docs/design.md): a server habit (what OpenAI happens to do) is never a MUST. ``scope`` says
why a requirement cannot apply under a given spec (the spec does not declare the
feature), so a run can report it as not applicable instead of untested.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conformance.case import Case
    from conformance.exchange import Exchange
    from conformance.spec import Spec


class Level(StrEnum):
    """How much a requirement weighs in the verdict (docs/design.md)."""

    MUST = "MUST"
    SHOULD = "SHOULD"
    CAPABILITY = "CAPABILITY"


#: Evidence tiers, strongest first. Only the first three may carry a MUST.
EVIDENCE = ("spec-schema", "spec-text", "client-visible", "server-habit")
MUST_EVIDENCE = frozenset(EVIDENCE[:3])


class Violation(Exception):
    """The requirement does not hold; the message says how.

    ``path`` points at the offending value (``choices[1].logprobs.text_offset[3]``, or
    ``event[4].choices[0].finish_reason`` in a stream); ``expected`` and ``actual`` say
    what was wanted and what came, when a single value shows it.
    """

    def __init__(
        self, message: str, *, path: str | None = None, expected: Any = None, actual: Any = None
    ) -> None:
        super().__init__(message)
        self.path = path
        self.expected = expected
        self.actual = actual


class Unsupported(Exception):
    """The target declined a declared feature properly (4xx with its error envelope)."""


@dataclass(frozen=True, slots=True)
class Context:
    """What a check may look at: the request, the response, the contract, the time.

    ``related`` holds earlier exchanges that a cross-request check compares against
    (the first answer of a stop probe, the non-streamed twin of a stream). ``now`` is the
    time of judging: checks never read the clock themselves, so a recorded exchange is
    judged alike whenever it is replayed (pass the time it was recorded).
    """

    case: Case
    exchange: Exchange
    spec: Spec
    related: tuple[Exchange, ...] = ()
    now: float = field(default_factory=time.time)


Check = Callable[[Context], None]
Predicate = Callable[[Context], bool]
Scope = Callable[["Spec"], "str | None"]


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
    evidence: str = ""
    scope: Scope | None = field(default=None, compare=False, repr=False)

    def not_applicable(self, spec: Spec) -> str | None:
        """Why this requirement cannot apply under ``spec``, or None."""
        return self.scope(spec) if self.scope is not None else None


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
    evidence: str,
    applies: Predicate = always,
    scope: Scope | None = None,
) -> Callable[[Check], Check]:
    """Register the decorated check as the judge of requirement ``id``."""
    if area not in AREAS:
        raise ValueError(f"unknown area {area!r}")
    if evidence not in EVIDENCE:
        raise ValueError(f"{id}: unknown evidence tier {evidence!r} (one of {EVIDENCE})")
    if level is Level.MUST and evidence not in MUST_EVIDENCE:
        raise ValueError(f"{id}: a MUST needs spec or client-visible evidence, not {evidence}")

    def register(check: Check) -> Check:
        known = REGISTRY.get(id)
        # pytester restores sys.modules after an in-process run, so the check modules are
        # imported afresh and register the same functions again: replace them. Two
        # different checks for one ID is a bug.
        if known is not None and (known.check.__module__, known.check.__qualname__) != (
            check.__module__,
            check.__qualname__,
        ):
            raise ValueError(f"requirement {id} registered twice")
        REGISTRY[id] = Requirement(
            id, level, area, statement, source, check, applies, evidence, scope
        )
        return check

    return register


def load_checks() -> None:
    """Import every check module so that its requirements are registered."""
    import conformance.checks  # noqa: F401  (registers on import)
