"""A target's legal behaviour is a stated reason, never "incomplete".

Every capability switch of the reference target (a feature declined with a proper 400 and
the error envelope, conformance/reference/faults_declines.py) passes under every profile,
and each requirement the decline leaves out is not applicable with the decline (status
and the target's own message) as its reason. A feature ignored leaves its requirements
untested with that true reason; a finding withheld says it was withheld and why; a probe
that cannot use a short answer tries other prompts, then says why it could not run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import API_KEY, MODEL, Targets

from conformance.front.runner import Outcome, run_suite
from conformance.judging.document.spec import load_spec
from conformance.judging.requirements import REGISTRY, Level
from conformance.judging.verdict.decision import coverage
from conformance.judging.verdict.record import RunRecord, SkipCause
from conformance.judging.verdict.results import Results, Tally
from conformance.reference.faults import CAPABILITY
from conformance.run.scenarios import STOP_PROBE_PROMPTS
from conformance.run.session import Settings, Setup

PROFILES = ("aihubmix", "nscale", "openai")
DECLINES = sorted(CAPABILITY)
# Each decline under one profile, rotating so that every profile has a third of them: the
# reasons are decided by the one decide() whatever the profile, and that every decline
# passes under every profile is test_fault_corpus's (TOLERANCE: each capability switch,
# every profile, exhaustive tier).
#: The default tier's sample: the declines issue 32 met on real servers, one per profile.
SAMPLE = {"decline-suffix", "decline-logprobs", "decline-n"}
PAIRS = [
    pytest.param(
        fault,
        PROFILES[i % len(PROFILES)],
        marks=() if fault in SAMPLE else pytest.mark.exhaustive,
    )
    for i, fault in enumerate(DECLINES)
]


def _run(targets: Targets, flavor: str, *faults: str, report_dir: Path | None = None) -> Outcome:
    url = targets.get(flavor, *faults).server.url
    settings = Settings(model=MODEL, max_examples=3, concurrency=8)
    setup = Setup(settings, spec=flavor, target_url=url, api_key=API_KEY)
    return run_suite(setup, report_dir=report_dir)


def test_every_feature_the_requirements_need_has_a_capability_switch() -> None:
    needed = {need for req in REGISTRY.values() for need in req.needs}
    assert needed, "no requirement names the features it needs"
    assert {f"decline-{need}" for need in needed} <= set(DECLINES), needed


@pytest.mark.parametrize(("fault", "flavor"), PAIRS)
def test_a_declined_feature_passes_with_the_decline_as_the_reason(
    targets: Targets, fault: str, flavor: str
) -> None:
    outcome = _run(targets, flavor, fault)
    verdict, results = outcome.verdict, outcome.results
    assert verdict.word == "passed", (verdict.reasons, verdict.coverage.untested)
    declined = {f: e for f, e in results.capabilities.items() if e.outcome == "declined"}
    assert declined, results.capabilities  # the switch is seen as a decline
    for entry in declined.values():
        assert entry.detail.startswith('400 with the error envelope: "'), entry.detail
    reasons = {u.id: u.reason for u in verdict.coverage.not_applicable}
    spec = load_spec(flavor)
    for rid, req in REGISTRY.items():
        if req.under(spec).level != Level.MUST or (
            rid in reasons and "declined" not in reasons[rid]
        ):
            continue
        tally = results.tallies.get(rid)
        exercised = tally is not None and tally.checked > tally.unsupported
        hit = [f for f in declined for need in req.needs if f == need or f.startswith(need + ":")]
        if hit and not exercised:
            # Named by the decline: the feature, the status and the target's own words.
            assert rid in reasons and f"`{hit[0]}`" in reasons[rid], (rid, reasons.get(rid))
            assert declined[hit[0]].detail in reasons[rid]


def test_the_decline_is_the_reason_in_the_terminal_and_every_report(
    targets: Targets, tmp_path: Path
) -> None:
    _run(targets, "aihubmix", "decline-suffix", report_dir=tmp_path)
    words = "the target declined `suffix`: 400 with the error envelope"
    message = "suffix is only supported for models with FIM completion rendering"
    for name in ("summary.md", "report.html", "results.json", "junit.xml"):
        text = (tmp_path / name).read_text(encoding="utf-8")
        assert "SUFFIX-ABSENT" in text and message in text, name
        assert words.replace("`", "") in text.replace("`", "").replace("&#34;", '"'), name


def test_an_ignored_feature_leaves_its_requirements_untested_with_the_true_reason(
    targets: Targets,
) -> None:
    outcome = _run(targets, "aihubmix", "logprobs-ignored")
    assert outcome.verdict.word == "failed"
    untested = {u.id: u.reason for u in outcome.verdict.coverage.untested}
    assert "LOGPROBS-SHAPE" in untested
    reason = untested["LOGPROBS-SHAPE"]
    assert reason.startswith("the target ignored `logprobs"), reason
    assert "LOGPROBS-PRESENCE" in reason and "failed" in reason


def test_a_withheld_finding_says_it_was_withheld_and_why() -> None:
    req = REGISTRY["MAX-TOKENS-DEFAULT"]
    results = Results.for_requirements([req])
    note = "1 finding(s) not judged: usage shown wrong by USAGE-MAX-TOKENS"
    results.tallies[req.id] = Tally(req.id, "MUST", req.area, req.statement, req.source,
                                    not_judged=[note])  # fmt: skip
    record = RunRecord(spec="aihubmix", target="t", model="m", musts=(req.id,))
    (uncovered,) = coverage(results, record).untested
    assert uncovered.reason == f"withheld: {note}"


def _stop_probe(outcome: Outcome) -> tuple[Tally | None, list[str]]:
    runs = [s for s in outcome.results.run_record.scenarios if s.id.startswith("stop_probe")]
    skips = [f"{s.cause}: {s.reason}" for s in runs if s.cause is not None]
    return outcome.results.tallies.get("STOP-PROBE"), skips


def test_a_short_first_answer_makes_the_stop_probe_try_another_prompt(targets: Targets) -> None:
    outcome = _run(targets, "aihubmix", "answers-one-word-to-counting")
    tally, skips = _stop_probe(outcome)
    assert outcome.verdict.word == "passed", outcome.verdict.reasons
    assert not skips and tally is not None and tally.checked, skips


@pytest.mark.exhaustive  # a whole run; its retry twin runs in the default tier
def test_short_answers_to_every_prompt_are_a_stated_reason(targets: Targets) -> None:
    outcome = _run(targets, "aihubmix", "answers-one-word")
    tally, skips = _stop_probe(outcome)
    assert outcome.verdict.word == "passed", outcome.verdict.reasons
    assert tally is None or not tally.checked
    assert skips == [
        f"{SkipCause.SHORT_ANSWER}: the target's answers to {len(STOP_PROBE_PROMPTS)} prompts "
        "each had fewer than two words to pick a stop sequence from"
    ]


def test_a_form_declined_beside_one_offered_is_no_reason() -> None:
    """``stop:string`` declined while ``stop:max`` is offered leaves STOP-ABSENT judgeable:
    if it stayed unjudged, that is the suite's shortfall, never the decline's."""
    req = REGISTRY["STOP-ABSENT"]
    record = RunRecord(spec="aihubmix", target="t", model="m", musts=(req.id,))
    results = Results.for_requirements([req])
    results.note_capability("stop:string", "declined", '400 with the error envelope: "no"')
    results.note_capability("stop:max", "offered", "200")
    assert [u.id for u in coverage(results, record).untested] == [req.id]
    results.note_capability("stop:max", "declined", '400 with the error envelope: "no"')
    (excused,) = coverage(results, record).not_applicable
    assert excused.id == req.id and "the target declined `stop:" in excused.reason
