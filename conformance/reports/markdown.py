"""The comparison as GitHub-flavoured Markdown, for a CI job summary.

Target-supplied text (target names, spec titles) can hold ``|``, newlines and markup; every
cell goes through :func:`cell`, which keeps the table intact and the text inert.
"""

from __future__ import annotations

from collections.abc import Iterable

from conformance.judging.requirements import Level
from conformance.judging.verdict.latency import LatencySummary
from conformance.judging.verdict.results import CapabilityOutcome
from conformance.judging.verdict.run_info import RunInfo
from conformance.judging.verdict.verdict import Uncovered
from conformance.reports.matrix import (
    DESELECTED,
    DIFFER_LEGEND,
    FAIL,
    MISSING,
    NOT_APPLIES,
    PASS,
    SCORES_LEGEND,
    SUITE_ERROR,
    UNTESTED,
    Cell,
    Comparison,
    Offer,
)
from conformance.reports.summary import OFFERED_LEGEND

_ICON = {
    PASS: "✅ pass",
    FAIL: "❌ fail",
    MISSING: "⊘ unsupported",
    UNTESTED: "➖ not tested",
    NOT_APPLIES: "○ not applicable",  # why: the table under the matrix
    DESELECTED: "➖ deselected",
    SUITE_ERROR: "💥 suite error",
}
_VERDICT = {"passed": "✅ passed", "failed": "❌ failed"}  # others: ⚠️ and the word
_OFFER = {
    CapabilityOutcome.OFFERED: "✅",
    CapabilityOutcome.DECLINED: "⊘",
    CapabilityOutcome.IGNORED: "⚠️",
    CapabilityOutcome.BROKEN: "❌",
}
_LEVEL_LABEL = {Level.MUST: "MUST passed", Level.SHOULD: "SHOULD passed"}


def cell(text: object) -> str:
    """``text`` made safe for a Markdown table cell: no HTML, no column breaks, one line."""
    out = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    out = out.replace("\\", "\\\\").replace("|", "\\|")
    return "<br>".join(out.splitlines()) if out else " "


def spec_cell(info: RunInfo) -> str:
    """The document a run was judged against: its name, and its digest where recorded
    (runs against different documents are not comparable row by row)."""
    name = "" if info.spec is None else str(info.spec)
    digest = str(info.spec_sha256 or "")
    return f"{name} (sha256 {digest[:12]})" if digest else name


def table(header: Iterable[object], rows: Iterable[Iterable[object]]) -> list[str]:
    """A Markdown table; every cell is escaped with :func:`cell`."""
    head = [cell(h) for h in header]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def matrix_cell(c: Cell) -> str:
    """``❌ fail 3/40`` and the like."""
    return f"{_ICON[c.outcome]} {c.detail}".strip()


def offer_cell(o: Offer) -> str:
    """``✅ offered``, ``⚠️ ignored (1 choice(s) for 2 asked)``, or ``not probed``."""
    if not o.outcome:
        return "not probed"
    text = f"{_OFFER.get(o.outcome, '')} {o.outcome}".strip()
    return (
        text if o.outcome == CapabilityOutcome.OFFERED or not o.detail else f"{text} ({o.detail})"
    )


def latency_cell(summary: LatencySummary) -> str:
    """``TTFB p50/p90/p99 0.120/0.300/0.410 s; ...`` of one run, or ``n/a``."""
    if not summary.streams:
        return "n/a"
    parts = [
        f"{name} {'/'.join(f'{v:.3f}' for v in figure.values)}"
        for figure, name in (
            (summary.ttfb_s, "TTFB"),
            (summary.p50_gap_s, "gap"),
            (summary.total_s, "total"),
        )
        if figure is not None
    ]
    where = summary.concurrency
    return (
        "; ".join(parts) + f" (p50/p90/p99 s, concurrency {where if where is not None else 'n/a'})"
    )


def _untested(entries: tuple[Uncovered, ...]) -> str:
    """``2: AUTH-REQUIRED, RESP-ID`` or ``none``."""
    return f"{len(entries)}: {', '.join(u.id for u in entries)}" if entries else "none"


def comparison_markdown(comparison: Comparison) -> str:
    """The whole comparison: scores, requirement matrix, capabilities, baseline diffs."""
    names = [t.name for t in comparison.targets]
    lines = ["# Completions conformance comparison", ""]
    if comparison.differences:
        lines += [f"> ⚠️ **Not directly comparable.** {DIFFER_LEGEND}", ""]
        lines += table(
            ["Setting", *names], ([d.setting, *d.values] for d in comparison.differences)
        )
        lines.append("")
    overview = [
        ["Verdict", *(_VERDICT.get(t.verdict, f"⚠️ {t.verdict}") for t in comparison.targets)],
        *(
            [_LEVEL_LABEL[level], *(t.scores[level].text() for t in comparison.targets)]
            for level in (Level.MUST, Level.SHOULD)
        ),
        ["Capabilities offered", *(t.offered.text() for t in comparison.targets)],
        ["Untested", *(_untested(t.coverage.untested) for t in comparison.targets)],
        ["Not applicable", *(_untested(t.coverage.not_applicable) for t in comparison.targets)],
        ["Spec", *(spec_cell(t.info) for t in comparison.targets)],
        ["Model", *("" if t.info.model is None else t.info.model for t in comparison.targets)],
        [
            "Requests / tokens",
            *(f"{t.spent.requests} / {t.spent.tokens}" for t in comparison.targets),
        ],
        ["Streaming latency", *(latency_cell(t.latency) for t in comparison.targets)],
    ]
    lines += table(["", *names], overview)
    lines += [
        "",
        f"{SCORES_LEGEND} {OFFERED_LEGEND}",
        "",
        "## Requirements",
        "",
    ]
    lines += table(
        ["Requirement", "Level", "Area", *names],
        (
            [f"`{row.id}`", row.level, row.area, *(matrix_cell(c) for c in row.cells)]
            for row in comparison.rows
        ),
    )
    excused = [
        [f"`{row.id}`", name, c.reason]
        for row in comparison.rows
        for name, c in zip(names, row.cells, strict=True)
        if c.outcome == NOT_APPLIES
    ]
    if excused:
        lines += ["", "Not applicable, and why:", ""]
        lines += table(["Requirement", "Target", "Why"], excused)
    if comparison.capabilities:
        lines += ["", "## Capabilities (one probe per feature)", ""]
        lines += table(
            ["Feature", *names],
            (
                [feature, *(offer_cell(o) for o in per_target)]
                for feature, per_target in comparison.capabilities
            ),
        )
    for target in comparison.targets:
        if target.baseline is not None:
            lines += ["", f"## Baseline diff: {cell(target.name)}", ""]
            lines += table(
                ["New failures", "Known failures", "Fixed"],
                [
                    [
                        ", ".join(prints) or "none"
                        for prints in (
                            target.baseline.new,
                            target.baseline.known,
                            target.baseline.fixed,
                        )
                    ]
                ],
            )
    return "\n".join(lines) + "\n"
