"""The run's verdict, with its reasons, and the coverage floor behind it.

Never a false green: a run is ``passed`` only when every MUST requirement that applies
was exercised and held, or has a stated reason why it could not apply (the spec does
not declare the feature, the target declined it with a proper 4xx, a scenario was
skipped for a stated reason, it was deselected). A MUST left unexercised otherwise (also
when the budget ran out first) makes the run ``incomplete``. Nothing here imports pytest.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from conformance.engine import BUDGET, SKIPPED, Settings
from conformance.requirements import REGISTRY, Level, load_checks
from conformance.results import Results
from conformance.spec import Spec

EXIT_CODES = {
    "passed": 0,
    "failed": 1,
    "error": 3,
    "bad-input": 4,
    "no-verdict": 6,
    "incomplete": 7,
}
WORDS = ("passed", "failed", "incomplete", "no-verdict", "error")


@dataclass(frozen=True, slots=True)
class Uncovered:
    """A MUST requirement that ended neither passed nor failed, and why."""

    id: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Coverage:
    """Results.meta["coverage"]: the MUSTs untested, not applicable, and deselected."""

    untested: tuple[Uncovered, ...] = ()
    not_applicable: tuple[Uncovered, ...] = ()
    deselected: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "untested": [u.to_json() for u in self.untested],
            "not_applicable": [u.to_json() for u in self.not_applicable],
            "deselected": list(self.deselected),
        }


@dataclass(frozen=True, slots=True)
class Verdict:
    """The run's word (one of WORDS), why, the failed requirements and the coverage."""

    word: str
    reasons: tuple[str, ...] = ()
    failed: tuple[tuple[str, int, int], ...] = ()  # (requirement, failed, checked)
    coverage: Coverage = field(default_factory=Coverage)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.word]

    def store(self, results: Results) -> None:
        """Write the verdict and the coverage into ``results.meta`` (the BRIEF's contract)."""
        results.meta["verdict"] = self.word
        results.meta["verdict_reasons"] = list(self.reasons)
        results.meta["coverage"] = self.coverage.to_json()


def coverage(results: Results, spec: Spec, settings: Settings) -> Coverage:
    """Where each applicable MUST requirement ended, when it ended neither passed nor failed."""
    load_checks()
    skipped: dict[str, str] = {}
    for entry in results.meta.get(SKIPPED, []):
        for rid in entry.get("covers", []):
            skipped.setdefault(rid, entry["reason"])
    budget = results.meta.get(BUDGET)
    untested, not_applicable, deselected = [], [], []
    for rid, req in REGISTRY.items():
        if req.under(spec).level != Level.MUST:
            continue
        if not settings.selected(rid):
            deselected.append(rid)
            continue
        tally = results.tallies.get(rid)
        if tally is not None and (tally.failed or tally.checked > tally.unsupported):
            continue  # exercised: passed or failed
        reason = req.not_applicable(spec)
        if reason:
            not_applicable.append(Uncovered(rid, reason))
        elif tally is not None and tally.unsupported:
            why = f"the target declined the feature with a proper 4xx ({tally.unsupported}x)"
            not_applicable.append(Uncovered(rid, why))
        elif rid in skipped:
            not_applicable.append(Uncovered(rid, f"scenario skipped: {skipped[rid]}"))
        elif budget:
            untested.append(Uncovered(rid, f"not exercised before the {budget}"))
        else:
            untested.append(Uncovered(rid, "no exchange of this run exercised it"))
    return Coverage(tuple(untested), tuple(not_applicable), tuple(deselected))


def unmet_capabilities(results: Results, required: Iterable[str]) -> list[str]:
    """The required capabilities the target did not offer (conformance.capabilities.unmet)."""
    names = list(required)
    if not names:
        return []
    from conformance import capabilities  # type: ignore[attr-defined,unused-ignore]

    return list(capabilities.unmet(results, names))


def decide(
    results: Results,
    spec: Spec,
    settings: Settings,
    *,
    runner_error: str | None = None,
    partial: bool = False,
) -> Verdict:
    """The run's verdict from its merged Results (and what the runner saw go wrong).

    ``partial``: the Results are one shard of a run; coverage is listed but judged only
    once the shards are merged (conformance-merge), so untested MUSTs do not decide here.
    """
    # A known-failing requirement decides again once it fails with a new fingerprint
    # (reports.baseline.compare_to_baseline, stored in meta by assembly.conclude).
    new = frozenset(results.meta.get("baseline", {}).get("new_failures", ()))
    known = settings.known_failures - new
    failing = results.failing(strict=settings.strict, known=known)
    failed = tuple((t.id, t.failed, t.checked) for t in failing)
    cover = coverage(results, spec, settings)
    errors = [t.id for t in results.errors()]
    unmet = unmet_capabilities(results, settings.require_capabilities)
    reasons: list[str] = []
    if failing:
        reasons.append(f"{len(failing)} requirement(s) failed: {', '.join(t.id for t in failing)}")
    if unmet:
        reasons.append(f"required capabilities not offered: {', '.join(unmet)}")
    if failing or unmet:
        return Verdict("failed", tuple(reasons), failed, cover)
    no_verdict = results.meta.get("no_verdict")
    if no_verdict:
        return Verdict("no-verdict", (str(no_verdict),), failed, cover)
    if runner_error or errors:
        why = runner_error or f"a check raised an unexpected error: {', '.join(errors)}"
        return Verdict("error", (why,), failed, cover)
    if cover.untested and not partial:
        why = f"{len(cover.untested)} MUST requirement(s) untested"
        return Verdict("incomplete", (why,), failed, cover)
    return Verdict("passed", (), failed, cover)
