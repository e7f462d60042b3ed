"""The comparison of several runs: requirement × target, capabilities side by side, scores.

Pure data, no I/O and no markup: ``reports.compare`` loads the runs and renders this as
HTML or Markdown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conformance.results import Results, Tally
from reports.summary import (
    FAILED,
    NOT_TESTED,
    OUTCOMES,
    PASSED,
    UNSUPPORTED,
    WARNED,
    Score,
    area_rank,
    capability_verdict,
    is_strict,
    scores,
    status_of,
    verdict_of,
)

# The four cells of the matrix.
PASS = "pass"
FAIL = "fail"
MISSING = "unsupported"  # capability missing: declined with a proper 4xx
UNTESTED = "not tested"

_CELL = {PASSED: PASS, FAILED: FAIL, WARNED: FAIL, UNSUPPORTED: MISSING, NOT_TESTED: UNTESTED}


@dataclass(frozen=True, slots=True)
class Cell:
    """How one target fared on one requirement."""

    outcome: str  # PASS | FAIL | MISSING | UNTESTED
    failed: int = 0
    checked: int = 0

    @property
    def detail(self) -> str:
        """``3/40`` failed exchanges for a failure, empty otherwise."""
        return f"{self.failed}/{self.checked}" if self.outcome == FAIL else ""


@dataclass(frozen=True, slots=True)
class Offer:
    """How one target treated one declared feature: a verdict and the non-zero counts."""

    verdict: str
    counts: tuple[tuple[str, int], ...] = ()

    @property
    def mixed(self) -> bool:
        """Whether the target treated the feature in more than one way."""
        return len(self.counts) > 1


def offer(counts: dict[str, int]) -> Offer:
    """The :class:`Offer` of a ``{outcome: count}`` mapping, outcomes in a fixed order."""
    shown = tuple((k, counts[k]) for k in OUTCOMES if counts.get(k))
    return Offer(capability_verdict(counts), shown)


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
    meta: dict[str, Any]
    spent: dict[str, float]
    baseline: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class Comparison:
    """Everything the comparison reports show."""

    targets: tuple[Target, ...]
    rows: tuple[Row, ...]
    capabilities: tuple[tuple[str, tuple[Offer, ...]], ...]


def _cell(tally: Tally | None, *, strict: bool) -> Cell:
    if tally is None:
        return Cell(UNTESTED)
    return Cell(_CELL[status_of(tally, strict=strict)], tally.failed, tally.checked)


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
        (feature, tuple(offer(r.capabilities.get(feature, {})) for r in results))
        for feature in features
    )
    targets = tuple(
        Target(
            name=name,
            verdict=verdict_of(r),
            scores=scores(r),
            meta=r.meta,
            spent=r.spent,
            baseline=r.meta.get("baseline") or None,
        )
        for name, r in runs
    )
    return Comparison(targets, tuple(rows), capabilities)
