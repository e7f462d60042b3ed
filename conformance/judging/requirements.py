"""The requirement registry: every check belongs to one requirement with a stable ID.

A check is a plain function of a :class:`Context`. It returns None when the requirement
holds, raises :class:`Violation` when it does not, and raises :class:`Unsupported` when
the target declined a declared feature with a proper 4xx (a CAPABILITY finding, not a
failure). ``applies`` says which exchanges a requirement judges, so every exchange is
judged by every requirement that applies to it: tokens cost money.

Each requirement names the evidence it rests on, and its level follows that evidence
(docs/design.md): a server habit (what OpenAI happens to do) is never a MUST. Evidence is per document: a
requirement resting on a document's text or schema says where (``stated``), and which
evidence is left where the judged document is silent (``otherwise``); ``under(spec)`` is
the requirement as that document supports it under the spec's contract
(conformance/judging/document/contract.py): OpenAI's documented meaning of a field the document declares
binds as a MUST under ``openai-compatible``; under ``document``, or for a field the
document does not declare, a MUST whose remaining evidence is the OpenAI contract or a
server habit is a SHOULD. ``why(spec)`` says in one line which of these gave the level. ``scope`` says why a requirement
cannot apply under a given spec (the spec does not declare the feature), so a run can
report it as not applicable instead of untested.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from conformance.judging.document.contract import Contract, binds

if TYPE_CHECKING:
    from conformance.judging.document.spec import Spec
    from conformance.judging.wire.case import Case
    from conformance.judging.wire.exchange import Exchange


class Level(StrEnum):
    """How much a requirement weighs in the verdict (docs/design.md)."""

    MUST = "MUST"
    SHOULD = "SHOULD"
    CAPABILITY = "CAPABILITY"


#: Evidence tiers, strongest first. Only the first three carry a MUST by themselves.
#: ``openai-contract``: OpenAI's API reference states it and the judged document, which
#: reuses OpenAI's field names, says nothing more: a MUST under the ``openai-compatible``
#: contract for a field the document declares (conformance/judging/document/contract.py ``binds``), at most
#: a SHOULD otherwise.
EVIDENCE = ("spec-schema", "spec-text", "client-visible", "openai-contract", "server-habit")
MUST_EVIDENCE = frozenset(EVIDENCE[:3])


class Violation(Exception):
    """The requirement does not hold; the message says how.

    ``path`` points at the offending value (``choices[1].logprobs.text_offset[3]``, or
    ``event[4].choices[0].finish_reason`` in a stream); ``expected`` and ``actual`` say
    what was wanted and what came, when a single value shows it. ``witness`` names the part
    of the answer the finding rests on when another requirement judges that part itself
    (``usage``, ``logprobs``): conformance.judging.verdict.attribution withholds the finding when the target
    is shown to get that witness wrong.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        expected: Any = None,
        actual: Any = None,
        witness: str | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.expected = expected
        self.actual = actual
        self.witness = witness


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
#: Whether a document gives a requirement's evidence (its text says it, its schema has it).
Stated = Callable[["Spec"], bool]


@dataclass(frozen=True, slots=True)
class FieldStated:
    """A ``stated`` about one field: whether the document's text or schema for ``field``
    gives the evidence (``test``). Naming the field lets the contract tell whether the
    document declares it under OpenAI's name (conformance/judging/document/contract.py)."""

    field: str
    test: Stated
    says: str = ""  # what the document's text would have to say, for the catalogue

    def __call__(self, spec: Spec) -> bool:
        return self.test(spec)


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
    stated: Stated | None = field(default=None, compare=False, repr=False)
    otherwise: str = ""
    #: Why it has its level under the judged document (set by ``under``; the reports show it).
    why_level: str = field(default="", compare=False)
    #: The request features (capability-table names: ``logprobs``, ``echo``, ``n``, ...)
    #: that every exchange it judges uses: a target that declines one of them leaves the
    #: requirement nothing to judge, a stated reason (conformance.judging.verdict.decision).
    needs: tuple[str, ...] = ()

    def not_applicable(self, spec: Spec) -> str | None:
        """Why this requirement cannot apply under ``spec``, or None."""
        return self.scope(spec) if self.scope is not None else None

    @property
    def field(self) -> str | None:
        """The field whose meaning the requirement's evidence is about, if one."""
        return self.stated.field if isinstance(self.stated, FieldStated) else None

    def under(self, spec: Spec) -> Requirement:
        """This requirement as ``spec`` supports it under its contract: where the document
        does not give its evidence, the ``otherwise`` evidence, and the level it allows."""
        level, evidence = self._level_under(spec)
        return replace(self, level=level, evidence=evidence, why_level=self.why(spec))

    def _level_under(self, spec: Spec) -> tuple[Level, str]:
        if self.stated is None or self.stated(spec):
            return self.level, self.evidence
        level = self.level
        bound = self.otherwise == "openai-contract" and binds(spec, self.field)
        if level is Level.MUST and self.otherwise not in MUST_EVIDENCE and not bound:
            level = Level.SHOULD
        return level, self.otherwise

    def why(self, spec: Spec) -> str:
        """One line: why the requirement has its level under ``spec`` and its contract."""
        judged, evidence = self._level_under(spec)
        level = judged.value
        words = _EVIDENCE_WORDS.get(evidence, evidence)
        if self.stated is None or self.stated(spec):
            reason = words
        elif evidence != "openai-contract":
            reason = f"the document is silent on it; {words}"
        elif binds(spec, self.field):
            reason = (
                f"the document declares `{self.field}` under OpenAI's name, and the "
                "openai-compatible contract binds OpenAI's documented meaning"
            )
        elif spec.contract is Contract.DOCUMENT:
            reason = f"{words}; the document contract holds the target to the document alone"
        else:
            reason = f"{words}; the document does not declare `{self.field}` with OpenAI's type"
        if self.level is not Level.MUST:
            reason += f" (a {self.level.value} wherever it is judged)"
        return f"{level}: {reason}"


_EVIDENCE_WORDS = {
    "spec-schema": "the document's schema says it",
    "spec-text": "the document's text says it",
    "client-visible": "the openai SDK or a widely used client breaks or misreads",
    "openai-contract": "OpenAI's API reference says it",
    "server-habit": "what OpenAI's server happens to do",
}

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
    stated: Stated | None = None,
    otherwise: str = "",
    needs: tuple[str, ...] = (),
) -> Callable[[Check], Check]:
    """Register the decorated check as the judge of requirement ``id``.

    ``needs``: the request features (capability names) every exchange it judges uses.

    ``stated`` and ``otherwise`` go together: where the judged document does not give
    ``evidence`` (``stated(spec)`` is false), the requirement rests on ``otherwise``.
    """
    if area not in AREAS:
        raise ValueError(f"unknown area {area!r}")
    if (stated is None) != (not otherwise):
        raise ValueError(f"{id}: stated and otherwise go together")
    for tier in (evidence, otherwise) if stated else (evidence,):
        if tier not in EVIDENCE:
            raise ValueError(f"{id}: unknown evidence tier {tier!r} (one of {EVIDENCE})")
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
            id, level, area, statement, source, check, applies, evidence, scope, stated,
            otherwise, needs=needs,
        )  # fmt: skip
        return check

    return register
