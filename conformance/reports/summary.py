"""What every report says about a run, derived once from its Results.

Reports never recompute findings; they only classify the tallies the run recorded. The
rules live here so that JUnit, HTML, Markdown and the comparison agree on what "failed",
"skipped" and "score" mean.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from conformance.judging.requirements import AREAS, Level
from conformance.judging.verdict.capabilities import VALUE
from conformance.judging.verdict.decision import verdict_of as decided_verdict
from conformance.judging.verdict.examples import Example, Outcome
from conformance.judging.verdict.outcomes import SHARD_MEANINGS
from conformance.judging.verdict.results import (
    CAPABILITY_OUTCOMES,
    CapabilityOutcome,
    Results,
    Status,
    Tally,
)
from conformance.judging.verdict.run_info import RegistryEntry, RunInfo
from conformance.judging.verdict.verdict import Coverage, Uncovered, Verdict, deciding_levels

LEVELS = tuple(Level)

# Statuses of one requirement in one run, as the reports show them (Tally.status_under).
PASSED = Status.PASSED
FAILED = Status.FAILED  # failed, and the failure decides the verdict
WARNED = Status.WARNED  # failed, but its level does not decide (SHOULD without --strict-should)
UNSUPPORTED = Status.UNSUPPORTED  # a CAPABILITY the target declined properly
NOT_TESTED = Status.NOT_TESTED
NOT_APPLICABLE = Status.NOT_APPLICABLE  # a MUST with a stated reason it cannot apply
ERROR = Status.ERROR  # the check itself raised: a suite defect, which fails the run

STATUS_LABELS = {
    ERROR: "suite error",
    PASSED: "pass",
    FAILED: "fail",
    WARNED: "fail (advisory)",
    UNSUPPORTED: "unsupported",
    NOT_TESTED: "not tested",
    NOT_APPLICABLE: "not applicable",
}


def policies_of(info: RunInfo) -> list[RegistryEntry]:
    """The suite policies in force for the run (``info.policies``, the registry of
    conformance/judging/document/policies.py, also lists the errata applied: those are left out here)."""
    return [e for e in info.policies or () if e.kind == "policy"]


def registry_line(info: RunInfo) -> str:
    """One line naming the errata applied and the policies in force (the run's header)."""
    none = "none (--strict-spec)" if info.strict_spec else "none"
    errata = ", ".join(e.id for e in info.errata or ()) or none
    policies = ", ".join(p.id for p in policies_of(info)) or none
    contract = f"Contract: {info.contract} · " if info.contract else ""
    line = f"{contract}Errata applied: {errata} · policies: {policies}"
    conventions = ", ".join(c.id for c in info.conventions or ())
    return line + (f" · conventions of the document: {conventions}" if conventions else "")


def is_strict(results: Results) -> bool:
    """Whether SHOULD failures decide this run's verdict (``--strict-should``)."""
    return bool(results.info.strict)


def status_of(tally: Tally, *, strict: bool, coverage: Coverage | None = None) -> Status:
    """The report status of one requirement (the one rule: Tally.status_under), and, given
    the run's coverage, NOT_APPLICABLE for a MUST it names not applicable that no exchange
    exercised: a stated reason (the spec, a proper 4xx decline) is not "not tested"."""
    status = tally.status_under(deciding_levels(strict=strict))
    excused = coverage is not None and not_applicable_reason(coverage, tally.id) is not None
    return NOT_APPLICABLE if excused and status in (NOT_TESTED, UNSUPPORTED) else status


def not_applicable_reason(coverage: Coverage, rid: str) -> str | None:
    """Why ``rid`` does not apply in the run (its coverage), or None when it applies."""
    return next((u.reason for u in coverage.not_applicable if u.id == rid), None)


def shard_text(verdict: str) -> str:
    """What a shard's report says in place of a verdict: a shard judged its slice only, so
    its own word ("passed" over MUSTs other shards test) is not the run's (issue 27)."""
    return (
        f"One shard of a run: in its slice, {SHARD_MEANINGS.get(verdict, verdict)}. The run's "
        "verdict is conformance-merge's, over every shard's results.json."
    )


def verdict_of(results: Results) -> Verdict:
    """The run's verdict as the judge core decided it (conformance.judging.verdict_of):
    the reports never decide on their own."""
    return decided_verdict(results)


def coverage_of(results: Results) -> Coverage:
    """The run's coverage as its verdict recorded it (conformance.judging.verdict.decision.coverage,
    the one rule); empty when the run recorded no verdict (``results.verdict`` None)."""
    return Coverage() if results.verdict is None else results.verdict.coverage


def pairs(entries: Iterable[Uncovered]) -> list[tuple[str, str]]:
    """Uncovered requirements as (id, reason) rows of a table."""
    return [(u.id, u.reason) for u in entries]


@dataclass(frozen=True, slots=True)
class Buckets:
    """Every requirement of a run in exactly one bucket, so that the counts add up.

    ``tested``: at least one exchange exercised it (passed or failed); ``untested``: a MUST
    no exchange exercised, with no stated reason; ``not_applicable``: a MUST with a stated
    reason (the spec, a proper 4xx decline, a skipped scenario's reason); ``deselected``:
    left out by --checks/--skip-checks; ``not_exercised``: a SHOULD or CAPABILITY no
    exchange exercised (advisory: it does not decide the verdict).
    """

    tested: tuple[str, ...] = ()
    untested: tuple[str, ...] = ()
    not_applicable: tuple[str, ...] = ()
    deselected: tuple[str, ...] = ()
    not_exercised: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return sum(len(ids) for ids in self.parts().values())

    def parts(self) -> dict[str, tuple[str, ...]]:
        """The buckets by the words a report shows them with, in that order."""
        return {
            "tested": self.tested,
            "untested MUST": self.untested,
            "not applicable": self.not_applicable,
            "deselected": self.deselected,
            "not exercised (SHOULD/CAPABILITY)": self.not_exercised,
        }

    def line(self) -> str:
        """``71 requirements: 67 tested, 0 untested MUST, ...`` (the counts add up)."""
        counts = ", ".join(f"{len(ids)} {word}" for word, ids in self.parts().items())
        return f"{self.total} requirements: {counts}."


def buckets_of(results: Results) -> Buckets:
    """Each requirement of the run (its tallies, and the MUSTs its coverage names) in the
    first bucket that holds: deselected, not applicable, untested, tested, not exercised.
    A MUST the target declined with a proper 4xx is not applicable, not also tested."""
    coverage = coverage_of(results)
    deselected = set(coverage.deselected)
    not_applicable = {u.id for u in coverage.not_applicable}
    untested = {u.id for u in coverage.untested}
    ids = list(dict.fromkeys([*results.tallies, *coverage.deselected, *not_applicable, *untested]))
    found: dict[str, list[str]] = {k: [] for k in ("d", "n", "u", "t", "x")}
    for rid in ids:
        tally = results.tallies.get(rid)
        if rid in deselected:
            found["d"].append(rid)
        elif rid in not_applicable:
            found["n"].append(rid)
        elif rid in untested:
            found["u"].append(rid)
        elif tally is not None and tally.checked:
            found["t"].append(rid)
        else:
            found["x"].append(rid)
    return Buckets(
        tested=tuple(found["t"]),
        untested=tuple(found["u"]),
        not_applicable=tuple(found["n"]),
        deselected=tuple(found["d"]),
        not_exercised=tuple(found["x"]),
    )


#: What each evidence tier means (conformance.judging.requirements.Requirement.evidence).
EVIDENCE = {
    "spec-schema": "spec schema",
    "spec-text": "spec text",
    "client-visible": "client-visible",
    "server-habit": "server habit",
}


def evidence_label(tally: Tally) -> str:
    """The requirement's evidence tier as the reports show it; empty when not recorded."""
    return EVIDENCE.get(tally.evidence, tally.evidence)


def area_rank(area: str) -> tuple[int, str]:
    """Sort key that keeps the areas in requirements.AREAS order and puts unknown ones last."""
    return (AREAS.index(area), "") if area in AREAS else (len(AREAS), area)


def ordered(tallies: Iterable[Tally]) -> list[Tally]:
    """Tallies grouped by area; within an area, the registry (insertion) order is kept."""
    return sorted(tallies, key=lambda t: area_rank(t.area))


def areas_of(used: Iterable[str]) -> list[str]:
    """Every area of ``requirements.AREAS``, plus any other area in ``used``."""
    extra = set(used) - set(AREAS)
    return [*AREAS, *sorted(extra)]


@dataclass(frozen=True, slots=True)
class Counts:
    """How many requirements of one area and level passed, failed, were skipped.

    ``failed`` counts every failed requirement; ``advisory`` says how many of those do not
    decide the verdict, so a table can tell a blocking failure from a SHOULD finding.
    ``not_applicable`` are not ``skipped``: they have a stated reason not to apply.
    """

    passed: int = 0
    failed: int = 0
    skipped: int = 0
    unsupported: int = 0
    advisory: int = 0
    not_applicable: int = 0

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.skipped + self.unsupported + self.not_applicable

    def add(self, status: str) -> Counts:
        """These counts with one more requirement of ``status``."""
        return Counts(
            passed=self.passed + (status == PASSED),
            failed=self.failed + (status in (FAILED, WARNED, ERROR)),
            skipped=self.skipped + (status == NOT_TESTED),
            unsupported=self.unsupported + (status == UNSUPPORTED),
            advisory=self.advisory + (status == WARNED),
            not_applicable=self.not_applicable + (status == NOT_APPLICABLE),
        )


def by_area_and_level(results: Results) -> dict[str, dict[str, Counts]]:
    """Counts per area (rows) and level (columns), plus a ``total`` row and column."""
    strict = is_strict(results)
    coverage = coverage_of(results)
    columns = (*LEVELS, "total")
    table = {
        area: dict.fromkeys(columns, Counts())
        for area in areas_of(t.area for t in results.tallies.values())
    }
    table["total"] = dict.fromkeys(columns, Counts())
    for tally in results.tallies.values():
        status = status_of(tally, strict=strict, coverage=coverage)
        level = tally.level if tally.level in LEVELS else "total"
        for row in (tally.area, "total"):
            for col in {level, "total"}:
                table[row][col] = table[row][col].add(status)
    return table


@dataclass(frozen=True, slots=True)
class Score:
    """Tested requirements of one level that held on every exchange judged."""

    level: Level
    passed: int
    tested: int

    @property
    def percent(self) -> float | None:
        """Share passed, in percent; None when nothing of this level was tested."""
        return 100.0 * self.passed / self.tested if self.tested else None

    def text(self) -> str:
        """``92% (11/12)``, or ``n/a`` when nothing was tested."""
        pct = self.percent
        return "n/a" if pct is None else f"{pct:.0f}% ({self.passed}/{self.tested})"


def scores(results: Results) -> dict[Level, Score]:
    """One score per level; see docs/results-schema.md ("Scores") for the definition.

    A requirement counts as tested when at least one exchange was judged by it, and as
    passed when none of those failed (nor raised in the suite). A single failing exchange fails the requirement:
    conformance is not an average over requests. For CAPABILITY, "passed" means the
    target supports the feature (neither declined it nor broke on it). A MUST the run's
    coverage names not applicable (e.g. declined with a proper 4xx on every exchange) is
    not tested: it counts in no score.
    """
    excused = {u.id for u in coverage_of(results).not_applicable}
    out = {}
    for level in LEVELS:
        tested = [
            t
            for t in results.tallies.values()
            if t.level == level and t.checked and t.id not in excused
        ]
        passed = [t for t in tested if not t.failed and not t.unsupported and not t.errored]
        out[level] = Score(level, len(passed), len(tested))
    return out


#: What the capability figure is, wherever it is shown.
OFFERED_LEGEND = (
    "Capabilities offered: the share of the features of the capability table the run probed "
    "(one probe per feature and form: a minimal request plus that feature alone) that the "
    "target offers; the others are declined (a proper 4xx), ignored (200, no effect) or "
    "broken (a 5xx, no answer, or a MUST failure of a requirement owning the feature)."
)


@dataclass(frozen=True, slots=True)
class Offered:
    """The capability figure, computed from the capability table (never from the one
    CAPABILITY-level requirement): how many probed features and forms ended in each outcome."""

    #: (outcome, features), every outcome in CAPABILITY_OUTCOMES' order (best first)
    counts: tuple[tuple[CapabilityOutcome, int], ...]

    @property
    def probed(self) -> int:
        return sum(n for _, n in self.counts)

    @property
    def offered(self) -> int:
        return dict(self.counts).get(CapabilityOutcome.OFFERED, 0)

    @property
    def percent(self) -> float | None:
        return 100.0 * self.offered / self.probed if self.probed else None

    def detail(self) -> str:
        """``4/5; 1 broken``: offered of probed, then each other outcome seen."""
        others = ", ".join(
            f"{n} {o}" for o, n in self.counts if o != CapabilityOutcome.OFFERED and n
        )
        return f"{self.offered}/{self.probed}" + (f"; {others}" if others else "")

    def text(self) -> str:
        """``80% (4/5; 1 broken)``, or ``n/a`` when no feature was probed."""
        pct = self.percent
        return "n/a" if pct is None else f"{pct:.0f}% ({self.detail()})"


def intermittent_note(tally: Tally) -> str:
    """``intermittent: failed on 1 of 3 sends of <label>`` for each request sent more than
    once that failed on some sends only (Tally.intermittent), or empty."""
    return "; ".join(
        f"intermittent: failed on {failed} of {sent} sends of {label}"
        for label, failed, sent in tally.intermittent
    )


@dataclass(frozen=True, slots=True)
class Refused:
    """The valid requests the target declined with a proper 4xx (VALID-ACCEPTED's
    unsupported exchanges): a capability gap, never a failure, but named, not just counted."""

    count: int
    of: int
    examples: tuple[str, ...]  # "declined with 400: \"message\": the request's label"

    def line(self) -> str:
        return (
            f"valid requests refused: {self.count} of {self.of} (VALID-ACCEPTED: declined "
            "with a proper 4xx, a capability gap, not a failure)"
        )


def refused_of(results: Results) -> Refused | None:
    """What the target refused of the valid requests, or None when it served them all."""
    tally = results.tallies.get("VALID-ACCEPTED")
    if tally is None or not tally.unsupported:
        return None
    shown = tuple(ex.message for ex in tally.examples if ex.outcome == Outcome.UNSUPPORTED)
    return Refused(tally.unsupported, tally.checked, shown)


def offered_of(results: Results) -> Offered:
    """The capability figure of ``results`` (its capability table)."""
    seen = dict.fromkeys(CAPABILITY_OUTCOMES, 0)
    for feature, entry in results.capabilities.items():
        if feature.startswith(VALUE):
            continue  # a refused value, not a probed feature: no offered twin to weigh it
        seen[entry.outcome] += 1
    return Offered(tuple(seen.items()))


def capability_rows(results: Results) -> list[tuple[str, CapabilityOutcome, str]]:
    """The capability table as (feature, outcome, detail), sorted by feature."""
    return [
        (feature, entry.outcome, entry.detail)
        for feature, entry in sorted(results.capabilities.items())
    ]


def transcript_lines(example: Example) -> list[str]:
    """The SSE transcript of an example as ``+0.012s data: ...`` lines."""
    lines = []
    for event in example.evidence.transcript or ():
        at = event.at
        stamp = f"+{at:.3f}s" if isinstance(at, int | float) else "+?"
        lines.append(f"{stamp} data: {event.data}")
    shown, total = len(lines), example.evidence.events
    if isinstance(total, int) and total > shown:
        lines.append(f"… {total - shown} more event(s) not kept")
    return lines


def pretty_body(text: str) -> str:
    """A JSON body indented for reading, but only when nothing on the wire is lost.

    The body is evidence: duplicate keys, ``NaN``, odd spacing or a cut-off excerpt are
    part of what the reader must see. So it is re-indented only when it is exactly what
    ``json.dumps`` writes for its value (in the usual spacing), and shown verbatim otherwise.
    """
    try:
        value = json.loads(text)
    except ValueError:
        return text
    for separators in ((", ", ": "), (",", ":")):
        for ascii_only in (True, False):
            if json.dumps(value, separators=separators, ensure_ascii=ascii_only) == text:
                return json.dumps(value, indent=2, ensure_ascii=False)
    return text
