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
from typing import Any

from conformance.judging.results import Results, Tally, latency_summary
from conformance.reports.markdown import cell, table
from conformance.reports.summary import (
    ERROR,
    FAILED,
    OFFERED_LEGEND,
    VERDICTS,
    WARNED,
    buckets_of,
    capability_rows,
    coverage_of,
    evidence_label,
    is_strict,
    offered_of,
    ordered,
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


def _first(tally: Tally, outcome: str) -> dict[str, Any]:
    return next((ex for ex in tally.examples if ex.get("outcome", "failed") == outcome), {})


def _example(tally: Tally, outcome: str) -> str:
    ex = _first(tally, outcome)
    if not ex:
        return "(no example kept)"
    text = " ".join(str(ex.get("message", "")).split())
    if len(text) > MESSAGE_CHARS:
        text = text[: MESSAGE_CHARS - 1] + "…"
    where = f" at {ex['path']}" if ex.get("path") else ""
    return f"{text} (case: {ex.get('case') or ex.get('mode') or '?'}{where})"


def summary_markdown(results: Results) -> str:
    """The run summary as GitHub-flavoured Markdown."""
    meta = results.meta
    strict = is_strict(results)
    verdict = verdict_of(results)
    if meta.get("shard"):
        # One shard judged its slice only: its own word is not the run's (issue 27).
        heading = f"shard {cell(meta['shard'])}, verdict left to the merge"
        said = cell(shard_text(verdict))
    else:
        heading = _WORD.get(verdict, "⚠️ " + verdict.upper())
        said = cell(VERDICTS.get(verdict, ""))
    lines = [
        f"## Completions conformance: {heading}",
        "",
        said,
        "",
        f"Target `{cell(meta.get('target', '?'))}` · spec {cell(meta.get('spec', '?'))}"
        f" · model `{cell(meta.get('model', '?'))}`"
        + (f" · shards {meta['shards']}" if meta.get("shards") else "")
        + f" · {int(results.spent.get('requests', 0))} requests,"
        f" {int(results.spent.get('tokens', 0))} tokens",
    ]
    if meta.get("spec_sha256"):
        lines += [
            "",
            f"Document `{cell(meta.get('spec_source', ''))}` · sha256 `{meta['spec_sha256']}`"
            + (f" · {cell(meta['operation'])}" if meta.get("operation") else ""),
        ]
    for reason in meta.get("verdict_reasons") or []:  # decided by conformance.judging
        lines += ["", f"> {cell(reason)}"]
    for warning in meta.get("baseline_warnings") or []:
        lines += ["", f"> ⚠️ baseline: {cell(warning)}"]
    rows = ordered(results.tallies.values())
    errors = [t for t in rows if status_of(t, strict=strict) == ERROR]
    if errors:
        lines += ["", "### Suite defects (a check raised: fails the run)", ""]
        lines += table(
            ["Requirement", "Exchanges", "Error"],
            ([f"`{t.id}`", t.errored, _example(t, "error")] for t in errors),
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
                    f"{t.failed}/{t.checked}",
                    "yes" if status_of(t, strict=strict) == FAILED else "advisory",
                    _example(t, "failed"),
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
        buckets.line() + ("" if coverage.recorded else " (This run recorded no coverage.)")
    )
    if coverage.untested:
        lines += ["", "Untested (untested is not passed):", ""]
        lines += table(["Requirement", "Why"], coverage.untested)
    if coverage.not_applicable:
        lines += ["", "Not applicable (each with its stated reason):", ""]
        lines += table(["Requirement", "Why"], coverage.not_applicable)
    if buckets.not_exercised:
        lines += [
            "",
            "Not exercised (SHOULD/CAPABILITY, advisory): "
            + ", ".join(f"`{cell(rid)}`" for rid in buckets.not_exercised)
            + ".",
        ]
    skipped = {str(e.get("reason", "")) for e in meta.get("skipped_scenarios") or []}
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
    baseline = meta.get("baseline")
    if isinstance(baseline, dict):
        lines += ["", "### Baseline", ""]
        lines += table(
            ["New (fail the run)", "Known", "Fixed"],
            [[len(baseline.get(k) or []) for k in ("new", "known", "fixed")]],
        )
        if baseline.get("new"):
            lines += ["", "New fingerprints: " + ", ".join(f"`{cell(f)}`" for f in baseline["new"])]
    lat = latency_summary(results.latency, meta.get("concurrency"))
    if lat["streams"]:
        parts = [
            f"{name} p50/p90/p99 {'/'.join(f'{v:.3f}' for v in lat[key].values())} s"
            for key, name in (("ttfb_s", "TTFB"), ("p50_gap_s", "gap"), ("total_s", "total"))
            if lat[key]
        ]
        lines += [
            "",
            f"Streaming latency over {lat['streams']} streams at concurrency "
            f"{lat['concurrency'] if lat['concurrency'] is not None else 'n/a'}: "
            + "; ".join(parts)
            + f"; {lat['buffered']} look buffered.",
        ]
    # What the suite corrected and how it read open points: available, folded away.
    lines += [
        "",
        "<details><summary>Spec errata applied and suite policies in force</summary>",
        "",
        cell(registry_line(meta)),
        "",
        "</details>",
    ]
    return "\n".join(lines) + "\n"


def write_summary(results: Results, path: Path) -> Path:
    """Write ``summary.md`` at ``path``."""
    path.write_text(summary_markdown(results), encoding="utf-8")
    return path
