"""The pytest plugin end to end: the suite against the embedded and external targets."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from support import API_KEY, Targets, target_args

from conformance.front.plugin import SUITE_DIR

QUICK = ("-p", "no:cacheprovider", "--max-examples", "4")


def run_suite(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(str(SUITE_DIR), *QUICK, *args)


@pytest.mark.parametrize(
    "spec", ["aihubmix", pytest.param("nscale", marks=pytest.mark.exhaustive)]
)  # nscale's whole runs are in the fault corpus sample and the exhaustive tier
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
    assert "RESP-ID [MUST] `id` is a non-empty string" in result.stdout.str()
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
    result = run_suite(pytester, "--spec", "aihubmix", "--strict-spec", "--collect-only")
    result.stdout.fnmatch_lines(
        ["*errata applied: none (--strict-spec)*", "*policies: none (--strict-spec)*"]
    )
    assert "report:" not in result.stdout.str(), "collecting only writes no report"


def test_strict_spec_without_a_valid_prompt_is_one_error_line(pytester: pytest.Pytester) -> None:
    """Nscale as written admits no prompt: one line, not 50 invalid "valid" requests."""
    result = run_suite(pytester, "--spec", "nscale", "--strict-spec")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: conformance: spec 'nscale' as written admits no prompt*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_plugin_is_inert_outside_the_suite(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ok():\n    assert True\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "conformance:" not in result.stdout.str()


def test_unknown_requirement_id_is_one_clear_error(pytester: pytest.Pytester) -> None:
    result = run_suite(pytester, "--checks", "NOPE-1")
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        ["ERROR: conformance: --checks: unknown requirement ID 'NOPE-1'; known: *"]
    )
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_a_partial_run_is_incomplete_and_a_v1_base_url_is_used_once(
    pytester: pytest.Pytester, targets: Targets, tmp_path: Path
) -> None:
    """One scenario alone leaves MUSTs untested: exit 7, listed, never 'passed'."""
    url = targets.get("aihubmix").server.url
    args = ("--target-url", f"{url}/v1", "--model", "reference-model", "--api-key", API_KEY)
    result = pytester.runpytest_inprocess(
        str(SUITE_DIR), *QUICK, *args, "-k", "test_unknown_model", "--report-dir", str(tmp_path)
    )
    out = result.stdout.lines
    assert result.ret == 7, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            f"conformance: using base URL {url} (the spec's /v1 was already in --target-url)",
            "untested MUST: *: no exchange of this run exercised it",
        ]
    )
    assert out[-1].startswith("verdict: incomplete (") and "MUST requirement(s) untested" in out[-1]
    meta = json.loads((tmp_path / "results.json").read_text())["meta"]
    assert meta["verdict"] == "incomplete"
    assert {"id": "RESP-SCHEMA", "reason": "no exchange of this run exercised it"} in meta[
        "coverage"
    ]["untested"]
    assert meta["coverage"]["deselected"] == []


def test_verdict_comes_last_after_the_short_summary(
    pytester: pytest.Pytester, targets: Targets, tmp_path: Path
) -> None:
    url = targets.get("aihubmix", "empty-id").server.url
    result = pytester.runpytest_inprocess(
        str(SUITE_DIR), *QUICK, *target_args(url), "-rf", "--checks", "RESP-ID",
        "-k", "valid_requests", "--report-dir", str(tmp_path),
    )  # fmt: skip
    assert result.ret == 1
    out = result.stdout.lines
    last_failed = max(i for i, line in enumerate(out) if line.startswith("FAILED "))
    stats = max(i for i, line in enumerate(out) if " failed" in line and line.startswith("="))
    verdict = next(i for i, line in enumerate(out) if line.startswith("verdict: "))
    assert last_failed < stats < verdict == len(out) - 1, "pytest's own footer comes before"
    assert out[verdict].startswith("verdict: failed (1 requirement(s) failed: RESP-ID)")
    assert any(line.startswith("failed MUST: RESP-ID on ") for line in out[stats:verdict])


def test_terminal_shows_advisory_failures_capabilities_and_what_was_left_out(
    pytester: pytest.Pytester, targets: Targets, tmp_path: Path
) -> None:
    """What the reports show, the screen shows: a SHOULD failure that does not decide, a
    capability the target ignores, requirements deselected by --checks and tests by -k;
    after pytest's footer, verdict last."""
    url = targets.get("aihubmix", "choices-ignore-n", "missing-request-id-header").server.url
    result = pytester.runpytest_inprocess(
        str(SUITE_DIR), *QUICK, *target_args(url), "-k", "test_capabilities",
        "--checks", "REQUEST-ID-HEADER,RESP-SCHEMA", "--report-dir", str(tmp_path),
    )  # fmt: skip
    out = result.stdout.lines
    # Nothing that decides failed: the SHOULD is advisory, n is not required, the probes
    # exercised RESP-SCHEMA, and deselected MUSTs have their stated reason.
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*= 1 passed, * deselected in *",  # pytest's footer, green...
            "*- conformance -*",  # ...then ours
            "failed SHOULD (advisory: does not decide): REQUEST-ID-HEADER on * exchange(s)",
            "capability n: ignored (*",
            "not run: * suite test(s) deselected (pytest -k/-m, --shard)*",
            "deselected: * MUST requirement(s) by --checks/--skip-checks*",
            "report: *summary.md",
            "counts: 1 SHOULD failed (advisory), 1 capability(ies) not offered, *MUST deselected*",
        ]
    )
    assert out[-1].startswith("verdict: passed; ")


