"""The run's verdict: its word, its reasons and its coverage, typed (``Verdict``).

conformance.judging.verdict.decision decides it, once, from the tallies and the typed run record
(``decide``); ``Results.verdict`` keeps it, and results.json writes it in ``meta``
(``verdict``, ``verdict_reasons``, ``coverage``, ``not_run``), read back typed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from conformance.judging.requirements import Level
from conformance.judging.verdict.outcomes import EXIT_CODES, Word


@dataclass(frozen=True, slots=True)
class Uncovered:
    """A MUST requirement that ended neither passed nor failed, and why."""

    id: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "reason": self.reason}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Uncovered:
        return cls(str(data.get("id", "")), str(data.get("reason", "")))


@dataclass(frozen=True, slots=True)
class Coverage:
    """The MUSTs untested, not applicable, and deselected (results.json ``meta.coverage``)."""

    untested: tuple[Uncovered, ...] = ()
    not_applicable: tuple[Uncovered, ...] = ()
    deselected: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "untested": [u.to_json() for u in self.untested],
            "not_applicable": [u.to_json() for u in self.not_applicable],
            "deselected": list(self.deselected),
        }

    @classmethod
    def from_json(cls, data: Any) -> Coverage:
        if not isinstance(data, Mapping):
            return cls()

        def pairs(key: str) -> tuple[Uncovered, ...]:
            entries = data.get(key)
            if not isinstance(entries, list):
                return ()
            return tuple(Uncovered.from_json(e) for e in entries if isinstance(e, Mapping))

        return cls(
            pairs("untested"),
            pairs("not_applicable"),
            tuple(str(d) for d in data.get("deselected") or []),
        )


@dataclass(frozen=True, slots=True)
class Verdict:
    """The run's word, why, the failed requirements and the coverage.

    ``unrun``: the scenario items not run (or cut short) for a reason a pass cannot excuse,
    as ``(item, cause, reason)``. ``failed`` is not written to results.json (the tallies
    say it): a verdict read back has none.
    """

    word: Word
    reasons: tuple[str, ...] = ()
    failed: tuple[tuple[str, int, int], ...] = ()  # (requirement, failed, checked)
    coverage: Coverage = field(default_factory=Coverage)
    unrun: tuple[tuple[str, str, str], ...] = ()

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.word]

    def to_json(self) -> dict[str, Any]:
        """The verdict's keys of results.json's ``meta`` (run_info.VERDICT_KEYS)."""
        return {
            "verdict": self.word.value,
            "verdict_reasons": list(self.reasons),
            "coverage": self.coverage.to_json(),
            "not_run": [{"scenario": s, "cause": c, "reason": r} for s, c, r in self.unrun],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Verdict | None:
        """The verdict a results.json recorded (None when it recorded none, or a word no
        longer produced: ``decide`` stands in)."""
        try:
            word = Word(str(data.get("verdict")))
        except ValueError:
            return None
        return cls(
            word,
            tuple(str(r) for r in data.get("verdict_reasons") or ()),
            coverage=Coverage.from_json(data.get("coverage")),
            unrun=tuple(
                (str(e.get("scenario", "")), str(e.get("cause", "")), str(e.get("reason", "")))
                for e in data.get("not_run") or ()
                if isinstance(e, Mapping)
            ),
        )


def deciding_levels(*, strict: bool) -> frozenset[str]:
    """The levels whose failures fail the run (SHOULD too under ``--strict-should``)."""
    return frozenset({Level.MUST.value} | ({Level.SHOULD.value} if strict else set()))
