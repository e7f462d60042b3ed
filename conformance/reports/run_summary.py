"""``summary.md``: one run in a page of Markdown, for a CI job summary.

Written beside the other reports on every run (``reports.write_all``); in GitHub Actions,
``cat summary.md >> "$GITHUB_STEP_SUMMARY"`` shows it on the job's page. It says the
verdict, the failed requirements with one example each, the suite defects, what was not
tested and why, the capability table and the baseline diff first; the errata and policies
folded at the end. Every
target-supplied text goes through ``reports.markdown.cell`` (inert, one line).
"""

from __future__ import annotations

from pathlib import Path

from conformance.judging.verdict.examples import Example, Outcome
from conformance.judging.verdict.latency import LatencySummary
from conformance.judging.verdict.outcomes import MEANINGS
from conformance.judging.verdict.results import Results, Tally
from conformance.reports.markdown import cell, table
from conformance.reports.summary import (
    ERROR,
    FAILED,
    OFFERED_LEGEND,
    WARNED,
    buckets_of,
    capability_rows,
    coverage_of,
    evidence_label,
    intermittent_note,
    is_strict,
    offered_of,
    ordered,
    pairs,
    refused_of,
    registry_line,
    shard_text,
    status_of,
    verdict_of,
)

_WORD = {
    "passed": "✅ PASSED",
    "failed": "❌ FAILED",
    "incomplete": "⚠️ INCOMPLETE",
    "error": "💥 ERROR",
    "no-verdict": "⚠️ NO VERDICT",
}
MESSAGE_CHARS = 240


def _first(tally: Tally, outcome: Outcome) -> Example | None:
    return next((ex for ex in tally.examples if ex.outcome == outcome), None)


def _example(tally: Tally, outcome: Outcome) -> str:
    ex = _first(tally, outcome)
    if ex is None:
        return "(no example kept)"
    text = " ".join(ex.message.split())
    if len(text) > MESSAGE_CHARS:
        text = text[: MESSAGE_CHARS - 1] + "…"
    where = f" at {ex.path}" if ex.path else ""
    return f"{text} (case: {ex.evidence.case or ex.evidence.mode or '?'}{where})"


