"""results.json read back typed and written again: the same bytes (issue 26, item 2).

``Results.meta`` was a dict; the run's context is now ``RunInfo`` (typed fields) and its
verdict ``Results.verdict``. The documented serialisation must not move: a results.json
read with ``Results.loads`` writes itself again byte for byte, keys another writer added
travel along in place, and the reports read only the typed objects.
"""

from __future__ import annotations

import json
from pathlib import Path

import conformance
from conformance.front.demo import demo_results
from conformance.judging.verdict.examples import Example, Outcome
from conformance.judging.verdict.outcomes import Word
from conformance.judging.verdict.results import Results
from conformance.judging.verdict.run_info import RunInfo, SentAlone
from conformance.judging.verdict.verdict import Verdict


def test_a_failing_run_with_evidence_round_trips_byte_for_byte() -> None:
    results = demo_results(failing=True)
    text = results.dumps()
    again = Results.loads(text)
    assert again.dumps() == text
    assert isinstance(again.verdict, Verdict) and again.verdict.word == Word.FAILED
    examples = [ex for t in again.tallies.values() for ex in t.examples]
    assert examples and all(isinstance(ex, Example) for ex in examples)
    assert {ex.outcome for ex in examples} <= set(Outcome)
    assert any(ex.evidence.transcript for ex in examples)  # a streamed example's events


def test_a_real_runs_results_json_round_trips_byte_for_byte(tmp_path: Path) -> None:
    setup = conformance.Setup(spec="nscale", settings=conformance.Settings(max_examples=2))
    outcome = conformance.run_suite(setup, report_dir=tmp_path)
    text = (tmp_path / "results.json").read_text(encoding="utf-8")
    assert text == outcome.results.dumps() + "\n"
    again = Results.loads(text)
    assert again.dumps() + "\n" == text
    assert again.info.spec == "nscale" and again.info.observed_statuses
    assert again.verdict == Verdict(
        outcome.verdict.word,
        outcome.verdict.reasons,
        coverage=outcome.verdict.coverage,
        unrun=outcome.verdict.unrun,
    )  # ``failed`` is the tallies', not written twice


def test_keys_another_writer_added_stay_in_place() -> None:
    meta = {"target": "t", "x-ci-job": {"id": 7}, "spec": "aihubmix", "verdict": "passed"}
    info = RunInfo.from_json(meta)
    assert info.foreign == {"x-ci-job": {"id": 7}}
    assert list(info.to_json({"verdict": "passed"})) == ["target", "x-ci-job", "spec", "verdict"]


def test_fields_are_written_in_the_order_they_were_first_set() -> None:
    info = RunInfo(target="t")
    info.wall_time = 1.5
    info.sent_alone = (SentAlone("a", "timed out", None),)
    info.update(spec="aihubmix", target="u")  # target keeps its place
    assert list(info.to_json()) == ["target", "wall_time", "sent_alone", "spec"]
    assert info.to_json()["sent_alone"] == [{"case": "a", "note": "timed out", "held_by": None}]
    info.unset("wall_time")
    assert "wall_time" not in info.to_json() and info.wall_time is None
    assert json.loads(json.dumps(info.to_json()))["target"] == "u"
