"""The comparison of several runs: requirement × target, capabilities side by side, scores.

Pure data, no I/O and no markup: ``conformance.front.compare`` loads the runs, and
``reports/html.py`` and ``reports/markdown.py`` render this as HTML or Markdown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from conformance.judging.requirements import Level
from conformance.judging.verdict.latency import LatencySummary
from conformance.judging.verdict.results import (
    Capability,
    CapabilityOutcome,
    Results,
    Spent,
    Tally,
)
from conformance.judging.verdict.run_info import BaselineDiff, RunInfo
from conformance.judging.verdict.verdict import Coverage
from conformance.reports.summary import (
    ERROR,
    FAILED,
    NOT_APPLICABLE,
    NOT_TESTED,
    PASSED,
    UNSUPPORTED,
    WARNED,
    Offered,
    Score,
    area_rank,
    coverage_of,
    is_strict,
    not_applicable_reason,
    offered_of,
    scores,
    status_of,
    verdict_of,
)

# The cells of the matrix.
PASS = "pass"
FAIL = "fail"
MISSING = "unsupported"  # capability missing: declined with a proper 4xx
UNTESTED = "not tested"
NOT_APPLIES = "not applicable"  # a MUST with a stated reason (Cell.reason) not to apply
DESELECTED = "deselected"  # left out by --checks / --skip-checks
SUITE_ERROR = "suite error"  # the check raised: a defect of the suite, not of the target

#: What every comparison says of its scores (HTML and Markdown alike).
SCORES_LEGEND = (
    "A score is the share of the requirements of that level that were tested (at least one "
    "exchange judged) and held on every exchange judged; one failing exchange fails the "
    "requirement. Compare scores together with their denominators: runs that tested (or "
    "probed) different requirements (or features) are not directly comparable."
)
#: What the comparison says when its runs differ in what was sent or judged.
DIFFER_LEGEND = (
    "These runs differ in what was sent or judged: their scores and cells are not directly "
    "comparable."
)

_CELL = {
    PASSED: PASS,
    FAILED: FAIL,
    WARNED: FAIL,
    UNSUPPORTED: MISSING,
    NOT_TESTED: UNTESTED,
    NOT_APPLICABLE: NOT_APPLIES,
    ERROR: SUITE_ERROR,
}


@dataclass(frozen=True, slots=True)
class Cell:
    """How one target fared on one requirement."""

    outcome: str  # PASS | FAIL | MISSING | UNTESTED | NOT_APPLIES | DESELECTED | SUITE_ERROR
    failed: int = 0
    checked: int = 0
    distinct: int = 0  # distinct failure fingerprints
    reason: str = ""  # why it does not apply (NOT_APPLIES)

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

    outcome: CapabilityOutcome | None  # None when the feature was not probed in that run
    detail: str = ""


def offer(entry: Capability | None) -> Offer:
    """The :class:`Offer` of one capability-table entry (None: not probed)."""
    if entry is None:
        return Offer(None)
    return Offer(entry.outcome, entry.detail)


@dataclass(frozen=True, slots=True)
class Row:
    """One requirement across every target."""

    id: str
    level: Level
    area: str
    statement: str
    cells: tuple[Cell, ...]


@dataclass(frozen=True, slots=True)
class Target:
    """One compared run: its name, verdict, scores and context."""

    name: str
    verdict: str
    scores: dict[Level, Score]
    offered: Offered  # the capability figure, from the capability table
    info: RunInfo
    spent: Spent
    baseline: BaselineDiff | None
    coverage: Coverage
    latency: LatencySummary


@dataclass(frozen=True, slots=True)
class Difference:
    """A setting the compared runs did not share: its name and each run's value."""

    setting: str
    values: tuple[str, ...]  # one per target, "not recorded" where a run did not say


@dataclass(frozen=True, slots=True)
class Comparison:
    """Everything the comparison reports show."""

    targets: tuple[Target, ...]
    rows: tuple[Row, ...]
    capabilities: tuple[tuple[str, tuple[Offer, ...]], ...]
    differences: tuple[Difference, ...] = ()


def _cell(rid: str, run: Results) -> Cell:
    coverage = coverage_of(run)
    tally = run.tallies.get(rid)
    if tally is None:
        why = not_applicable_reason(coverage, rid)
        if why is not None:
            return Cell(NOT_APPLIES, reason=why)
        return Cell(DESELECTED if rid in coverage.deselected else UNTESTED)
    status = status_of(tally, strict=is_strict(run), coverage=coverage)
    why = not_applicable_reason(coverage, rid) if status == NOT_APPLICABLE else None
    return Cell(_CELL[status], tally.failed, tally.checked, len(tally.fingerprints), why or "")


def _document(info: RunInfo) -> str | None:
    """The document judged by: its name, and its digest where recorded."""
    if info.spec is None:
        return None
    digest = info.spec_sha256
    return f"{info.spec} (sha256 {digest[:12]})" if digest else str(info.spec)


#: The settings that change what a run sends or how it judges, as results.json records
#: them: (what to call it, how to read it off a run; None where the run did not record it).
SETTINGS: tuple[tuple[str, Callable[[Results], object]], ...] = (
    ("spec", lambda r: _document(r.info)),
    ("contract (--contract)", lambda r: r.info.contract),
    ("--strict-spec", lambda r: r.info.strict_spec),
    ("--strict-should", lambda r: r.info.strict),
    ("--max-tokens", lambda r: r.info.max_tokens),
    ("--max-examples", lambda r: r.info.max_examples),
    ("--seed", lambda r: r.info.seed),
    ("--fuzz", lambda r: r.info.fuzz),
    ("deselected (--checks / --skip-checks)", lambda r: ", ".join(coverage_of(r).deselected)),
    ("--require-capabilities", lambda r: ", ".join(r.run_record.require_capabilities)),
    ("judged", lambda r: "recorded traffic" if r.info.source == "traffic" else "its own run"),
    ("suite version", lambda r: r.info.suite_version),
)


def differences(runs: list[Results]) -> tuple[Difference, ...]:
    """The settings of SETTINGS the runs did not share. A run that did not record a setting
    (an older results.json) says nothing about it: only values recorded are compared."""
    found = []
    for setting, read in SETTINGS:
        values = [read(r) for r in runs]
        known = {repr(v) for v in values if v is not None}
        if len(known) > 1:
            shown = tuple("not recorded" if v is None else _shown(v) for v in values)
            found.append(Difference(setting, shown))
    return tuple(found)


def _shown(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value) if value != "" else "none"


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
        cells = tuple(_cell(rid, r) for r in results)
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
            latency=LatencySummary.of(r.latency, r.info.concurrency),
        )
        for name, r in runs
    )
    return Comparison(targets, tuple(rows), capabilities, differences(results))
