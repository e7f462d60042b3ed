"""The errata/policies registry is shown everywhere a run is described: ``--help``, the
terminal header, and every report (results.json, report.html, JUnit properties, summary.md).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conformance.front.plugin import SUITE_DIR
from conformance.front.runner import run_suite
from conformance.judging.document.errata import ERRATA
from conformance.judging.document.policies import POLICIES
from conformance.judging.document.spec import load_spec
from conformance.run.session import Settings, Setup

POLICY_IDS = [p.id for p in POLICIES]


def test_help_names_every_erratum_and_policy(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(str(SUITE_DIR), "-p", "no:cacheprovider", "--help")
    # argparse wraps long help, also after a hyphen: undo the wrapping before searching.
    text = re.sub(r"\s+", " ", re.sub(r"-\n\s+", "-", result.stdout.str()))
    missing = [i for i in [*(e.id for e in ERRATA), *POLICY_IDS] if i not in text]
    assert missing == []


@pytest.mark.parametrize("spec", ["aihubmix", "nscale"])
def test_header_names_the_errata_applied_and_the_policies(
    pytester: pytest.Pytester, spec: str
) -> None:
    result = pytester.runpytest_subprocess(
        str(SUITE_DIR), "-p", "no:cacheprovider", "--spec", spec, "--collect-only"
    )
    applied = ", ".join(e.id for e in load_spec(spec).errata)
    result.stdout.fnmatch_lines(
        [f"conformance: errata applied: {applied}", "conformance: policies: *"]
    )
    policies = next(line for line in result.outlines if "conformance: policies:" in line)
    assert [p.id for p in load_spec(spec).policies] == policies.split(": ", 2)[2].split(", ")


def _reports(spec: str, out: Path, *, strict: bool = False) -> dict[str, str]:
    setup = Setup(settings=Settings(max_examples=1), spec=spec, strict_spec=strict)
    run_suite(setup, scenarios=(), report_dir=out)
    return {
        name: (out / name).read_text(encoding="utf-8")
        for name in ("results.json", "report.html", "junit.xml", "summary.md")
    }


@pytest.mark.parametrize("spec", ["aihubmix", "nscale"])
def test_every_report_names_the_errata_and_the_policies(spec: str, tmp_path: Path) -> None:
    loaded = load_spec(spec)
    errata, policies = [e.id for e in loaded.errata], [p.id for p in loaded.policies]
    assert errata and policies
    reports = _reports(spec, tmp_path)
    meta = json.loads(reports["results.json"])["meta"]
    assert [e["id"] for e in meta["errata"]] == errata
    assert [p["id"] for p in meta["policies"] if p["kind"] == "policy"] == policies
    props = {
        p.get("name"): p.get("value") for p in ET.fromstring(reports["junit.xml"]).iter("property")
    }
    assert props["errata"] == ", ".join(errata)
    assert props["policies"] == ", ".join(policies)
    for name in ("report.html", "summary.md"):
        missing = [i for i in [*errata, *policies] if i not in reports[name]]
        assert missing == [], name
    assert f"policies: {', '.join(policies)}" in reports["summary.md"]


def test_strict_spec_reports_say_none(tmp_path: Path) -> None:
    reports = _reports("aihubmix", tmp_path, strict=True)
    assert (
        "Errata applied: none (--strict-spec) · policies: none (--strict-spec)"
        in (reports["summary.md"])
    )
    assert "Suite policies</dt><dd>none (--strict-spec)" in reports["report.html"]
    assert "Suite policies in force" not in reports["report.html"]
    props = {
        p.get("name"): p.get("value") for p in ET.fromstring(reports["junit.xml"]).iter("property")
    }
    assert props["errata"] == props["policies"] == ""
