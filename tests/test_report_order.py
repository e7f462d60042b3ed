"""report.html and summary.md put what failed and what was not tested first; the errata
and policies stay available, folded below; target text stays escaped."""

from __future__ import annotations

from typing import Any

from support import capability_table, set_meta

from conformance.judging.requirements import Level, Requirement
from conformance.judging.verdict.results import Finding, Results
from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange, Headers
from conformance.reports.html import render_html
from conformance.reports.run_summary import summary_markdown

HOSTILE = "<script>alert(1)</script>"


def _ok(_: Any) -> bool:
    return True


def _results() -> Results:
    reqs = [
        Requirement("RESP-ID", Level.MUST, "schema", "id is a string", "spec", _ok, _ok),
        Requirement("AUTH-REQUIRED", Level.MUST, "auth", "auth", "spec", _ok, _ok),
    ]
    results = Results.for_requirements(reqs)
    exchange = Exchange(
        case=Case({"model": "m", "prompt": "x"}, label="text prompt"),
        url="http://127.0.0.1/v1/completions",
        request_headers={},
        request_body=b"{}",
        status=200,
        headers=Headers([("content-type", "application/json")]),
        body=b'{"id": ""}',
    )
    results.record(exchange, [Finding("RESP-ID", "failed", message=f"empty id {HOSTILE}")])
    set_meta(
        results,
        **{
            "target": "http://t",
            "spec": "aihubmix",
            "model": HOSTILE,
            "verdict": "failed",
            "coverage": {
                "untested": [{"id": "AUTH-REQUIRED", "reason": "no exchange exercised it"}],
                "not_applicable": [],
                "deselected": [],
            },
            "skipped_scenarios": [{"reason": "deep fuzz is opt-in: --fuzz N", "covers": []}],
            "errata": [{"id": "nullable-in-openapi-3.1", "title": "t", "detail": HOSTILE}],
            "policies": [{"id": "done-sentinel", "kind": "policy", "title": "t", "detail": "d"}],
        },
    )
    results.capabilities |= capability_table({"n": {"outcome": "ignored", "detail": HOSTILE}})
    return results


def test_html_shows_failures_and_untested_before_the_folded_errata_and_policies() -> None:
    page = render_html(_results())
    failures, untested = page.index("<h2>Failures"), page.index("<h2>Not tested</h2>")
    errata = page.index("Spec errata applied (1)")
    policies = page.index("Suite policies in force (1)")
    assert failures < untested < errata < policies
    assert page.index("nullable-in-openapi-3.1") > failures
    # Folded: inside a closed <details> (no "open" attribute).
    assert '<details class="registry"><summary><strong>Spec errata applied' in page
    assert HOSTILE not in page and "&lt;script&gt;" in page


def test_summary_md_shows_failures_and_untested_before_the_folded_registry() -> None:
    md = summary_markdown(_results())
    failed = md.index("### Failed requirements (1)")
    untested = md.index("### Not tested")
    folded = md.index("<details><summary>Spec errata applied and suite policies in force")
    assert failed < untested < folded
    assert md.index("nullable-in-openapi-3.1") > folded
    assert "Scenarios not run: deep fuzz is opt-in: --fuzz N." in md
    assert md.rstrip().endswith("</details>")
    assert HOSTILE not in md
