"""The HTML report: one self-contained, offline file for the people who read a run.

A provider's team opens it when the gate fails (what broke, with a reproducer); a buyer
opens it when choosing a vendor (verdict, scores, capabilities). All target-supplied text
reaches the page through the autoescaping template, never through string concatenation.
The comparison of several runs (``conformance-compare --html``) is rendered here the same way.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from conformance.judging.verdict.examples import Example, Outcome
from conformance.judging.verdict.latency import LatencySummary, StreamLatency
from conformance.judging.verdict.outcomes import MEANINGS
from conformance.judging.verdict.results import RESULTS_SCHEMA_VERSION, Results, Tally
from conformance.judging.verdict.run_info import RunInfo
from conformance.judging.verdict.verdict import Coverage
from conformance.reports.matrix import DIFFER_LEGEND, SCORES_LEGEND, Comparison
from conformance.reports.render import render
from conformance.reports.summary import (
    ERROR,
    FAILED,
    LEVELS,
    OFFERED_LEGEND,
    STATUS_LABELS,
    WARNED,
    buckets_of,
    by_area_and_level,
    capability_rows,
    coverage_of,
    evidence_label,
    is_strict,
    not_applicable_reason,
    offered_of,
    ordered,
    policies_of,
    pretty_body,
    scores,
    shard_text,
    status_of,
    transcript_lines,
    verdict_of,
)

MAX_SHOWN = 3


def anchor(requirement_id: str) -> str:
    """The fragment id of a requirement's failure section."""
    return "req-" + "".join(c if c.isalnum() or c in "-_" else "_" for c in requirement_id)


def example_view(example: Example) -> dict[str, Any]:
    """One piece of evidence with every field present, bodies indented, transcript as lines."""
    shown = example.evidence
    request = shown.request
    return {
        "message": example.message,
        "outcome": example.outcome.value,
        "fingerprint": example.fingerprint,
        "path": example.path,
        "expected": example.expected,
        "actual": example.actual,
        "case": shown.case,
        "mode": shown.mode,
        "breaks": shown.breaks,
        "method": request.method,
        "url": request.url,
        "request_headers": sorted(request.headers.items()),
        "request_body": pretty_body(request.body),
        "status": shown.status,
        "transport_error": shown.transport_error,
        "response_headers": list(shown.response_headers.items()),
        "body_excerpt": pretty_body(shown.body_excerpt),
        "transcript": transcript_lines(example) if shown.transcript is not None else None,
        "stream_error": shown.stream_error,
        "elapsed": shown.elapsed,
        "curl": shown.curl,
    }


def requirement_view(tally: Tally, *, strict: bool, coverage: Coverage) -> dict[str, Any]:
    """A row of the requirement table, with its examples for the failure section."""
    status = status_of(tally, strict=strict, coverage=coverage)
    return {
        "id": tally.id,
        "anchor": anchor(tally.id),
        "level": tally.level,
        "area": tally.area,
        "statement": tally.statement,
        "source": tally.source,
        "evidence": evidence_label(tally),
        "why_level": tally.why_level,
        "checked": tally.checked,
        "failed": tally.failed,
        "unsupported": tally.unsupported,
        "errored": tally.errored,
        "distinct": len(tally.fingerprints) + tally.fingerprints_dropped,
        "status": status,
        "label": STATUS_LABELS[status],
        # Why it does not apply: the badge's tooltip (the "Not applicable" list says it too).
        "why": not_applicable_reason(coverage, tally.id) or "",
        "examples": [example_view(ex) for ex in tally.examples if ex.outcome == Outcome.FAILED][
            :MAX_SHOWN
        ],
        "errors": [example_view(ex) for ex in tally.examples if ex.outcome == Outcome.ERROR][
            :MAX_SHOWN
        ],
    }


def latency_cell(value: Any) -> tuple[str, bool]:
    """A latency value as text, and whether it is a number (right-aligned)."""
    if value is None:
        return "—", False
    if isinstance(value, bool):
        return ("yes" if value else "no"), False
    if isinstance(value, float):
        return f"{value:.3f}", True  # seconds: milliseconds are the useful precision
    if isinstance(value, int):
        return str(value), True
    return str(value), False


