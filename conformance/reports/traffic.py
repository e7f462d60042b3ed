"""The reports of judged traffic: the suite's own four, plus the live verdict as JSON and HTML.

``completions-conformance judge`` writes them once, the proxy on exit (and serves the
live verdict at /_conformance/ while it runs). junit.xml, report.html, results.json and
summary.md are the run's reports (reports.write_all) over every model's traffic;
verdict.json and traffic.html add the verdict per model and per requirement, with the
evidence of each finding. Target-supplied text reaches the page only through the
autoescaping template.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conformance.judging.traffic_judge import Snapshot
from conformance.judging.verdict.results import RESULTS_SCHEMA_VERSION
from conformance.reports import write_all
from conformance.reports.render import render


def render_traffic(verdict: Mapping[str, Any], *, refresh: int | None = None) -> str:
    """The live verdict page from ``Snapshot.to_json()``; ``refresh``: reload every N s."""
    return render(
        "traffic.html.j2", v=verdict, refresh=refresh, schema_version=RESULTS_SCHEMA_VERSION
    )


def write_traffic_reports(snapshot: Snapshot, report_dir: Path) -> list[Path]:
    """Every report of the traffic judged: the run's four, verdict.json and traffic.html."""
    written = write_all(snapshot.overall, report_dir)
    data = snapshot.to_json()
    verdict = report_dir / "verdict.json"
    verdict.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    page = report_dir / "traffic.html"
    page.write_text(render_traffic(data), encoding="utf-8")
    return [*written, verdict, page]
