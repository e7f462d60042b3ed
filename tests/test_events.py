"""A run told as typed events: a new consumer hears the whole run through the public API.

A listener handed to ``conformance.run_suite`` (no hook into the engine) hears RunStarted
first, an ExchangeJudged for every judged request, a ScenarioFinished for every scenario
item, and RunFinished last with the typed Results and verdict; the reports and the
terminal's closing block are such listeners themselves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import conformance
from conformance.front.plugin import SUITE_DIR
from conformance.front.terminal import ClosingBlock
from conformance.judging.verdict.events import (
    ExchangeJudged,
    RunFinished,
    RunStarted,
    ScenarioFinished,
)
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
    from conformance.judging.document.spec import load_spec

    block = ClosingBlock(load_spec("nscale"), reports=lambda: [tmp_path / "x.json"])
    setup = conformance.Setup(
        spec="nscale", settings=conformance.Settings(max_examples=2, concurrency=4)
    )
    outcome = conformance.run_suite(setup, listeners=[block])
    assert block.lines[-1].startswith(f"verdict: {outcome.verdict.word}")
    assert f"report: {tmp_path / 'x.json'}" in block.lines


DASHBOARD = """
import json

import pytest

from conformance.front.plugin import listen

heard = []


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    listen(config, heard.append)


def pytest_unconfigure(config):
    if hasattr(config, "workerinput"):
        return
    names = [type(e).__name__ for e in heard]
    finished = sorted(e.run.id for e in heard if type(e).__name__ == "ScenarioFinished")
    last = heard[-1]
    with open("heard.json", "w") as out:
        json.dump({"names": names, "finished": finished, "word": last.verdict.word,
                   "scenarios": sorted(s.id for s in last.results.run_record.scenarios)}, out)
"""


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["one-process", "xdist"])
def test_the_pytest_plugin_tells_the_same_events(
    pytester: pytest.Pytester, workers: tuple[str, ...]
) -> None:
    """A listener added through conformance.front.plugin.listen (from any plugin's
    pytest_configure) hears the whole run, under pytest-xdist too (the workers' events
    travel to the controller with their items' reports)."""
    pytester.makepyfile(dashboard_plugin=DASHBOARD)
    result = pytester.runpytest_subprocess(
        str(SUITE_DIR), "-p", "dashboard_plugin", "-p", "no:cacheprovider",
        "--spec", "nscale", "--max-examples", "2", "--report-dir", str(pytester.path / "out"),
        *workers,
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()
    heard = json.loads((pytester.path / "heard.json").read_text())
    names = heard["names"]
    assert names[0] == "RunStarted" and names.count("RunStarted") == 1
    assert names[-1] == "RunFinished" and names.count("RunFinished") == 1
    assert names.count("ExchangeJudged") > 50
    assert heard["finished"] == heard["scenarios"] and heard["finished"]
    assert heard["word"] == "passed"
