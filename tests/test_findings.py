"""Structured findings, fingerprints, the check barrier, and the baseline by fingerprint."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support import set_meta

from conformance.judging.document.spec import load_spec
from conformance.judging.requirements import (
    REGISTRY,
    Context,
    Level,
    Requirement,
    Violation,
    requirement,
)
from conformance.judging.verdict.baseline import check_baseline, compare_to_baseline
from conformance.judging.verdict.fingerprint import normalise_path
from conformance.judging.verdict.results import (
    MAX_FINGERPRINTS,
    Finding,
    Results,
    case_key,
    evaluate,
)
from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange, Headers
from conformance.reports.html import render_html
from conformance.reports.junit import build_junit
from conformance.reports.run_summary import summary_markdown
from conformance.reports.schema import schema_errors
from conformance.reports.summary import verdict_of


def _exchange(label: str = "text prompt, n=2", breaks: str | None = None) -> Exchange:
    case = Case({"model": "m", "prompt": "x"}, label=label, breaks=breaks)
    return Exchange(
        case=case,
        url="http://127.0.0.1/v1/completions",
        request_headers={},
        request_body=json.dumps(case.body).encode(),
        status=200,
        headers=Headers([("content-type", "application/json")]),
        body=b'{"id": "x"}',
    )


def _req(rid: str, level: Level = Level.MUST) -> Requirement:
    return Requirement(
        rid, level, "schema", f"statement of {rid}", "spec", lambda _: None, lambda _: True
    )


@pytest.mark.parametrize(
    ("path", "normal"),
    [
        ("choices[1].logprobs.text_offset[3]", "choices[*].logprobs.text_offset[*]"),
        ("event[12].choices[0].finish_reason", "event[*].choices[*].finish_reason"),
        ("usage.total_tokens", "usage.total_tokens"),
        (None, ""),
    ],
)
def test_paths_are_normalised(path: str | None, normal: str) -> None:
    assert normalise_path(path) == normal


def test_fingerprint_names_requirement_request_class_path_and_what_was_wrong() -> None:
    a = Finding("RESP-SCHEMA", "failed", "3 is not a 'string'", path="choices[3].text", case="s")
    b = Finding("RESP-SCHEMA", "failed", "7 is not a 'string'", path="choices[0].text", case="s")
    c = Finding("RESP-SCHEMA", "failed", "3 is not a 'string'", path="choices[3].index", case="s")
    d = Finding("RESP-SCHEMA", "failed", "'text' is required", path="choices[3].text", case="s")
    assert a.fingerprint == b.fingerprint == "RESP-SCHEMA|s|choices[*].text|# is not a …"
    assert a.fingerprint != c.fingerprint  # another field is another defect
    assert a.fingerprint != d.fingerprint  # another way of being wrong, too


def test_case_key_is_the_request_class_never_the_label() -> None:
    assert case_key(_exchange(breaks="n-maximum").case) == "invalid:n-maximum"
    assert case_key(_exchange("token prompt (3 ids), n=2").case) == "non-stream"
    assert case_key(_exchange("stop probe: stop='seven'").case) == "non-stream"


def test_evaluate_reads_path_expected_actual_from_the_violation() -> None:
    def check(_: Context) -> None:
        exc = Violation("finish_reason is not in the enum")
        exc.path, exc.expected, exc.actual = "choices[2].finish_reason", ["stop"], "eos"  # type: ignore[attr-defined]
        raise exc

    req = Requirement("X-ENUM", Level.MUST, "schema", "s", "spec", check, lambda _: True)
    (finding,) = evaluate([req], load_spec("aihubmix"), _exchange())
    assert (finding.outcome, finding.path, finding.expected, finding.actual) == (
        "failed",
        "choices[2].finish_reason",
        ["stop"],
        "eos",
    )
    assert finding.fingerprint == (
        "X-ENUM|non-stream|choices[*].finish_reason|finish_reason is not in the enum"
    )
    results = Results.for_requirements([req])
    results.record(_exchange(), [finding])
    (example,) = results.tallies["X-ENUM"].examples
    assert example.path == "choices[2].finish_reason" and example.actual == "eos"
    assert example.fingerprint == finding.fingerprint


# --- the barrier -------------------------------------------------------------------------


@pytest.fixture
def broken_check() -> Iterator[Requirement]:
    """A registered requirement whose check raises TypeError (a suite defect)."""

    @requirement(
        "TEST-BROKEN",
        level=Level.SHOULD,
        area="schema",
        statement="broken",
        source="test",
        evidence="server-habit",
    )
    def judge_broken(ctx: Context) -> None:
        len(None)  # type: ignore[arg-type]

    yield REGISTRY["TEST-BROKEN"]
    del REGISTRY["TEST-BROKEN"]


def test_a_check_that_raises_is_an_error_finding_not_a_lost_batch(
    broken_check: Requirement,
) -> None:
    fine = _req("FINE")
    failing = Requirement(
        "FAILS", Level.MUST, "schema", "s", "spec", _raise(Violation("bad")), lambda _: True
    )
    findings = evaluate([fine, broken_check, failing], load_spec("aihubmix"), _exchange())
    outcomes = {f.requirement: f.outcome for f in findings}
    assert outcomes == {"FINE": "passed", "TEST-BROKEN": "error", "FAILS": "failed"}
    error = next(f for f in findings if f.outcome == "error")
    assert "TypeError" in error.message and "judge_broken" in error.message
    assert error.case == "non-stream"  # attributed to the exchange's case

    results = Results.for_requirements([fine, broken_check, failing])
    results.record(_exchange(), findings)
    assert [t.id for t in results.errors()] == ["TEST-BROKEN"]
    # A SHOULD check that raised fails the run even without --strict-should or a baseline.
    decide = {t.id for t in results.failing(known=frozenset({"FAILS", "TEST-BROKEN"}))}
    assert decide == {"TEST-BROKEN"}
    assert verdict_of(results).word == "error"
    assert schema_errors(results.to_json()) == []

    page = render_html(results)
    assert "Suite defects (1)" in page and "TypeError" in page
    case = next(
        c
        for c in ET.fromstring(ET.tostring(build_junit(results))).iter("testcase")
        if c.get("name") == "TEST-BROKEN"
    )
    error_element = case.find("error")
    assert error_element is not None and error_element.get("type") == "suite defect"
    assert "Suite defects" in summary_markdown(results)
    assert "💥 ERROR" in summary_markdown(results)


def _raise(exc: Exception) -> Callable[[Context], Any]:
    def check(_: Context) -> None:
        raise exc

    return check


def test_an_applies_predicate_that_raises_is_caught_too() -> None:
    req = Requirement("P", Level.MUST, "schema", "s", "spec", lambda _: None, _raise(KeyError("k")))
    (finding,) = evaluate([req], load_spec("aihubmix"), _exchange())
    assert finding.outcome == "error" and "KeyError" in finding.message


# --- fingerprints in Results -------------------------------------------------------------


def test_examples_are_one_per_fingerprint_and_fingerprints_are_bounded() -> None:
    results = Results.for_requirements([_req("R")])
    same = [Finding("R", "failed", f"message {i}", path=f"choices[{i}].text") for i in range(5)]
    for finding in same:
        results.record(_exchange(), [finding])
    tally = results.tallies["R"]
    assert tally.failed == 5 and len(tally.examples) == 1 and len(tally.fingerprints) == 1
    for i in range(MAX_FINGERPRINTS + 50):
        results.record(_exchange(), [Finding("R", "failed", "m", path=f"field{i}")])
    assert len(tally.fingerprints) == MAX_FINGERPRINTS
    assert tally.fingerprints_dropped == 51  # 251 distinct, 200 kept
    assert len(tally.examples) == 3


def test_merge_unions_fingerprints_and_dedupes_examples() -> None:
    a, b = Results.for_requirements([_req("R")]), Results.for_requirements([_req("R")])
    a.record(_exchange(), [Finding("R", "failed", "x", path="a[1]")])
    b.record(_exchange(), [Finding("R", "failed", "x", path="a[2]")])
    b.record(_exchange(), [Finding("R", "failed", "z", path="b")])
    a.merge(b)
    tally = a.tallies["R"]
    assert tally.fingerprints == ["R|non-stream|a[*]|x", "R|non-stream|b|z"]
    assert [ex.message for ex in tally.examples] == ["x", "z"]
    again = Results.from_json(json.loads(a.dumps()))
    assert again.tallies["R"].fingerprints == tally.fingerprints


# --- baseline by fingerprint -------------------------------------------------------------


def _run(*paths: str, level: Level = Level.MUST, **meta: str) -> Results:
    results = Results.for_requirements([_req("RESP-SCHEMA", level), _req("OTHER")])
    results.record(_exchange(), [Finding("OTHER", "passed")])
    for path in paths:
        results.record(_exchange(), [Finding("RESP-SCHEMA", "failed", "bad", path=path)])
    set_meta(results, **meta)
    return results


def test_a_new_field_of_a_known_failing_requirement_fails_the_gate() -> None:
    baseline = _run("choices[0].text")
    current = _run("choices[4].text", "usage.total_tokens")
    diff = compare_to_baseline(current, baseline)
    assert diff.known == ("RESP-SCHEMA|non-stream|choices[*].text|bad",)
    assert diff.new == ("RESP-SCHEMA|non-stream|usage.total_tokens|bad",)
    assert diff.new_failures == ("RESP-SCHEMA",)
    assert schema_errors({**current.to_json(), "meta": {"baseline": diff.to_json()}}) == []


def test_known_fingerprints_only_pass_the_gate_and_fixed_are_listed() -> None:
    baseline = _run("choices[0].text", "usage.total_tokens")
    diff = compare_to_baseline(_run("choices[7].text"), baseline)
    assert diff.new_failures == () and diff.new == ()
    assert diff.fixed == ("RESP-SCHEMA|non-stream|usage.total_tokens|bad",)


def test_more_failures_than_the_cap_count_as_new() -> None:
    baseline, current = _run("a"), _run("a")
    current.tallies["RESP-SCHEMA"].fingerprints_dropped = 3
    assert compare_to_baseline(current, baseline).new_failures == ("RESP-SCHEMA",)


def test_check_baseline_refuses_another_spec_and_warns_on_another_model() -> None:
    baseline = _run(spec="aihubmix", model="a", target="http://x")
    assert check_baseline({"spec": "aihubmix", "model": "a", "target": "http://x"}, baseline) == (
        [],
        [],
    )
    errors, warnings = check_baseline({"spec": "nscale", "model": "b"}, baseline)
    assert errors == ["the baseline was recorded with spec 'aihubmix', this run uses 'nscale'"]
    assert warnings == ["the baseline was recorded with model 'a', this run uses 'b'"]


def test_baseline_line_counts_fingerprints_and_names_their_requirements() -> None:
    from conformance.reports.baseline import baseline_line

    diff = compare_to_baseline(_run("a[1]", "b"), _run("a[2]", "c"))
    assert baseline_line(diff) == (
        "baseline: 1 known (RESP-SCHEMA), 1 new (RESP-SCHEMA), 1 fixed (RESP-SCHEMA)"
    )


def test_a_requirement_that_failed_and_raised_shows_both() -> None:
    req = _req("BOTH")
    results = Results.for_requirements([req])
    results.record(_exchange(), [Finding("BOTH", "failed", "the id is empty", path="id")])
    results.record(_exchange("other"), [Finding("BOTH", "error", "suite defect: TypeError")])
    page = render_html(results)
    assert "Suite defects (1)" in page and "suite defect: TypeError" in page
    assert "Failures (1)" in page and "the id is empty" in page