def summary_markdown(results: Results) -> str:
    """The run summary as GitHub-flavoured Markdown."""
    info = results.info
    strict = is_strict(results)
    decided = verdict_of(results)
    verdict = decided.word
    if info.shard:
        # One shard judged its slice only: its own word is not the run's (issue 27).
        heading = f"shard {cell(info.shard)}, verdict left to the merge"
        said = cell(shard_text(verdict))
    else:
        heading = _WORD.get(verdict, "⚠️ " + verdict.upper())
        said = cell(MEANINGS.get(verdict, ""))
    lines = [
        f"## Completions conformance: {heading}",
        "",
        said,
        "",
        f"Target `{cell(_or(info.target, '?'))}` · spec {cell(_or(info.spec, '?'))}"
        f" · model `{cell(_or(info.model, '?'))}`"
        + (f" · shards {info.shards}" if info.shards else "")
        + f" · {results.spent.requests} requests,"
        f" {results.spent.tokens} tokens",
    ]
    if info.spec_sha256:
        lines += [
            "",
            f"Document `{cell(_or(info.spec_source, ''))}` · sha256 `{info.spec_sha256}`"
            + (f" · {cell(info.operation)}" if info.operation else ""),
        ]
    recorded = results.verdict.reasons if results.verdict is not None else ()
    for reason in recorded:  # decided by conformance.judging
        lines += ["", f"> {cell(reason)}"]
    for warning in info.baseline_warnings or ():
        lines += ["", f"> ⚠️ baseline: {cell(warning)}"]
    rows = ordered(results.tallies.values())
    errors = [t for t in rows if status_of(t, strict=strict) == ERROR]
    if errors:
        lines += ["", "### Suite defects (a check raised: fails the run)", ""]
        lines += table(
            ["Requirement", "Exchanges", "Error"],
            ([f"`{t.id}`", t.errored, _example(t, Outcome.ERROR)] for t in errors),
        )
    failed = [t for t in rows if status_of(t, strict=strict) in (FAILED, WARNED)]
    lines += ["", f"### Failed requirements ({len(failed)})", ""]
    if failed:
        lines += table(
            ["Requirement", "Level", "Evidence", "Failed", "Decides", "Example"],
            (
                [
                    f"`{t.id}`",
                    t.level,
                    evidence_label(t) or "—",
                    f"{t.failed}/{t.checked}"
                    + (f" ({cell(note)})" if (note := intermittent_note(t)) else ""),
                    "yes" if status_of(t, strict=strict) == FAILED else "advisory",
                    _example(t, Outcome.FAILED),
                ]
                for t in failed
            ),
        )
    else:
        lines.append("None.")
    coverage = coverage_of(results)
    buckets = buckets_of(results)
    lines += ["", "### Not tested", ""]
    lines.append(
        buckets.line()
        + ("" if results.verdict is not None else " (This run recorded no coverage.)")
    )
    if coverage.untested:
        lines += ["", "Untested (untested is not passed):", ""]
        lines += table(["Requirement", "Why"], pairs(coverage.untested))
    if coverage.not_applicable:
        lines += ["", "Not applicable (each with its stated reason):", ""]
        lines += table(["Requirement", "Why"], pairs(coverage.not_applicable))
    if buckets.not_exercised:
        lines += [
            "",
            "Not exercised (SHOULD/CAPABILITY, advisory): "
            + ", ".join(f"`{cell(rid)}`" for rid in buckets.not_exercised)
            + ".",
        ]
    skipped = {str(e.get("reason", "")) for e in info.skipped_scenarios or ()}
    if skipped:
        lines += ["", "Scenarios not run: " + "; ".join(cell(r) for r in sorted(skipped)) + "."]
    if coverage.deselected:
        lines += [
            "",
            "Deselected (--checks/--skip-checks): "
            + ", ".join(f"`{cell(d)}`" for d in coverage.deselected),
        ]
    caps = capability_rows(results)
    if caps:
        lines += ["", "### Capabilities (one probe per feature)", ""]
        figure = offered_of(results).text()
        lines += [OFFERED_LEGEND.replace("offered:", f"offered: {figure},", 1), ""]
        lines += table(["Feature", "Outcome", "Detail"], caps)
    refused = refused_of(results)
    if refused is not None:
        said = cell(refused.line())
        lines += ["", f"{said[:1].upper()}{said[1:]}:", ""]
        lines += [f"- {cell(message)}" for message in refused.examples]
    baseline = info.baseline
    if baseline is not None:
        lines += ["", "### Baseline", ""]
        lines += table(
            ["New (fail the run)", "Known", "Fixed"],
            [[len(baseline.new), len(baseline.known), len(baseline.fixed)]],
        )
        if baseline.new:
            lines += ["", "New fingerprints: " + ", ".join(f"`{cell(f)}`" for f in baseline.new)]
    lat = LatencySummary.of(results.latency, info.concurrency)
    if lat.streams:
        parts = [
            f"{name} p50/p90/p99 {'/'.join(f'{v:.3f}' for v in figure.values)} s"
            for figure, name in (
                (lat.ttfb_s, "TTFB"),
                (lat.p50_gap_s, "gap"),
                (lat.total_s, "total"),
            )
            if figure is not None
        ]
        lines += [
            "",
            f"Streaming latency over {lat.streams} streams at concurrency "
            f"{lat.concurrency if lat.concurrency is not None else 'n/a'}: "
            + "; ".join(parts)
            + f"; {lat.buffered} look buffered.",
        ]
    # What the suite corrected and how it read open points: available, folded away.
    lines += [
        "",
        "<details><summary>Spec errata applied and suite policies in force</summary>",
        "",
        cell(registry_line(info)),
        "",
        "</details>",
    ]
    return "\n".join(lines) + "\n"


def _or(value: object, default: str) -> str:
    """``value`` as text, ``default`` when the run did not record it."""
    return default if value is None else str(value)


def write_summary(results: Results, path: Path) -> Path:
    """Write ``summary.md`` at ``path``."""
    path.write_text(summary_markdown(results), encoding="utf-8")
    return path
