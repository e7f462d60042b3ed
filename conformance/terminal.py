"""The run's closing lines: what was spent and seen, what failed, what went untested, the
report files, and the verdict last, so that it never scrolls away above pytest's summary."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from conformance.engine import status_summary
from conformance.results import Results
from conformance.spec import Spec
from conformance.verdict import Verdict

SHOWN = 12  # untested requirements listed one per line; the rest are counted


def closing_lines(
    verdict: Verdict, results: Results, spec: Spec, reports: Iterable[Path], notes: Iterable[str]
) -> list[str]:
    lines = [*notes, status_summary(results, spec)]
    if "baseline" in results.meta:
        from reports.baseline import baseline_line

        lines.append(baseline_line(results.meta["baseline"]))
        lines += [f"baseline warning: {w}" for w in results.meta.get("baseline_warnings", [])]
    for rid, failed, checked in verdict.failed:
        tally = results.tallies[rid]
        lines.append(f"failed: {rid} [{tally.level}] on {failed} of {checked} exchange(s)")
    untested = verdict.coverage.untested
    shard = f" (in shard {results.meta['shard']})" if "shard" in results.meta else ""
    for u in untested[:SHOWN]:
        lines.append(f"untested MUST{shard}: {u.id}: {u.reason}")
    if len(untested) > SHOWN:
        lines.append(f"untested MUST: ... and {len(untested) - SHOWN} more (see the reports)")
    if verdict.coverage.not_applicable:
        n = len(verdict.coverage.not_applicable)
        lines.append(
            f"not applicable: {n} MUST requirement(s), each with its reason in the reports"
        )
    lines += [f"report: {path}" for path in reports]
    lines.append(verdict_line(verdict, results))
    return lines


def verdict_line(verdict: Verdict, results: Results) -> str:
    spent = results.spent
    why = f" ({'; '.join(verdict.reasons)})" if verdict.reasons else ""
    return (
        f"verdict: {verdict.word}{why}; spent {int(spent['requests'])} requests, "
        f"{int(spent['tokens'])} tokens, {int(spent['retries'])} retries; "
        f"{results.meta.get('wall_time', 0.0):.1f} s"
    )
