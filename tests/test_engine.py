"""The engine without pytest: a whole run, concurrency, budgets, and the verdict's coverage floor."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from support import API_KEY, MODEL, Targets, capability_table, case, meta_of

from conformance.front.runner import run_suite
from conformance.judging.checks import load_checks
from conformance.judging.document.spec import load_spec
from conformance.judging.requirements import REGISTRY
from conformance.judging.verdict.decision import coverage, decide
from conformance.judging.verdict.outcomes import EXIT_CODES
from conformance.judging.verdict.record import ScenarioRun, SkipCause
from conformance.judging.verdict.results import Results, Tally
from conformance.run.client import Client
from conformance.run.engine import Run
from conformance.run.scenarios import SCENARIOS, UNKNOWN_MODEL
from conformance.run.session import Settings, Setup, record_of

ROOT = Path(__file__).resolve().parents[1]

NO_PYTEST = """
import importlib.abc, json, sys

class NoPytest(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("pytest", "_pytest"):
            raise ImportError(f"{name} is blocked in this test")
        return None

sys.meta_path.insert(0, NoPytest())
from conformance.run.session import Setup
from conformance.front.runner import run_suite
from conformance.run.session import Settings

outcome = run_suite(Setup(spec="nscale", settings=Settings(max_examples=2, concurrency=4)))
print(json.dumps({
    "verdict": outcome.verdict.word,
    "exit": outcome.verdict.exit_code,
    "requests": outcome.results.spent.requests,
    "played": [p.name for p in outcome.played],
    "coverage": outcome.results.to_json()["meta"]["coverage"],
    "pytest_loaded": sorted(m for m in sys.modules if m.split(".")[0] in ("pytest", "_pytest")),
}))
"""


def test_a_whole_run_needs_no_pytest() -> None:
    """Every scenario, against the embedded reference target, with pytest unimportable."""
    done = subprocess.run(
        [sys.executable, "-c", NO_PYTEST], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["pytest_loaded"] == []
    assert (out["verdict"], out["exit"]) == ("passed", 0), out
    assert out["requests"] > 20 and out["coverage"]["untested"] == []
    assert "valid_requests[batch1of4]" in out["played"] and "stop_probe" in out["played"]


def test_a_failing_target_fails_the_engine_run_naming_the_requirement(targets: Targets) -> None:
    url = targets.get("aihubmix", "empty-id").server.url
    setup = Setup(target_url=url, api_key=API_KEY, settings=Settings(model=MODEL, max_examples=2))
    outcome = run_suite(setup, scenarios=SCENARIOS[:1])
    assert outcome.verdict.word == "failed" and outcome.verdict.exit_code == 1
    assert [rid for rid, _, _ in outcome.verdict.failed] == ["RESP-ID"]
    assert any(
        p.outcome.word == "failed" and "RESP-ID" in p.outcome.message for p in outcome.played
    )


def _fingerprint(results: Results) -> dict[str, Any]:
    return {
        "tallies": {r: (t.checked, t.failed, t.unsupported) for r, t in results.tallies.items()},
        "statuses": meta_of(results)["observed_statuses"],
        "capabilities": {f: c.to_json() for f, c in results.capabilities.items()},
        # Not tokens: the reference model samples unseeded requests at random.
        "requests": results.spent.requests,
    }


def test_same_seed_same_requests_and_findings_at_concurrency_1_and_8(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[tuple[str, bytes]] = []
    original = Client.send

    def recording(self: Client, c: Any) -> Any:
        sent.append((c.label, self.encode(c)))
        return original(self, c)

    monkeypatch.setattr(Client, "send", recording)
    runs = {}
    for n in (1, 8):
        sent.clear()
        settings = Settings(max_examples=4, seed=3, concurrency=n)
        outcome = run_suite(Setup(spec="aihubmix", settings=settings))
        assert meta_of(outcome.results)["concurrency"] == n
        runs[n] = (sorted(sent), _fingerprint(outcome.results), outcome.verdict.word)
    assert runs[1][0] == runs[8][0], "the same requests"
    assert runs[1][1] == runs[8][1], "the same findings"
    assert runs[1][2] == runs[8][2] == "passed"


def test_independent_cases_overlap_but_are_judged_in_case_order(
    targets: Targets, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = targets.get("nscale")
    in_flight, peak = [0], [0]
    lock = threading.Lock()
    original = Client.send

    def slow(self: Client, c: Any) -> Any:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.05 * (8 - int(c.label)))  # later cases answer first
        try:
            return original(self, c)
        finally:
            with lock:
                in_flight[0] -= 1

    monkeypatch.setattr(Client, "send", slow)
    run = Run(Settings(concurrency=4, budget_requests=6), target.spec, target.client)
    item = run.item()
    cases = [replace(case(max_tokens=1), label=str(i)) for i in range(8)]
    try:
        out = item.send_all(cases)
    finally:
        run.close()
    assert [ex.case.label for ex in out] == ["0", "1", "2", "3", "4", "5"], (
        "budget exact, order kept"
    )
    assert peak[0] == 4, "at most --concurrency in flight, and that many"
    assert item.budget_note == "request budget spent (--budget-requests)"
    assert item.results.run_record.budget == item.budget_note and item.unsent == 2


# -- the verdict and its coverage floor ------------------------------------------------------


def _results(
    spec: str = "aihubmix", settings: Settings | None = None, **tallies: tuple[int, int, int]
) -> Results:
    """Results in which every MUST passed once, except the given (checked, failed, unsupported);
    its run record is that of a run of ``settings`` under ``spec``."""
    load_checks()
    results = Results.for_requirements(list(REGISTRY.values()))
    for rid, tally in results.tallies.items():
        tally.checked = 1
        if rid.replace("-", "_") in tallies:
            tally.checked, tally.failed, tally.unsupported = tallies[rid.replace("-", "_")]
    results.run_record = record_of(load_spec(spec), settings or Settings())
    return results


def _with(results: Results, **changes: Any) -> Results:
    results.run_record = results.run_record.with_(**changes)
    return results


def test_every_must_exercised_passes() -> None:
    verdict = decide(_results())
    assert (verdict.word, verdict.exit_code) == ("passed", 0)


def test_an_untested_must_makes_the_run_incomplete_never_passed() -> None:
    results = _results(ECHO_PREFIX=(0, 0, 0))
    verdict = decide(results)
    assert (
        (verdict.word, verdict.exit_code)
        == ("incomplete", EXIT_CODES["incomplete"])
        == (
            "incomplete",
            7,
        )
    )
    assert [u.id for u in verdict.coverage.untested] == ["ECHO-PREFIX"]
    results.decided(verdict)
    assert meta_of(results)["verdict"] == "incomplete"
    assert meta_of(results)["coverage"]["untested"] == [
        {"id": "ECHO-PREFIX", "reason": "no exchange of this run exercised it"}
    ]


AUTH_SKIP = ScenarioRun(
    "auth_probes", "skipped", SkipCause.NOT_DECLARED, "the spec declares no bearer auth",
    ("AUTH-REQUIRED",),
)  # fmt: skip


def test_stated_reasons_keep_a_must_out_of_the_untested() -> None:
    # MUSTs under Nscale (client-visible there): ECHO-PREFIX is only a SHOULD under it.
    results = _results(
        "nscale",
        Settings(skip_checks=("STREAM-DONE",)),
        FINISH_ENUM=(0, 0, 0),  # nscale declares no finish_reason enum: scope
        LOGPROBS_PRESENCE=(2, 0, 2),  # declined with a proper 4xx every time
        AUTH_REQUIRED=(0, 0, 0),  # its scenario was skipped for a stated reason
        STREAM_DONE=(0, 0, 0),  # deselected
    )
    _with(results, scenarios=(AUTH_SKIP,))
    cover = coverage(results, results.run_record)
    reasons = {u.id: u.reason for u in cover.not_applicable}
    assert cover.untested == () and cover.deselected == ("STREAM-DONE",)
    assert reasons["FINISH-ENUM"] == "the spec declares no finish_reason enum"
    assert "declined the feature with a proper 4xx (2x)" in reasons["LOGPROBS-PRESENCE"]
    assert reasons["AUTH-REQUIRED"] == "scenario skipped: the spec declares no bearer auth"
    assert decide(results).word == "passed"


@pytest.mark.parametrize(
    "cause", [SkipCause.UNAVAILABLE, SkipCause.TARGET, SkipCause.BUDGET, SkipCause.RATE_LIMITED]
)
def test_a_scenario_not_run_for_any_other_reason_is_never_passed(cause: SkipCause) -> None:
    """Only "the spec does not declare it" and a deselection may leave a scenario unrun in a
    passed run; even when every MUST was exercised elsewhere, the run is incomplete."""
    skipped = ScenarioRun("deep_fuzz", "skipped", cause, "the [fuzz] extra is not installed")
    verdict = decide(_with(_results(), scenarios=(skipped,)))
    assert verdict.word == "incomplete" and verdict.unrun == (
        ("deep_fuzz", str(cause), "the [fuzz] extra is not installed"),
    )
    assert "deep_fuzz" in verdict.reasons[0]
    excused = ScenarioRun("deep_fuzz", "skipped", SkipCause.DESELECTED, "deep fuzz is opt-in")
    assert decide(_with(_results(), scenarios=(excused, AUTH_SKIP))).word == "passed"


def test_an_unrun_scenario_covering_a_must_leaves_it_untested() -> None:
    unrun = ScenarioRun(
        "auth_probes", "skipped", SkipCause.UNAVAILABLE, "the probes could not be built",
        ("AUTH-REQUIRED",),
    )  # fmt: skip
    results = _with(_results(AUTH_REQUIRED=(0, 0, 0)), scenarios=(unrun,))
    verdict = decide(results)
    assert verdict.word == "incomplete"
    assert verdict.coverage.untested[0].reason == "scenario not run: the probes could not be built"
    # Without a key, a stated reason (the README's): not applicable, and the run passes.
    keyless = ScenarioRun(
        "auth_probes", "skipped", SkipCause.NO_KEY, "no API key configured", ("AUTH-REQUIRED",)
    )
    verdict = decide(_with(_results(AUTH_REQUIRED=(0, 0, 0)), scenarios=(keyless,)))
    assert verdict.word == "passed" and verdict.coverage.untested == ()
    assert [(u.id, u.reason) for u in verdict.coverage.not_applicable] == [
        ("AUTH-REQUIRED", "scenario skipped: no API key configured")
    ]


def test_a_spent_budget_is_a_reason_but_still_incomplete() -> None:
    results = _results(ECHO_PREFIX=(0, 0, 0))
    _with(results, budget="request budget spent (--budget-requests)")
    verdict = decide(results)
    assert verdict.word == "incomplete"
    assert "request budget spent" in verdict.coverage.untested[0].reason


def test_a_budget_cut_is_incomplete_even_with_every_must_exercised() -> None:
    """The bug: every MUST was exercised by some scenario, the budget cut the others."""
    note = "request budget spent (--budget-requests)"
    cut = ScenarioRun("valid_streams[batch1of4]", "skipped", SkipCause.BUDGET, note, unsent=5)
    verdict = decide(_with(_results(), budget=note, scenarios=(cut,)))
    assert verdict.word == "incomplete" and verdict.coverage.untested == ()
    assert verdict.reasons == (
        "1 scenario item(s) not run or cut short because request budget spent "
        "(--budget-requests): valid_streams[batch1of4]",
    )


def test_failure_beats_incomplete_and_rate_limits_give_no_verdict() -> None:
    failed = _results(RESP_ID=(3, 1, 0), ECHO_PREFIX=(0, 0, 0))
    assert decide(failed).failed == (("RESP-ID", 1, 3),)
    _with(failed, known_failures=("RESP-ID",))
    assert decide(failed).word == "incomplete"
    assert decide(_with(failed, baseline_new_failures=("RESP-ID",))).word == "failed"
    limited = _with(_results(ECHO_PREFIX=(0, 0, 0)), no_verdict="the target kept answering 429")
    assert (decide(limited).word, EXIT_CODES["no-verdict"]) == ("no-verdict", 6)
    assert decide(_with(_results(), errors=("boom",))).word == "error"


def test_required_capabilities_fail_the_run() -> None:
    """Through conformance.judging.verdict.capabilities.unmet: declined and never-probed both fail the gate."""
    results = _results()
    results.capabilities = capability_table(
        {
            "echo": {"outcome": "offered", "detail": ""},
            "logprobs:1": {"outcome": "declined", "detail": "400 with the envelope"},
        }
    )
    verdict = decide(_with(results, require_capabilities=("echo", "logprobs", "suffix")))
    assert verdict.word == "failed"
    assert verdict.reasons == (
        "required capabilities not offered: logprobs:1: declined (400 with the envelope), "
        "suffix: not probed in this run",
    )
    assert decide(_with(results, require_capabilities=("echo",))).word == "passed"


def test_a_skipped_scenario_records_its_reason(targets: Targets) -> None:
    target = targets.get("aihubmix")
    keyless = Client(target.server.url)
    run = Run(Settings(), target.spec, keyless)
    from conformance.run.engine import play
    from conformance.run.scenarios import AUTH_PROBES

    item = run.item()
    try:
        outcome = play(item, AUTH_PROBES)
    finally:
        keyless.close()
    assert outcome.word == "skipped" and "no API key" in outcome.message
    assert item.results.run_record.scenarios == (
        ScenarioRun(
            "auth_probes", "skipped", SkipCause.NO_KEY, outcome.message, ("AUTH-REQUIRED",)
        ),
    )
    # A stated reason: no key given, auth is not probed; AUTH-REQUIRED is not applicable.
    assert item.results.run_record.scenarios[0].excused


def test_tally_defaults_mean_not_tested() -> None:
    assert Tally("X", "MUST", "schema", "", "").status == "not-tested"
    assert UNKNOWN_MODEL.item_id(None) == "unknown_model"


def test_a_broken_scenario_is_an_error_not_a_pass() -> None:
    """A defect of the suite ends the engine run with 'error' (exit 3), never 'passed'."""
    from conformance.run.scenarios import Scenario

    def broken(run: Run, _: Any) -> list[Any]:
        raise RuntimeError("a bug in a scenario")

    scenarios = (UNKNOWN_MODEL, Scenario("broken", cases=broken))
    outcome = run_suite(Setup(settings=Settings(concurrency=4)), scenarios=scenarios)
    assert [p.outcome.word for p in outcome.played] == ["passed", "error"]
    assert (outcome.verdict.word, outcome.verdict.exit_code) == ("error", 3)
    assert outcome.verdict.reasons == ("broken: RuntimeError: a bug in a scenario",)


def test_a_run_is_told_as_typed_events() -> None:
    """RunStarted, an ExchangeJudged per judged request, a ScenarioFinished per item (with
    why, when it did not run), RunFinished last with the verdict the core decided."""
    from conformance.judging.verdict.events import (
        ExchangeJudged,
        RunFinished,
        RunStarted,
        ScenarioFinished,
    )
    from conformance.run.scenarios import DEEP_FUZZ

    heard: list[Any] = []
    outcome = run_suite(Setup(), scenarios=(UNKNOWN_MODEL, DEEP_FUZZ), listeners=[heard.append])
    assert isinstance(heard[0], RunStarted) and heard[0].record.musts
    assert heard[-1] == RunFinished(outcome.results, outcome.verdict)
    judged = [e for e in heard if isinstance(e, ExchangeJudged)]
    assert len(judged) == 1 and judged[0].status == 404 and judged[0].failed == ()
    finished = [e.run for e in heard if isinstance(e, ScenarioFinished)]
    assert [(r.id, r.outcome, r.cause) for r in finished] == [
        ("unknown_model", "passed", None),
        ("deep_fuzz", "skipped", SkipCause.DESELECTED),
    ]
    assert tuple(finished) == outcome.results.run_record.scenarios
