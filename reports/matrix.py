"""The comparison of several runs: requirement × target, capabilities side by side, scores.

Pure data, no I/O and no markup: ``conformance.reports.compare`` loads the runs and renders this as
HTML or Markdown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conformance.judging.results import Capability, Results, Spent, Tally, latency_summary
from conformance.judging.run_info import BaselineDiff, RunInfo
from conformance.judging.verdict import Coverage
from conformance.reports.summary import (
    ERROR,
    FAILED,
    NOT_TESTED,
    PASSED,
    UNSUPPORTED,
    WARNED,
    Offered,
    Score,
    area_rank,
    coverage_of,
    is_strict,
    offered_of,
    scores,
    status_of,
    verdict_of,
)

# The four cells of the matrix.
PASS = "pass"
FAIL = "fail"
MISSING = "unsupported"  # capability missing: declined with a proper 4xx
UNTESTED = "not tested"
SUITE_ERROR = "suite error"  # the check raised: a defect of the suite, not of the target

_CELL = {
    PASSED: PASS,
    FAILED: FAIL,
    WARNED: FAIL,
    UNSUPPORTED: MISSING,
    NOT_TESTED: UNTESTED,
    ERROR: SUITE_ERROR,
}


@dataclass(frozen=True, slots=True)
class Cell:
    """How one target fared on one requirement."""

    outcome: str  # PASS | FAIL | MISSING | UNTESTED | SUITE_ERROR
    failed: int = 0
    checked: int = 0
    distinct: int = 0  # distinct failure fingerprints

    @property
    def detail(self) -> str:
        """``3/40, 2 distinct`` failed exchanges for a failure, empty otherwise."""
        if self.outcome != FAIL:
            return ""
        text = f"{self.failed}/{self.checked}"
        return text + (f", {self.distinct} distinct" if self.distinct > 1 else "")


@dataclass(frozen=True, slots=True)
class Offer:
    """How one target treated one probed feature: offered, declined, ignored or broken."""

    outcome: str  # empty when the feature was not probed in that run
    detail: str = ""


def offer(entry: Capability | None) -> Offer:
    """The :class:`Offer` of one capability-table entry (None: not probed)."""
    if entry is None:
        return Offer("")
    return Offer(entry.outcome, entry.detail)


@dataclass(frozen=True, slots=True)
class Row:
    """One requirement across every target."""

    id: str
    level: str
    area: str
    statement: str
    cells: tuple[Cell, ...]


@dataclass(frozen=True, slots=True)
class Target:
    """One compared run: its name, verdict, scores and context."""

    name: str
    verdict: str
    scores: dict[str, Score]
    offered: Offered  # the capability figure, from the capability table
    info: RunInfo
    spent: Spent
    baseline: BaselineDiff | None
    coverage: Coverage
    latency: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Comparison:
    """Everything the comparison reports show."""

    targets: tuple[Target, ...]
    rows: tuple[Row, ...]
    capabilities: tuple[tuple[str, tuple[Offer, ...]], ...]


def _cell(tally: Tally | None, *, strict: bool) -> Cell:
    if tally is None:
        return Cell(UNTESTED)
    status = status_of(tally, strict=strict)
    return Cell(_CELL[status], tally.failed, tally.checked, len(tally.fingerprints))


def _describing(runs: list[Results], rid: str) -> Tally:
    """The first run that knows requirement ``rid`` describes it (level, area, statement)."""
    return next(r.tallies[rid] for r in runs if rid in r.tallies)


def compare(runs: list[tuple[str, Results]]) -> Comparison:
    """The comparison of ``runs``, each given with the name to show for it."""
    results = [r for _, r in runs]
    ids = list(dict.fromkeys(rid for r in results for rid in r.tallies))
    ids.sort(key=lambda rid: area_rank(_describing(results, rid).area))
    rows = []
    for rid in ids:
        about = _describing(results, rid)
        cells = tuple(_cell(r.tallies.get(rid), strict=is_strict(r)) for r in results)
        rows.append(Row(rid, about.level, about.area, about.statement, cells))
    features = sorted({f for r in results for f in r.capabilities})
    capabilities = tuple(
        (feature, tuple(offer(r.capabilities.get(feature)) for r in results))
        for feature in features
    )
    targets = tuple(
        Target(
            name=name,
            verdict=verdict_of(r).word,
            scores=scores(r),
            offered=offered_of(r),
            info=r.info,
            spent=r.spent,
            baseline=r.info.baseline,
            coverage=coverage_of(r),
            latency=latency_summary(r.latency, r.info.concurrency),
        )
        for name, r in runs
    )
    return Comparison(targets, tuple(rows), capabilities)
