"""Report writers: they read a run's Results and never recompute findings.

``write_all`` is what the plugin calls at the end of a session: it writes every format of
``REPORT_WRITERS`` (a report format is one module here and one entry there;
ARCHITECTURE.md, "Add a report format"). The single writers and the baseline comparison are
public for tools that post-process ``results.json``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from conformance.judging.verdict.baseline import check_baseline, compare_to_baseline
from conformance.judging.verdict.events import Event, RunFinished
from conformance.judging.verdict.results import Results
from conformance.judging.verdict.run_info import BaselineDiff
from conformance.reports.html import render_html, write_html
from conformance.reports.junit import write_junit
from conformance.reports.run_summary import summary_markdown, write_summary

__all__ = [
    "BaselineDiff",
    "ReportWriter",
    "check_baseline",
    "compare_to_baseline",
    "render_html",
    "summary_markdown",
    "write_all",
    "write_html",
    "write_json",
    "write_junit",
    "write_summary",
]


def write_json(results: Results, path: Path) -> Path:
    """The machine-readable results (schema: docs/results-schema.md)."""
    path.write_text(results.dumps() + "\n", encoding="utf-8")
    return path


#: Writes one report of a run's Results to the path given; returns the path written.
WriteReport = Callable[[Results, Path], Path]

#: Every report a run writes, by file name, in the order written.
REPORT_WRITERS: dict[str, WriteReport] = {
    "junit.xml": write_junit,
    "report.html": write_html,
    "results.json": write_json,
    "summary.md": write_summary,
}


def write_all(results: Results, report_dir: Path) -> list[Path]:
    """Write every report of ``REPORT_WRITERS`` into ``report_dir``; return the files written.

    ``results`` carries the verdict the judge core decided (``results.verdict``): every
    report is a function of these typed objects."""
    report_dir.mkdir(parents=True, exist_ok=True)
    return [write(results, report_dir / name) for name, write in REPORT_WRITERS.items()]


@dataclass
class ReportWriter:
    """A listener of the run's events (conformance.judging.verdict.events) that writes every report
    into ``report_dir`` when it hears RunFinished; ``written`` lists the files."""

    report_dir: Path
    written: list[Path] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        if isinstance(event, RunFinished):
            self.written = write_all(event.results, self.report_dir)
