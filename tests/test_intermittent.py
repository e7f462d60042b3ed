"""A request whose answer may vary is sent more than once, and a failure on some sends only
is reported as intermittent with its count (vLLM 0.32 failed 1 stream in 9 with logprobs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import API_KEY, MODEL, Targets

from conformance.front.runner import Outcome, run_suite
from conformance.front.terminal import closing_lines
from conformance.judging.document.spec import load_spec
from conformance.judging.wire.case import REPEATED_TAG, SENDS, Case, repeated
from conformance.reference import ReferenceServer
from conformance.run.session import Settings, Setup

LABEL = "stream with logprobs"
FAULT = "intermittent-500-streamed-logprobs"


def _run(targets: Targets, fault: str, tmp_path: Path, **settings: int) -> Outcome:
    url = targets.get("aihubmix", fault).server.url
    chosen = Settings(model=MODEL, max_examples=3, concurrency=8, **settings)  # type: ignore[arg-type]
    setup = Setup(chosen, spec="aihubmix", target_url=url, api_key=API_KEY)
    return run_suite(setup, report_dir=tmp_path)


def test_only_requests_whose_answer_may_vary_are_repeated() -> None:
    streamed = Case({"prompt": "x", "stream": True, "logprobs": 2}, mode="edge", label="a")
    choices = Case({"prompt": "x", "n": 2}, mode="edge", label="b")
    plain = Case({"prompt": "x", "stream": True}, mode="edge", label="c")
    generated = Case({"prompt": "x", "n": 2}, mode="valid", label="d")
    out = repeated([streamed, choices, plain, generated])
    assert [c.label for c in out] == ["a"] * SENDS + ["b"] * SENDS + ["c", "d"]
    assert len({c.tags for c in out[:SENDS]}) == SENDS  # no two sends are the same case
    assert all(REPEATED_TAG in c.tags for c in out[: 2 * SENDS])


def test_a_failure_on_one_send_of_three_is_intermittent_in_every_report(
    targets: Targets, tmp_path: Path
) -> None:
    outcome = _run(targets, "intermittent-500-streamed-logprobs", tmp_path)
    tally = outcome.results.tallies["VALID-NO-5XX"]
    assert (LABEL, 1, SENDS) in tally.intermittent
    assert outcome.verdict.word == "failed"  # intermittent is no excuse: it decides
    lines = closing_lines(outcome.verdict, outcome.results, load_spec("aihubmix"), (), ())
    (line,) = [ln for ln in lines if ln.startswith("failed MUST: VALID-NO-5XX")]
    assert f"intermittent: failed on 1 of {SENDS} sends of {LABEL}" in line
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert f"intermittent: failed on 1 of {SENDS} sends of {LABEL}" in summary
    data = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    (valid_no_5xx,) = [r for r in data["requirements"] if r["id"] == "VALID-NO-5XX"]
    assert valid_no_5xx["sends"][LABEL] == [1, SENDS]


@pytest.mark.exhaustive  # a whole run of its own
def test_a_small_request_budget_sends_each_once(tmp_path: Path) -> None:
    # A target of its own: the fault remembers what each target was sent.
    with ReferenceServer(api_key=API_KEY, faults=frozenset({FAULT})) as server:
        chosen = Settings(model=MODEL, max_examples=3, concurrency=8, budget_requests=250)
        setup = Setup(chosen, spec="aihubmix", target_url=server.url, api_key=API_KEY)
        outcome = run_suite(setup)
    assert not outcome.results.tallies["VALID-NO-5XX"].failed  # never sent twice: never seen
