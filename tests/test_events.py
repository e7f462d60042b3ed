"""A run told as typed events: a new consumer hears the whole run through the public API.

A listener handed to ``conformance.run_suite`` (no hook into the engine) hears RunStarted
first, an ExchangeJudged for every judged request, a ScenarioFinished for every scenario
item, and RunFinished last with the typed Results and verdict; the reports and the
terminal's closing block are such listeners themselves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import conformance
from conformance.front.terminal import ClosingBlock
from conformance.judging.events import ExchangeJudged, RunFinished, RunStarted, ScenarioFinished
from conformance.run.scenarios import SCENARIOS


class Dashboard:
    """What a live dashboard would keep: every event, in order."""

    def __init__(self) -> None:
        self.heard: list[Any] = []

    def __call__(self, event: Any) -> None:
        self.heard.append(event)


def test_a_new_listener_sees_the_whole_run_without_touching_the_engine(tmp_path: Path) -> None:
    dashboard = Dashboard()
    setup = conformance.Setup(
        spec="nscale", settings=conformance.Settings(max_examples=2, concurrency=4)
    )
    outcome = conformance.run_suite(setup, report_dir=tmp_path, listeners=[dashboard])
    heard = dashboard.heard
    assert isinstance(heard[0], RunStarted)
    assert heard[0].record.run_id == outcome.results.run_record.run_id
    assert [type(e) for e in heard].count(RunStarted) == 1
    # Every judged exchange: each answered one is counted once in the observed statuses,
    # beside the preflight's (which is no scenario's and is judged by nothing).
    judged = [e for e in heard if isinstance(e, ExchangeJudged)]
    observed = outcome.results.info.observed_statuses or {}
    assert len(judged) == sum(observed.values()) - 1 > 0
    assert all(e.status is not None for e in judged)
    # Every scenario item, as played and as the record keeps it.
    finished = tuple(e.run for e in heard if isinstance(e, ScenarioFinished))
    assert finished == outcome.results.run_record.scenarios
    assert {r.id.split("[")[0] for r in finished} == {s.name for s in SCENARIOS}
    # Finished last, with the typed objects the reports are written from.
    assert heard[-1] == RunFinished(outcome.results, outcome.verdict)
    assert heard[-1].results.verdict is outcome.verdict
    assert sorted(p.name for p in outcome.reports) == [
        "junit.xml",
        "report.html",
        "results.json",
        "summary.md",
    ]


def test_the_closing_block_is_a_listener_too(tmp_path: Path) -> None:
    from conformance.judging.spec import load_spec

    block = ClosingBlock(load_spec("nscale"), reports=lambda: [tmp_path / "x.json"])
    setup = conformance.Setup(
        spec="nscale", settings=conformance.Settings(max_examples=2, concurrency=4)
    )
    outcome = conformance.run_suite(setup, listeners=[block])
    assert block.lines[-1].startswith(f"verdict: {outcome.verdict.word}")
    assert f"report: {tmp_path / 'x.json'}" in block.lines