#: The per-stream table's columns: every figure of a StreamLatency, in its order.
LATENCY_COLUMNS = tuple(f.name for f in fields(StreamLatency))


def latency_table(
    entries: list[StreamLatency],
) -> tuple[list[str], list[list[tuple[str, bool]]]]:
    """Columns (every figure of an entry, none without entries) and rows of the latency
    table."""
    columns = list(LATENCY_COLUMNS) if entries else []
    rows = [[latency_cell(getattr(entry, col)) for col in columns] for entry in entries]
    return columns, rows


def observed_statuses(info: RunInfo) -> str:
    """``200 ×42, 400 ×4`` from ``info.observed_statuses``, empty when absent."""
    counts = info.observed_statuses
    if counts is None:
        return ""
    return ", ".join(f"{status} ×{n}" for status, n in sorted(counts.items()))


def report_context(results: Results) -> dict[str, Any]:
    """Everything the report template shows, computed from ``results`` alone."""
    strict = is_strict(results)
    coverage = coverage_of(results)
    rows = [
        requirement_view(t, strict=strict, coverage=coverage)
        for t in ordered(results.tallies.values())
    ]
    # A requirement whose check raised on some exchanges may have failed on others: its
    # failures are listed too (the suite defect is listed apart).
    failures = [r for r in rows if r["status"] in (FAILED, ERROR) and r["failed"]] + [
        r for r in rows if r["status"] == WARNED
    ]
    word = verdict_of(results).word
    columns, latency_rows = latency_table(results.latency)
    info = results.info
    # Only a run that was passed gets green; incomplete is amber, never a pass; a shard's
    # own word is not the run's verdict.
    known = word in ("passed", "failed", "incomplete", ERROR)
    verdict_class = word.value if known and not info.shard else "unknown"
    verdict_text = MEANINGS.get(word, "The run recorded this verdict.")
    verdict = word.value
    if info.shard:
        verdict, verdict_text = f"shard {info.shard}", shard_text(word)
    return {
        "info": info,
        "target": "unknown target" if info.target is None else info.target,
        "verdict": verdict,
        "verdict_class": verdict_class,
        "verdict_text": verdict_text,
        "coverage": coverage,
        "coverage_recorded": results.verdict is not None,
        "buckets": buckets_of(results),
        "suite_errors": [r for r in rows if r["status"] == ERROR],
        "baseline_warnings": list(info.baseline_warnings or ()),
        "strict": strict,
        "errata": list(info.errata or ()),
        "policies": policies_of(info),
        "conventions": list(info.conventions or ()),
        "baseline": info.baseline,
        "spent": results.spent,
        "wall_time": info.wall_time,
        "levels": LEVELS,
        "summary": by_area_and_level(results),
        "scores": scores(results),
        "offered": offered_of(results),
        "offered_legend": OFFERED_LEGEND,
        "requirements": rows,
        "deciding": sum(1 for r in failures if r["status"] != WARNED),
        "failures": failures,
        "capabilities": capability_rows(results),
        "latency_summary": LatencySummary.of(results.latency, info.concurrency),
        "observed": observed_statuses(info),
        "latency_columns": columns,
        "latency_rows": latency_rows,
        "schema_version": RESULTS_SCHEMA_VERSION,
    }


def render_html(results: Results) -> str:
    """The HTML report of ``results`` as one self-contained document."""
    return render("report.html.j2", **report_context(results))


def write_html(results: Results, path: Path) -> Path:
    """Write the HTML report of ``results`` at ``path``."""
    path.write_text(render_html(results), encoding="utf-8")
    return path


def comparison_html(comparison: Comparison) -> str:
    """The comparison as one self-contained HTML document."""
    return render(
        "compare.html.j2",
        c=comparison,
        offered_legend=OFFERED_LEGEND,
        scores_legend=SCORES_LEGEND,
        differ_legend=DIFFER_LEGEND,
        schema_version=RESULTS_SCHEMA_VERSION,
    )
