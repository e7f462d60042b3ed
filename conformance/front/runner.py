"""The runner layer without pytest: a whole run from a Setup, with --baseline and reports.

``run_suite`` assembles the run (conformance.run.assembly), plays every scenario (engine),
has the judge core decide the verdict and writes the reports. ``assemble`` and ``finish``
are the same two ends for a runner that plays the scenarios itself (the pytest plugin).
This layer may import the reports; the engine and the judge core below it never do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from conformance.judging.verdict.baseline import check_baseline, known_failures
from conformance.judging.verdict.events import Listener, RunFinished, RunStarted
from conformance.judging.verdict.results import Results
from conformance.judging.verdict.verdict import Verdict
from conformance.run.assembly import Assembled, BadInput, conclude
from conformance.run.assembly import assemble as assemble_run
from conformance.run.engine import Played, execute
from conformance.run.session import Setup

if TYPE_CHECKING:
    from conformance.run.scenarios import Scenario


@dataclass(frozen=True, slots=True)
class FileBaseline:
    """``--baseline FILE``: an accepted earlier run's results.json (assembly.BaselineGate)."""

    path: str
    results: Results
    #: What this run records of its options (results.json ``meta.options``), compared with
    #: what the baseline recorded.
    options: Mapping[str, Mapping[str, Any]] | None = None

    @classmethod
    def read(
        cls, path: str, options: Mapping[str, Mapping[str, Any]] | None = None
    ) -> FileBaseline:
        from conformance.front.compare import InputError, load_results

        try:
            return cls(path, load_results(Path(path)), options)
        except InputError as exc:
            raise BadInput(f"--baseline {exc}") from None

    @property
    def known(self) -> frozenset[str]:
        return known_failures(self.results)

    def admit(self, this_run: Mapping[str, object]) -> list[str]:
        if self.options is not None:
            this_run = {**this_run, "options": self.options}
        refused, warnings = check_baseline(this_run, self.results)
        if refused:
            raise BadInput(f"--baseline {self.path}: {refused[0]}")
        return warnings


def assemble(setup: Setup) -> Assembled:
    """The run ``setup`` asks for, its --baseline read; BadInput when it cannot start.
    results.json records every option that changes what is sent or how it is judged
    (``meta.options``, conformance/front/option_table.py), and a baseline that recorded
    another value of one is a warning."""
    from conformance.front.option_table import recorded

    options = recorded(setup)
    baseline = FileBaseline.read(setup.baseline, options) if setup.baseline else None
    assembled = assemble_run(setup, baseline)
    assembled.results.note_options(options)
    return assembled


def finish(
    assembled: Assembled,
    report_dir: Path | None,
    *,
    runner_error: str | None = None,
    partial: bool = False,
    listeners: Iterable[Listener] = (),
) -> tuple[Verdict, list[Path]]:
    """The verdict of the merged Results (decided by the judge core), told as RunFinished
    to the run's listeners: the reports are written by one (ReportWriter, registered here
    first when ``report_dir`` is given), then ``listeners`` (the terminal's block) hear it."""
    verdict = conclude(assembled, runner_error=runner_error, partial=partial)
    emit = assembled.run.emit
    writer = None
    if report_dir is not None:
        from conformance.reports import ReportWriter

        writer = ReportWriter(report_dir)
        emit.listen(writer)
    for listener in listeners:
        emit.listen(listener)
    emit(RunFinished(assembled.results, verdict, partial))
    return verdict, [] if writer is None else list(writer.written)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What ``run_suite`` returns."""

    results: Results
    verdict: Verdict
    played: tuple[Played, ...]
    reports: tuple[Path, ...] = ()


def run_suite(
    setup: Setup,
    scenarios: Sequence[Scenario] | None = None,
    report_dir: Path | None = None,
    listeners: Iterable[Listener] = (),
) -> Outcome:
    """A whole run without pytest: assemble, play every scenario, decide, write reports.

    ``listeners`` hear the run as events (conformance/judging/verdict/events.py), RunFinished last.
    """
    from conformance.run.scenarios import SCENARIOS

    assembled = assemble(setup)
    emit = assembled.run.emit
    for listener in listeners:
        emit.listen(listener)
    emit(RunStarted(assembled.results.run_record))
    try:
        played = execute(
            assembled.run, SCENARIOS if scenarios is None else scenarios, assembled.results
        )
    finally:
        assembled.close()
    errors = [f"{p.name}: {p.outcome.message}" for p in played if p.outcome.word == "error"]
    verdict, written = finish(assembled, report_dir, runner_error=errors[0] if errors else None)
    return Outcome(assembled.results, verdict, tuple(played), tuple(written))
