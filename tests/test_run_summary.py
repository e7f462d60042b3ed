"""Coverage and verdict in every report, summary.md, latency percentiles, merge guards."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support import meta_of, set_meta

from conformance import reports
from conformance.front.merge import main as merge_main
from conformance.judging.requirements import Level, Requirement
from conformance.judging.verdict.conclusion import merge
from conformance.judging.verdict.latency import LatencySummary, Percentiles, StreamLatency
from conformance.judging.verdict.outcomes import BAD_INPUT
from conformance.judging.verdict.record import (
    RunRecord,
    ScenarioOutcome,
    ScenarioRun,
    ShardMismatch,
)
from conformance.judging.verdict.results import CapabilityOutcome, Finding, Results, Tally
from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange, Headers
from conformance.reports.html import render_html
from conformance.reports.junit import build_junit
from conformance.reports.markdown import comparison_markdown
from conformance.reports.matrix import compare
from conformance.reports.run_summary import summary_markdown
from conformance.reports.schema import schema_errors

COVERAGE = {
    "untested": [{"id": "AUTH-REQUIRED", "reason": "the budget ran out before the auth probes"}],
    "not_applicable": [{"id": "STREAM-USAGE", "reason": "the spec declares no stream_options"}],
    "deselected": ["RESP-ID"],
}


def _req(rid: str) -> Requirement:
    return Requirement(rid, Level.MUST, "schema", f"statement of {rid}", "spec", _ok, _ok)


def _ok(_: Any) -> bool:
    return True


def _exchange() -> Exchange:
    case = Case({"model": "m", "prompt": "x"}, label="text prompt")
    return Exchange(
        case=case,
        url="http://127.0.0.1/v1/completions",
        request_headers={},
        request_body=b"{}",
        status=200,
        headers=Headers([("content-type", "application/json")]),
        body=b"{}",
    )


def _results(verdict: str = "incomplete", **meta: Any) -> Results:
    results = Results.for_requirements([_req("RESP-SCHEMA"), _req("AUTH-REQUIRED")])
    results.record(_exchange(), [Finding("RESP-SCHEMA", "passed")])
    results.tallies["RESP-SCHEMA"].evidence = "spec-schema"
    set_meta(results, target="http://t", spec="aihubmix", model="m", verdict=verdict)
    return set_meta(results, coverage=COVERAGE, **meta)


def test_incomplete_is_amber_never_green_and_lists_the_untested() -> None:
    page = render_html(_results())
    assert 'class="verdict incomplete"' in page
    assert 'class="verdict passed"' not in page
    assert "AUTH-REQUIRED" in page and "the budget ran out before the auth probes" in page
    assert "the spec declares no stream_options" in page  # not applicable, with its reason
    assert "RESP-ID" in page  # deselected
    assert "<td>spec schema</td>" in page  # the evidence tier in the requirement rows


def test_a_run_without_coverage_says_so_and_derives_incomplete() -> None:
    results = _results()
    set_meta(results, verdict="passed")  # a recorded pass over an untested MUST: derived
    results.run_record = RunRecord()  # an older results.json: no record
    assert "INCOMPLETE" in summary_markdown(results)
    set_meta(results, verdict=None)  # the verdict and its coverage are one record
    set_meta(results, coverage=None)
    assert "This run recorded no coverage" in render_html(results)


def test_junit_skips_with_reasons_and_fails_the_coverage_case() -> None:
    root = ET.fromstring(ET.tostring(build_junit(_results())))
    cases = {c.get("name"): c for c in root.iter("testcase")}
    skipped = cases["AUTH-REQUIRED"].find("skipped")
    assert skipped is not None
    assert skipped.get("message") == "untested: the budget ran out before the auth probes"
    failure = cases["untested"].find("failure")
    assert failure is not None and failure.get("type") == "incomplete"
    assert "AUTH-REQUIRED: the budget ran out" in (failure.text or "")
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["untested"] == "AUTH-REQUIRED" and props["verdict"] == "incomplete"


def test_json_with_coverage_and_latency_validates() -> None:
    results = _results(concurrency=8)
    results.latency = [StreamLatency("s", 3, ttfb_s=0.1, p50_gap_s=0.01, total_s=0.5)]
    data = results.to_json()
    assert schema_errors(data) == []
    assert data["latency_summary"]["concurrency"] == 8
    assert meta_of(Results.from_json(data))["coverage"] == COVERAGE


def test_summary_md_has_verdict_coverage_failures_and_capabilities() -> None:
    results = _results(verdict="failed")
    results.record(
        _exchange(),
        [Finding("RESP-SCHEMA", "failed", "`id` | is <b>missing</b>", path="choices[0].id")],
    )
    results.note_capability("n", "ignored", "1 choice(s) for 2 asked")
    text = summary_markdown(results)
    assert text.startswith("## Completions conformance: ❌ FAILED")
    assert "| AUTH-REQUIRED | the budget ran out before the auth probes |" in text
    assert (
        "4 requirements: 1 tested, 1 untested MUST, 1 not applicable, 1 deselected, "
        "0 not exercised (SHOULD/CAPABILITY)." in text
    )
    assert "| `RESP-SCHEMA` | MUST | spec schema | 1/2 | yes |" in text
    assert "\\| is &lt;b&gt;missing&lt;/b&gt;" in text and "at choices[0].id" in text
    assert "| n | ignored | 1 choice(s) for 2 asked |" in text


def test_latency_percentiles() -> None:
    entries = [
        StreamLatency.from_dict({"ttfb_s": t / 100, "p50_gap_s": 0.01, "total_s": 1.0})
        for t in range(1, 101)
    ]
    entries.append(StreamLatency.from_dict({"ttfb_s": None, "buffered": True}))
    summary = LatencySummary.of(entries, 8)
    assert summary.ttfb_s == Percentiles(0.5, 0.9, 0.99)
    assert summary.streams == 101 and summary.buffered == 1
    assert summary.concurrency == 8
    assert LatencySummary.of([]).ttfb_s is None
    assert LatencySummary.from_dict(summary.to_dict()) == summary


def test_latency_records_round_trip_through_results_json() -> None:
    results = _results(concurrency=2)
    results.latency = [
        StreamLatency("a", 4, 0.1, 0.11, 0.02, 0.03, 0.03, 0.2, buffered=False),
        StreamLatency("b", 1, 0.3, 0.3, None, None, None, 0.31, buffered=True),
    ]
    data = json.loads(results.dumps())
    assert data["latency"][1] == {
        "case": "b",
        "events": 1,
        "ttfb_s": 0.3,
        "first_event_s": 0.3,
        "p50_gap_s": None,
        "p95_gap_s": None,
        "max_gap_s": None,
        "total_s": 0.31,
        "buffered": True,
    }
    assert list(data["latency_summary"]) == [
        "streams", "buffered", "concurrency", "ttfb_s", "p50_gap_s", "total_s"
    ]  # fmt: skip
    assert data["latency_summary"]["p50_gap_s"] == {"p50": 0.02, "p90": 0.02, "p99": 0.02}
    again = Results.from_json(data)
    assert again.latency == results.latency and again.dumps() == results.dumps()


def test_levels_and_outcomes_read_back_as_their_enums() -> None:
    results = _results()
    results.note_capability("echo", CapabilityOutcome.DECLINED, "400")
    results.note_capability("n", "ignored", "one choice")  # a word is read as its member
    results.run_record = RunRecord(scenarios=(ScenarioRun("a", ScenarioOutcome.SKIPPED),))
    data = json.loads(results.dumps())
    assert data["requirements"][0]["level"] == "MUST"
    assert data["capabilities"]["n"] == {"outcome": "ignored", "detail": "one choice"}
    assert data["record"]["scenarios"][0]["outcome"] == "skipped"
    again = Results.from_json(data)
    assert {type(t.level) for t in again.tallies.values()} == {Level}
    assert again.capabilities["echo"].outcome is CapabilityOutcome.DECLINED
    assert again.capabilities["n"].outcome is CapabilityOutcome.IGNORED
    assert again.run_record.scenarios[0].outcome is ScenarioOutcome.SKIPPED
    assert again.dumps() == results.dumps()


def test_html_and_compare_show_latency_with_concurrency() -> None:
    results = _results(concurrency=4)
    results.latency = [StreamLatency("s", 3, ttfb_s=0.25, p50_gap_s=0.02, total_s=1.5)]
    page = render_html(results)
    assert "measured at concurrency 4" in page and "0.250" in page
    md = comparison_markdown(compare([("a", results), ("b", _results())]))
    assert "TTFB 0.250/0.250/0.250; gap 0.020/0.020/0.020; total 1.500/1.500/1.500" in md
    assert "concurrency 4" in md
    assert "| Untested | 1: AUTH-REQUIRED | 1: AUTH-REQUIRED |" in md


# --- conformance-merge -------------------------------------------------------------------


def _shard(k: int, n: int = 3, **meta: Any) -> Results:
    results = _results(verdict="passed", shard=f"{k}/{n}", **meta)
    untested = [{"id": "AUTH-REQUIRED", "reason": f"not in shard {k}"}]
    if k == 2:  # the auth probes ran in shard 2
        results.record(_exchange(), [Finding("AUTH-REQUIRED", "passed")])
        untested = []
    coverage = {"untested": untested, "not_applicable": [], "deselected": []}
    return set_meta(results, coverage=coverage)


def _write(tmp_path: Path, runs: list[Results]) -> list[str]:
    paths = []
    for i, run in enumerate(runs):
        path = tmp_path / f"shard{i}.json"
        path.write_text(run.dumps())
        paths.append(str(path))
    return paths


def test_merged_shards_cover_what_each_left_untested(tmp_path: Path) -> None:
    paths = _write(tmp_path, [_shard(1), _shard(2), _shard(3)])
    assert merge_main([*paths, "--report-dir", str(tmp_path / "out")]) == 0
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["meta"]["verdict"] == "passed" and data["meta"]["coverage"]["untested"] == []
    assert (tmp_path / "out" / "summary.md").exists()
    with pytest.raises(ShardMismatch, match="shard 2/3 missing"):  # merge() guards too
        merge([_shard(1), _shard(3)])
    merged, verdict = merge([_shard(1, 2), _shard(2, 2)])  # AUTH-REQUIRED ran in shard 2
    assert meta_of(merged)["verdict"] == verdict.word == "passed"
    assert meta_of(merged)["coverage"]["untested"] == []


@pytest.mark.parametrize(
    ("shards", "message"),
    [
        ([_shard(1), _shard(3)], "shard 2/3 missing"),
        ([_shard(1), _shard(2), _shard(2), _shard(3)], "shard 2/3 given twice"),
        ([_shard(1, 2), _shard(2, 3)], "different shard counts"),
        ([_shard(1), _shard(2), _shard(3, spec="nscale")], "different specs"),
        ([_shard(1), _shard(2, model="x"), _shard(3)], "different models"),
        ([_shard(1), _shard(2, target="http://u"), _shard(3)], "different targets"),
    ],
)
def test_merge_refuses_shards_that_do_not_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], shards: list[Results], message: str
) -> None:
    paths = _write(tmp_path, shards)
    assert merge_main([*paths, "--report-dir", str(tmp_path / "out")]) == BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("conformance-merge: error: ") and message in err
    assert err.count("\n") == 1 and not (tmp_path / "out").exists()


def test_write_all_writes_summary_md(tmp_path: Path) -> None:
    written = reports.write_all(_results(), tmp_path)
    assert tmp_path / "summary.md" in written


def test_the_evidence_tier_is_read_from_the_requirement() -> None:
    # The checks slice adds `evidence` to Requirement; until then it is read with getattr.
    req = SimpleNamespace(
        id="R", level=Level.MUST, area="schema", statement="s", source="x", evidence="server-habit"
    )
    results = Results.for_requirements([req])  # type: ignore[list-item]
    assert results.tallies["R"].evidence == "server-habit"
    assert Results.for_requirements([_req("Q")]).tallies["Q"].evidence == ""
    assert "<td>server habit</td>" in render_html(results)


def _failing_shard(k: int, path: str) -> Results:
    shard = _shard(k)
    shard.record(_exchange(), [Finding("RESP-SCHEMA", "failed", "bad", path=path)])
    set_meta(shard, verdict="failed")
    return shard


def test_merge_gates_on_baseline_fingerprints(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    baseline.write_text(_failing_shard(1, "choices[0].text").dumps())
    out = str(tmp_path / "out")
    known = _write(tmp_path, [_failing_shard(1, "choices[3].text"), _shard(2), _shard(3)])
    assert merge_main([*known, "--report-dir", out, "--baseline", str(baseline)]) == 0
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["meta"]["baseline"]["known"] == ["RESP-SCHEMA|non-stream|choices[*].text|bad"]
    new = _write(tmp_path, [_failing_shard(1, "usage.total_tokens"), _shard(2), _shard(3)])
    assert merge_main([*new, "--report-dir", out, "--baseline", str(baseline)]) == 1
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["meta"]["baseline"]["new_failures"] == ["RESP-SCHEMA"]


def test_merge_refuses_a_baseline_of_another_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = tmp_path / "baseline.json"
    baseline.write_text(_results(spec="nscale").dumps())
    paths = _write(tmp_path, [_shard(1), _shard(2), _shard(3)])
    assert (
        merge_main([*paths, "--report-dir", str(tmp_path / "o"), "--baseline", str(baseline)])
        == BAD_INPUT
    )
    assert "spec 'nscale', this run uses 'aihubmix'" in capsys.readouterr().err


def test_a_recorded_pass_over_untested_requirements_is_never_shown_green() -> None:
    results = _results(verdict="passed")
    page = render_html(results)
    assert 'class="verdict incomplete"' in page and 'class="verdict passed"' not in page
    assert "INCOMPLETE" in summary_markdown(results)
    set_meta(results, coverage={"untested": [], "not_applicable": [], "deselected": []})
    assert 'class="verdict passed"' in render_html(results)


def test_summary_md_counts_add_up_every_requirement_in_one_bucket() -> None:
    """Issue 27, item 7: "68 of 71 requirements tested; 0 untested, 1 not applicable, 0
    deselected" accounted for 69; two SHOULDs checked 0 times were listed nowhere, and a
    MUST declined with a proper 4xx was counted as tested and as not applicable."""
    from conformance.reports.summary import buckets_of

    def tally(rid: str, level: str, checked: int = 0, unsupported: int = 0) -> Tally:
        return Tally(rid, level, "schema", "", "", checked=checked, unsupported=unsupported)

    results = Results()
    for t in (
        tally("RESP-SCHEMA", "MUST", checked=5),
        tally("LOGPROBS-PRESENCE", "MUST", checked=2, unsupported=2),  # declined: n/a
        tally("STREAM-USAGE", "MUST"),  # n/a: the spec
        tally("AUTH-REQUIRED", "MUST"),  # untested
        tally("RETRY-AFTER-FORMAT", "SHOULD"),  # not exercised
        tally("RESP-NULL-FIELDS", "SHOULD"),  # not exercised
        tally("ECHO-PREFIX", "SHOULD", checked=3),
        tally("CAPS", "CAPABILITY", checked=1),
    ):
        results.tallies[t.id] = t
    set_meta(results, verdict="incomplete")  # coverage is recorded with its verdict
    set_meta(
        results,
        coverage={
            "untested": [{"id": "AUTH-REQUIRED", "reason": "no exchange exercised it"}],
            "not_applicable": [
                {"id": "STREAM-USAGE", "reason": "the spec declares no stream_options"},
                {"id": "LOGPROBS-PRESENCE", "reason": "declined with a proper 4xx (2x)"},
            ],
            "deselected": ["RESP-ID"],  # deselected: no tally at all
        },
    )
    buckets = buckets_of(results)
    every = [rid for ids in buckets.parts().values() for rid in ids]
    assert sorted(every) == sorted({*results.tallies, "RESP-ID"})  # each exactly once
    assert buckets.not_exercised == ("RETRY-AFTER-FORMAT", "RESP-NULL-FIELDS")
    assert "LOGPROBS-PRESENCE" not in buckets.tested
    text = summary_markdown(results)
    line = next(x for x in text.splitlines() if " requirements: " in x)
    total, *parts = (int(n) for n in re.findall(r"(\d+) (?:requirements|[a-z])", line))
    assert total == sum(parts) == 9, line
    assert line == (
        "9 requirements: 3 tested, 1 untested MUST, 2 not applicable, 1 deselected, "
        "2 not exercised (SHOULD/CAPABILITY)."
    )
    assert "`RETRY-AFTER-FORMAT`, `RESP-NULL-FIELDS`" in text
    assert line in render_html(results)  # the HTML report says the same
    assert "| STREAM-USAGE | the spec declares no stream_options |" in text