def test_required_capabilities_not_offered_fail_the_run(
    pytester: pytest.Pytester, targets: Targets
) -> None:
    """A target that ignores echo fails a run that requires echo; logprobs is offered."""
    url = targets.get("aihubmix", "echo-ignored").server.url
    result = pytester.runpytest_inprocess(
        str(SUITE_DIR), *QUICK, *target_args(url), "--checks", "MODEL-NOT-FOUND",
        "-k", "test_capabilities", "--require-capabilities", "echo,logprobs",
        "--report-dir", str(pytester.path / "out"),
    )  # fmt: skip
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["verdict: failed (required capabilities not offered: echo: ignored*"]
    )
    assert "logprobs" not in result.stdout.str().split("verdict: failed", 1)[1].splitlines()[0]


def test_collect_only_sends_no_request(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--collect-only lists the items; the up-front queue (concurrency > 1) is not started."""
    from conformance.run.client import Client

    sent: list[str] = []
    original = Client.send

    def recording(self: Client, case: Any) -> Any:
        sent.append(case.label)
        return original(self, case)

    monkeypatch.setattr(Client, "send", recording)
    result = pytester.runpytest_inprocess(
        str(SUITE_DIR), *QUICK, "--collect-only", "--concurrency", "4"
    )
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*tests collected*"])
    assert [label for label in sent if label != "preflight"] == []


REWRITE_PROBE = """
import sys

def pytest_sessionfinish(session):
    for name in ("hypothesis.core", "anyio.to_thread", "conformance.run.engine",
                 "conformance.run.sdk", "conformance.test_completions"):
        rewritten = "@pytest_ar" in vars(sys.modules[name])
        print(f"probe: {name} rewritten={rewritten}")
"""


def test_the_suite_runs_library_code_without_assertion_rewriting(
    pytester: pytest.Pytester,
) -> None:
    """Where no bytecode is written, pytest would parse and compile again on every run each
    module of hypothesis, anyio and this package (~2 s of CPU), some on worker threads,
    where CPython 3.11's ast is not thread-safe. Only the suite's test modules are
    rewritten; modules first imported during the run (sdk, openai's anyio) are not."""
    pytester.makepyfile(probe_rewrite=REWRITE_PROBE)
    result = run_suite(pytester, "-p", "probe_rewrite", "--report-dir", str(pytester.path))
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*probe: hypothesis.core rewritten=False",
            "*probe: anyio.to_thread rewritten=False",
            "*probe: conformance.run.engine rewritten=False",
            "*probe: conformance.run.sdk rewritten=False",
            "*probe: conformance.test_completions rewritten=True",
        ]
    )


FREEZE_PROBE = """
import gc

def pytest_sessionfinish(session):
    print(f"probe: frozen={gc.get_freeze_count() > 0}")
"""


def test_a_suite_process_freezes_its_heap_but_not_inside_another_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a run imported is taken out of the collector's sight once it is assembled
    (plugin.freeze_heap: pytest's five collections at unconfigure and the interpreter's
    teardown walk it no more); not in a process that runs inside another pytest's test,
    which goes on after the run."""
    pytester.makepyfile(probe_freeze=FREEZE_PROBE)
    args = ("-p", "probe_freeze", "--report-dir", str(pytester.path))
    nested = run_suite(pytester, *args)
    assert nested.ret == 0, nested.stdout.str()
    nested.stdout.fnmatch_lines(["*probe: frozen=False"])
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    alone = run_suite(pytester, *args)
    assert alone.ret == 0, alone.stdout.str()
    alone.stdout.fnmatch_lines(["*probe: frozen=True"])


def test_report_paths_are_printed_normalised(pytester: pytest.Pytester, targets: Targets) -> None:
    """Issue 27, item 8: ``--report-dir ../runs/x`` printed ``.../repo/../runs/x/junit.xml``."""
    url = targets.get("aihubmix").server.url
    result = pytester.runpytest_inprocess(
        str(SUITE_DIR), *QUICK, *target_args(url), "-k", "unknown_model",
        "--report-dir", "../runs/x",
    )  # fmt: skip
    shown = [
        line.removeprefix("report: ") for line in result.stdout.lines if line.startswith("report: ")
    ]
    expected = (pytester.path.parent / "runs" / "x").resolve()
    assert shown == [
        str(expected / n) for n in ("junit.xml", "report.html", "results.json", "summary.md")
    ]
    assert all(Path(p).is_file() for p in shown)
