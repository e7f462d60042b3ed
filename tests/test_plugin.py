"""The pytest plugin end to end: the suite against the embedded and external targets."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support import Targets, target_args

from conformance.plugin import SUITE_DIR

QUICK = ("-p", "no:cacheprovider", "--max-examples", "4")


def run_suite(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(str(SUITE_DIR), *QUICK, *args)


@pytest.mark.parametrize("spec", ["aihubmix", "nscale"])
def test_embedded_default_passes_and_writes_reports(
    pytester: pytest.Pytester, tmp_path: Path, spec: str
) -> None:
    result = run_suite(pytester, "--spec", spec, "--report-dir", str(tmp_path))
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*conformance: errata applied: *", "*verdict: passed*"])
    suite = ET.parse(tmp_path / "junit.xml").getroot()
    names = {case.get("name") for case in suite.iter("testcase")}
    assert {"RESP-SCHEMA", "CHOICES-COUNT", "HTTP-STATUS-DECLARED"} <= names
    assert suite.find("testcase/failure") is None
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["meta"]["spec"] == spec and results["spent"]["requests"] > 0


def test_external_target_with_a_fault_fails_naming_the_requirement(
    pytester: pytest.Pytester, targets: Targets, tmp_path: Path
) -> None:
    url = targets.get("aihubmix", "empty-id").server.url
    result = run_suite(pytester, *target_args(url), "--report-dir", str(tmp_path))
    assert result.ret == 1
    assert "RESP-ID [MUST] `id` is a non-empty string." in result.stdout.str()
    suite = ET.parse(tmp_path / "junit.xml").getroot()
    failed = [
        case.get("name") for case in suite.iter("testcase") if case.find("failure") is not None
    ]
    assert failed == ["RESP-ID"]


def test_external_conformant_target_passes(pytester: pytest.Pytester, targets: Targets) -> None:
    url = targets.get("nscale").server.url
    result = run_suite(
        pytester, "--spec", "nscale", *target_args(url), "--report-dir", str(pytester.path / "out")
    )
    assert result.ret == 0, result.stdout.str()


def test_strict_spec_applies_no_errata(pytester: pytest.Pytester) -> None:
    result = run_suite(pytester, "--spec", "nscale", "--strict-spec", "--collect-only")
    result.stdout.fnmatch_lines(["*no errata applied (--strict-spec)*"])
    assert "report:" not in result.stdout.str(), "collecting only writes no report"


def test_plugin_is_inert_outside_the_suite(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok():\n    assert True\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "conformance:" not in result.stdout.str()


def test_unknown_requirement_id_is_one_clear_error(pytester: pytest.Pytester) -> None:
    result = run_suite(pytester, "--checks", "NOPE-1")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: conformance: unknown requirement ID(s): NOPE-1"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
