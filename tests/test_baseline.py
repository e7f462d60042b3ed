"""Baseline fingerprints name a defect, not a request (issue 19, item 4).

A baseline taken at the default seed against a faulty reference target keeps its defects
known at ``--seed 1`` and at ``--max-examples 20`` (with labels in the fingerprint it came
back with a dozen "new" findings each); a different defect is still new; what the
baseline was taken with is compared and a difference is one warning line; a baseline of
the older suite is refused with a line saying to re-take it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import API_KEY, MODEL, Targets, meta_of, target_args

from conformance.front.plugin import SUITE_DIR
from conformance.front.runner import assemble, run_suite
from conformance.judging.verdict.baseline import check_baseline, compare_to_baseline
from conformance.judging.verdict.fingerprint import normalise_message, request_class
from conformance.judging.verdict.results import Finding, Results
from conformance.judging.wire.case import Case
from conformance.run.assembly import BadInput
from conformance.run.scenarios import BY_NAME
from conformance.run.session import Settings, Setup

# The generated requests (they change with --seed and --max-examples), and the usage chunk
# probes, which show the stream's usage defect at every seed (as in a default run).
GENERATED = [BY_NAME[name] for name in ("valid_requests", "valid_streams", "usage_chunk")]


def _run(url: str, **settings: int) -> Results:
    setup = Setup(
        target_url=url,
        api_key=API_KEY,
        settings=Settings(model=MODEL, concurrency=8, **settings),  # type: ignore[arg-type]
    )
    return run_suite(setup, scenarios=GENERATED).results


@pytest.fixture(scope="module")
def baseline(targets: Targets) -> Results:
    """Taken at the defaults (seed 0, 10 examples) against a target whose usage sums are off."""
    return _run(targets.get("aihubmix", "usage-arithmetic").server.url)


@pytest.mark.parametrize("taken", [{"seed": 1}, {"seed": 2}, {"max_examples": 20}])
def test_the_same_defect_stays_known_at_another_seed_or_example_count(
    targets: Targets, baseline: Results, taken: dict[str, int]
) -> None:
    current = _run(targets.get("aihubmix", "usage-arithmetic").server.url, **taken)
    assert current.tallies["USAGE-TOTAL"].failed and current.tallies["STREAM-USAGE"].failed
    diff = compare_to_baseline(current, baseline)
    assert diff.new == () and diff.new_failures == (), diff.new
    assert {f.split("|")[0] for f in diff.known} == {"USAGE-TOTAL", "STREAM-USAGE"}


def test_a_genuinely_new_defect_is_still_new(targets: Targets, baseline: Results) -> None:
    current = _run(targets.get("aihubmix", "usage-arithmetic", "empty-id").server.url, seed=1)
    diff = compare_to_baseline(current, baseline)
    assert diff.new_failures == ("RESP-ID",)
    assert diff.new == ("RESP-ID|non-stream|id|id is …, expected a non-empty string",)


def test_a_fingerprint_holds_no_generated_label_or_value() -> None:
    body = {"model": "m", "prompt": [15, 16], "max_tokens": 7, "echo": True, "logprobs": 2}
    one = Case(body, label="token prompt (2 ids), max_tokens=7, echo, logprobs=2")
    other = Case({**body, "prompt": "Hello", "max_tokens": 3}, label="text prompt 'Hello'")
    message = "total_tokens 11 != prompt_tokens 2 + completion_tokens 8"
    a = Finding(
        "USAGE-TOTAL", "failed", message, path="usage.total_tokens", case=request_class(one)
    )
    b = Finding(
        "USAGE-TOTAL",
        "failed",
        "total_tokens 5 != prompt_tokens 1 + completion_tokens 3",
        path="usage.total_tokens",
        case=request_class(other),
    )
    assert (
        a.fingerprint
        == b.fingerprint
        == (
            "USAGE-TOTAL|non-stream|usage.total_tokens|"
            "total_tokens # != prompt_tokens # + completion_tokens #"
        )
    )
    streamed = Case({**body, "stream": True}, label="token prompt (2 ids)")
    assert request_class(streamed) == "stream"
    assert request_class(Case(body, mode="invalid", breaks="max_tokens:minimum")) == (
        "invalid:max_tokens:minimum"
    )
    assert request_class(Case(body, mode="invalid", auth="none", breaks="no key")) == "auth:none"


@pytest.mark.parametrize(
    ("message", "normal"),
    [
        ("'abc' is not of type 'integer'", "… is not of type …"),
        ("[1, 2, [3, 4]] is too long", "[…] is too long"),
        ("{'a': 1, 'b': [2, 3]} has an extra key", "{…} has an extra key"),
        ("choices[3].text  differs |  at 1.5e-3", "choices[…].text differs / at #"),
    ],
)
def test_messages_lose_their_values(message: str, normal: str) -> None:
    assert normalise_message(message) == normal


def test_what_the_baseline_was_taken_with_is_one_warning_line(baseline: Results) -> None:
    this_run = {**meta_of(baseline), "seed": 1, "max_examples": 20}
    errors, warnings = check_baseline(this_run, baseline)
    assert errors == []
    assert warnings == [
        "the baseline was taken with --seed 0 (this run: 1), --max-examples 10 (this run: 20): "
        "its defects are matched by fingerprint, but requests it never drew may find more"
    ]
    assert check_baseline(meta_of(baseline), baseline) == ([], [])


def test_a_baseline_of_the_older_suite_is_refused_saying_to_retake_it(
    baseline: Results, tmp_path: Path
) -> None:
    old = baseline.to_json()
    (usage,) = [t for t in old["requirements"] if t["id"] == "USAGE-TOTAL"]
    usage["fingerprints"] = [
        "USAGE-TOTAL|text prompt, max_tokens=#, logprobs=#, echo|usage.total_tokens"
    ]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    with pytest.raises(BadInput) as raised:
        assemble(Setup(settings=Settings(max_examples=1), baseline=str(path)))
    line = str(raised.value)
    assert line.startswith(f"--baseline {path}: its fingerprints are of an older suite")
    assert "re-take the baseline" in line and "\n" not in line


def test_the_gate_passes_a_known_defect_at_another_seed_with_a_warning(
    pytester: pytest.Pytester, targets: Targets, baseline: Results, tmp_path: Path
) -> None:
    """Through the plugin: --seed 1 against the baseline of seed 0 passes, and says so."""
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(baseline.to_json()))
    url = targets.get("aihubmix", "usage-arithmetic").server.url
    result = pytester.runpytest_inprocess(
        str(SUITE_DIR), "-p", "no:cacheprovider", *target_args(url), "--seed", "1",
        "--checks", "USAGE-TOTAL,STREAM-USAGE", "-k", "valid_requests or valid_streams or usage_chunk",
        "--baseline", str(path), "--report-dir", str(tmp_path / "out"),
    )  # fmt: skip
    out = result.stdout.str()
    assert "0 new (-)" in out, out
    assert "the baseline was taken with --seed 0 (this run: 1)" in out
    assert result.ret != 1, out  # not failed: the defect is known
