"""The HTML report: one self-contained, offline file for the people who read a run.

A provider's team opens it when the gate fails (what broke, with a reproducer); a buyer
opens it when choosing a vendor (verdict, scores, capabilities). All target-supplied text
reaches the page through the autoescaping template, never through string concatenation.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conformance.judging.results import RESULTS_SCHEMA_VERSION, Results, Tally, latency_summary
from conformance.reports.render import render
from conformance.reports.summary import (
    ERROR,
    FAILED,
    LEVELS,
    OFFERED_LEGEND,
    STATUS_LABELS,
    VERDICTS,
    WARNED,
    buckets_of,
    by_area_and_level,
    capability_rows,
    coverage_of,
    evidence_label,
    is_strict,
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


def example_view(example: Mapping[str, Any]) -> dict[str, Any]:
    """One piece of evidence with every field present, bodies indented, transcript as lines."""
    request = example.get("request") or {}
    transcript = example.get("transcript")
    return {
        "message": str(example.get("message", "")),
        "outcome": str(example.get("outcome", "failed")),
        "fingerprint": str(example.get("fingerprint") or ""),
        "path": example.get("path"),
        "expected": example.get("expected"),
        "actual": example.get("actual"),
        "case": str(example.get("case") or ""),
        "mode": str(example.get("mode") or ""),
        "breaks": example.get("breaks"),
        "method": str(request.get("method", "POST")),
        "url": str(request.get("url", "")),
        "request_headers": sorted((request.get("headers") or {}).items()),
        "request_body": pretty_body(str(request.get("body", ""))),
        "status": example.get("status"),
        "transport_error": example.get("transport_error"),
        "response_headers": list((example.get("response_headers") or {}).items()),
        "body_excerpt": pretty_body(str(example.get("body_excerpt", ""))),
        "transcript": transcript_lines(example) if transcript is not None else None,
        "stream_error": example.get("stream_error"),
        "elapsed": example.get("elapsed"),
        "curl": str(example.get("curl", "")),
    }


def requirement_view(tally: Tally, *, strict: bool) -> dict[str, Any]:
    """A row of the requirement table, with its examples for the failure section."""
    status = status_of(tally, strict=strict)
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
        "examples": [
            example_view(ex) for ex in tally.examples if ex.get("outcome", "failed") == "failed"
        ][:MAX_SHOWN],
        "errors": [example_view(ex) for ex in tally.examples if ex.get("outcome") == "error"][
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


def latency_table(
    entries: list[dict[str, Any]],
) -> tuple[list[str], list[list[tuple[str, bool]]]]:
    """Columns (every key, in order of first appearance) and rows of the latency table."""
    columns: list[str] = []
    for entry in entries:
        columns += [key for key in entry if key not in columns]
    rows = [[latency_cell(entry.get(col)) for col in columns] for entry in entries]
    return columns, rows


def observed_statuses(meta: Mapping[str, Any]) -> str:
    """``200 ×42, 400 ×4`` from ``meta["observed_statuses"]``, empty when absent."""
    counts = meta.get("observed_statuses")
    if not isinstance(counts, Mapping):
        return ""
    return ", ".join(f"{status} ×{n}" for status, n in sorted(counts.items()))


def report_context(results: Results) -> dict[str, Any]:
    """Everything the report template shows, computed from ``results`` alone."""
    strict = is_strict(results)
    rows = [requirement_view(t, strict=strict) for t in ordered(results.tallies.values())]
    # A requirement whose check raised on some exchanges may have failed on others: its
    # failures are listed too (the suite defect is listed apart).
    failures = [r for r in rows if r["status"] in (FAILED, ERROR) and r["failed"]] + [
        r for r in rows if r["status"] == WARNED
    ]
    verdict = verdict_of(results)
    columns, latency_rows = latency_table(results.latency)
    meta = results.meta
    # Only a run that was passed gets green; incomplete is amber, never a pass; a shard's
    # own word is not the run's verdict.
    known = verdict in ("passed", "failed", "incomplete", ERROR)
    verdict_class = verdict if known and not meta.get("shard") else "unknown"
    verdict_text = VERDICTS.get(verdict, "The run recorded this verdict.")
    if meta.get("shard"):
        verdict, verdict_text = f"shard {meta['shard']}", shard_text(verdict)
    return {
        "meta": meta,
        "target": str(meta.get("target", "unknown target")),
        "verdict": verdict,
        "verdict_class": verdict_class,
        "verdict_text": verdict_text,
        "coverage": coverage_of(results),
        "buckets": buckets_of(results),
        "suite_errors": [r for r in rows if r["status"] == ERROR],
        "baseline_warnings": list(meta.get("baseline_warnings") or []),
        "strict": strict,
        "errata": list(meta.get("errata") or []),
        "policies": policies_of(meta),
        "conventions": list(meta.get("conventions") or []),
        "baseline": meta.get("baseline") or None,
        "spent": results.spent,
        "wall_time": meta.get("wall_time"),
        "levels": LEVELS,
        "summary": by_area_and_level(results),
        "scores": scores(results),
        "offered": offered_of(results),
        "offered_legend": OFFERED_LEGEND,
        "requirements": rows,
        "deciding": sum(1 for r in failures if r["status"] != WARNED),
        "failures": failures,
        "capabilities": capability_rows(results),
        "latency_summary": latency_summary(results.latency, meta.get("concurrency")),
        "observed": observed_statuses(meta),
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
