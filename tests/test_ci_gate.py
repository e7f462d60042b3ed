"""The CI gate over time (--baseline) and across jobs (--shard, conformance-merge)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support import Targets, target_args

from conformance.front.merge import main as merge_main
from conformance.front.plugin import SUITE_DIR
from conformance.judging.verdict.outcomes import BAD_INPUT

QUICK = ("-p", "no:cacheprovider", "--max-examples", "3")


def run(pytester: pytest.Pytester, url: str, out: Path, *args: str) -> pytest.RunResult:
    return pytester.runpytest_inprocess(
        str(SUITE_DIR), *QUICK, *target_args(url), "--report-dir", str(out), *args
    )


def test_baseline_known_failures_pass_new_ones_fail(
    pytester: pytest.Pytester, targets: Targets, tmp_path: Path
) -> None:
    first = run(pytester, targets.get("aihubmix", "empty-id").server.url, tmp_path / "a")
    assert first.ret == 1
    baseline = str(tmp_path / "a" / "results.json")

    again = run(
        pytester,
        targets.get("aihubmix", "empty-id").server.url,
        tmp_path / "b",
        "--baseline",
        baseline,
    )
    assert again.ret == 0, again.stdout.str()
    # Known failures are fingerprints (RESP-ID on every case); the line names their requirement.
    again.stdout.fnmatch_lines(["*baseline: * known (RESP-ID*), 0 new (-), 0 fixed (-)*"])
    assert json.loads((tmp_path / "b" / "results.json").read_text())["meta"]["verdict"] == "passed"

    other = run(
        pytester,
        targets.get("aihubmix", "created-millis").server.url,
        tmp_path / "c",
        "--baseline",
        baseline,
    )
    assert other.ret == 1
    other.stdout.fnmatch_lines(["*0 known (-), * new (RESP-CREATED*), * fixed (RESP-ID*)*"])


def test_a_known_defect_stays_known_on_other_requests(
    pytester: pytest.Pytester, targets: Targets, tmp_path: Path
) -> None:
    """RESP-ID fails on every answer: a baseline of the stop probe knows it on the edge
    requests too (the same defect; their labels differ, their fingerprints do not). A new
    fingerprint of a known failing requirement (another field, another way of being wrong)
    still fails the gate: tests/test_findings.py and tests/test_baseline.py."""
    url = targets.get("aihubmix", "empty-id").server.url
    only = ("--checks", "RESP-ID")
    assert run(pytester, url, tmp_path / "a", *only, "-k", "test_stop_probe").ret == 1
    baseline = ("--baseline", str(tmp_path / "a" / "results.json"))
    wider = "test_stop_probe or test_edge_requests"
    more = run(pytester, url, tmp_path / "c", *only, "-k", wider, *baseline)
    assert more.ret == 0, more.stdout.str()
    more.stdout.fnmatch_lines(["*baseline: 1 known (RESP-ID), 0 new (-), 0 fixed (-)*"])


def test_a_baseline_of_another_spec_is_refused(
    pytester: pytest.Pytester, targets: Targets, tmp_path: Path
) -> None:
    url = targets.get("aihubmix").server.url
    run(pytester, url, tmp_path / "a", "--checks", "RESP-ID", "-k", "test_stop_probe")
    result = run(
        pytester,
        targets.get("nscale").server.url,
        tmp_path / "b",
        "--spec",
        "nscale",
        "--baseline",
        str(tmp_path / "a" / "results.json"),
    )
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: conformance: --baseline *recorded with spec 'aihubmix'*"])


def test_bad_baseline_is_one_clear_error(pytester: pytest.Pytester, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    result = pytester.runpytest_inprocess(str(SUITE_DIR), "--baseline", str(bad))
    assert result.ret == 4
    result.stderr.fnmatch_lines(["ERROR: conformance: --baseline *"])


def test_shards_split_the_suite_and_merge_into_one_verdict(
    pytester: pytest.Pytester, targets: Targets, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = targets.get("aihubmix").server.url
    shards = [run(pytester, url, tmp_path / f"s{k}", "--shard", f"{k}/2") for k in (1, 2)]
    assert [s.ret for s in shards] == [0, 0]
    # Issue 27, item 4: a shard's last line says it is a shard and leaves the verdict to
    # the merge; it never reads "passed" over the MUSTs it left to the other shards.
    for k, shard in enumerate(shards, 1):
        last = [line for line in shard.outlines if line.strip()][-1]
        assert last.startswith(f"verdict: left to the merge (shard {k}/2: nothing failed"), last
        assert "passed" not in last and "MUST untested in this shard" in last, last
        page = (tmp_path / f"s{k}" / "summary.md").read_text(encoding="utf-8")
        assert page.startswith(
            f"## Completions conformance: shard {k}/2, verdict left to the merge"
        )
        assert "PASSED" not in page
        html = (tmp_path / f"s{k}" / "report.html").read_text(encoding="utf-8")
        assert f'<div class="word">shard {k}/2</div>' in html
        assert "One shard of a run: in its slice, nothing failed" in html
    ran = [json.loads((tmp_path / f"s{k}" / "results.json").read_text()) for k in (1, 2)]
    assert all(r["spent"]["requests"] > 0 for r in ran)
    assert (
        merge_main(
            [str(tmp_path / f"s{k}" / "results.json") for k in (1, 2)]
            + ["--report-dir", str(tmp_path / "merged")]
        )
        == 0
    )
    merged = json.loads((tmp_path / "merged" / "results.json").read_text())
    assert merged["spent"]["requests"] == sum(r["spent"]["requests"] for r in ran)
    assert merged["meta"]["verdict"] == "passed" and merged["meta"]["shards"] == 2
    assert "verdict: passed (2 shards)" in capsys.readouterr().out


def test_merge_fails_when_one_shard_fails(
    pytester: pytest.Pytester, targets: Targets, tmp_path: Path
) -> None:
    # One target for both shards (merge refuses shards of different targets); the first
    # shard deselects the failing requirement, so only the second fails.
    url = targets.get("aihubmix", "empty-id").server.url
    good = run(pytester, url, tmp_path / "g", "--shard", "1/2", "--skip-checks", "RESP-ID")
    bad = run(pytester, url, tmp_path / "b", "--shard", "2/2")
    assert (good.ret, bad.ret) == (0, 1)
    files = [str(tmp_path / d / "results.json") for d in ("g", "b")]
    assert merge_main([*files, "--report-dir", str(tmp_path / "m")]) == 1
    assert merge_main([str(tmp_path / "missing.json")]) == BAD_INPUT


def test_a_budget_cut_run_is_incomplete_not_passed(
    pytester: pytest.Pytester, targets: Targets, tmp_path: Path
) -> None:
    """Before: scenarios skipped by --budget-requests and yet ``verdict: passed``, exit 0."""
    url = targets.get("aihubmix").server.url
    result = run(pytester, url, tmp_path, "--budget-requests", "60", "--concurrency", "1")
    assert result.ret == 7
    result.stdout.fnmatch_lines(["verdict: incomplete (*because request budget spent*"])
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["meta"]["verdict"] == "incomplete" and data["meta"]["not_run"]


def test_a_scenario_the_budget_cut_short_shows_as_cut_in_pytests_own_lines(
    pytester: pytest.Pytester, targets: Targets, tmp_path: Path
) -> None:
    """Issue 27, item 5: with ``--budget-requests 20 -v`` pytest showed ``test_capabilities
    PASSED`` while the conformance block said that scenario was cut short."""
    url = targets.get("aihubmix").server.url
    result = run(pytester, url, tmp_path, "--budget-requests", "20", "--concurrency", "1", "-v")
    assert result.ret == 7
    data = json.loads((tmp_path / "results.json").read_text())
    cut = [s["id"] for s in data["record"]["scenarios"] if s["cause"] == "budget" and s["unsent"]]
    assert cut, data["record"]["scenarios"]
    out = result.stdout.lines
    shown = [next(x for x in out if f"::test_{item} " in x) for item in cut]
    # Cut before its first request: SKIPPED (with the budget as reason); after: CUT.
    assert all(" CUT (request budget spent" in x or " SKIPPED" in x for x in shown), shown
    assert any(" CUT (" in x for x in shown) and not any("PASSED" in x for x in shown), shown
    footer = next(x for x in reversed(out) if x.startswith("=") and " in " in x)
    assert re.search(r"\b\d+ cut\b", footer), footer
    assert "--budget-requests" in (tmp_path / "summary.md").read_text()
