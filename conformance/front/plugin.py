"""The pytest plugin (entry point ``pytest11``): maps the engine onto pytest.

It stays inert unless the suite itself (the ``conformance`` package's tests) is being
run, so installing the package does not slow down or change other pytest runs: only
options.py loads up front; the run is assembled (assembly.py) when the suite is
requested, and lives in one ``SuiteSession`` plugin object registered for that session.
Each suite test plays one scenario into an item; its outcome becomes the test's pass,
fail or skip, and its Results ride on the test report to the controller (also across
pytest-xdist workers). At the end the verdict sets the exit code (verdict.EXIT_CODES) and
the closing lines come last (terminal.py). Bad input ends the run with one ``ERROR:`` line.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from conformance.front.options import (
    SUITE_DIR,
    add_options,
    parse_shard,
    setup_from,
    suite_requested,
)

if TYPE_CHECKING:
    from conformance.judging.verdict.events import Event, ItemEvent, Listener
    from conformance.run.assembly import Assembled
    from conformance.run.item import ItemOutcome, ItemRun
    from conformance.run.scenarios import Scenario

__all__ = ["SUITE_DIR", "Suite", "listen", "raise_outcome", "rewrite_no_library", "suite_test"]
STATE = pytest.StashKey["SuiteSession"]()
ITEM_KEY = pytest.StashKey["ItemRun"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> Iterator[None]:
    """Before pytest parses the line for good (conftests loaded, their options known): a
    word of a suite run that is neither the suite's nor pytest's ends it in one line, before
    anything is sent (conformance/front/arguments.py)."""
    result = yield
    from conformance.front.arguments import in_suite, one_line, problem

    where = early_config.invocation_params.dir
    if early_config.known_args_namespace.help or early_config.known_args_namespace.version:
        return result
    try:
        namespace, unknown = parser.parse_known_and_unknown_args(args)
    except pytest.UsageError as exc:  # a pytest option's value argparse refused
        if any(in_suite(a, where) for a in args if not a.startswith("-")):
            raise pytest.UsageError(f"conformance: {one_line(str(exc))}") from None
        return result
    if not any(in_suite(str(a), where) for a in namespace.file_or_dir or ()):
        return result
    # The suite's own options, to name the one a mistyped option most likely meant.
    group = parser.getgroup("conformance")
    ours = [name for option in getattr(group, "options", ()) for name in option.names()]
    if bad := problem(namespace, unknown, where, ours):
        raise pytest.UsageError(f"conformance: {bad}")
    return result


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "conformance: a test of the conformance suite")
    if not suite_requested(config):
        return
    rewrite_no_library(config)
    from conformance.front import interrupt
    from conformance.front.runner import assemble
    from conformance.run.assembly import BadInput

    # Until the session starts nothing was judged: a Ctrl-C (the preflight against a slow
    # target) quits at once, in one line and with the interrupted status, not pytest's 2.
    worker = hasattr(config, "workerinput")
    restore = None if worker else interrupt.on_sigint(interrupt.quit_at_once(interrupt.EARLY))
    try:
        assembled = assemble(setup_from(config))
    except BadInput as exc:
        if restore is not None:
            restore()
        raise pytest.UsageError(f"conformance: {exc}") from None
    session = SuiteSession(config, assembled)
    if restore is not None:  # cleanups run last in first: this one after the run is closed
        session.restores.append(restore)
        config.add_cleanup(session.release_sigint)
    config.add_cleanup(assembled.close)
    if worker:
        # A pytest-xdist worker: its items' events travel to the controller with their
        # reports (pytest_runtest_makereport), whose listeners hear the whole run.
        assembled.run.emit.listen(session.ship)
    config.stash[STATE] = session
    config.pluginmanager.register(session, "conformance-session")
    config.add_cleanup(lambda: config.pluginmanager.unregister(session))
    freeze_heap()


def freeze_heap() -> None:
    """Take what the run imported and assembled out of the garbage collector's sight, and
    the rest at the interpreter's exit.

    A run imports ~130,000 long-lived containers (hypothesis, openapi-core, pydantic,
    openai's types) that every full collection walks again: pytest's unconfigure collects five
    times over, and the interpreter's teardown walks them after the last line, 0.3–0.6 s
    between the verdict and the exit against ~0.03 s frozen (benchmarks/RESULTS.md §12).
    Frozen objects stay alive to the exit, as they would anyway; garbage made by the run
    itself is collected as before. Not inside another pytest's test (pytester's
    in-process runs: their process goes on and must free what each inner run leaves).
    """
    if os.environ.get("PYTEST_CURRENT_TEST"):
        return
    import gc

    gc.freeze()
    if not _FREEZE_AT_EXIT:
        import atexit

        atexit.register(gc.freeze)
        _FREEZE_AT_EXIT.append(True)


_FREEZE_AT_EXIT: list[bool] = []


def rewrite_no_library(config: pytest.Config) -> None:
    """From here on, pytest assertion-rewrites no installed library, only test modules.

    pytest rewrites every module of every installed distribution with a ``pytest11`` entry
    point (hypothesis, anyio, this package...) and keeps the result as bytecode beside the
    source. Where no bytecode is written (PYTHONDONTWRITEBYTECODE, usual in containers and
    CI; a read-only site-packages) that is ~150 modules parsed and compiled again on every
    run: about 2 s of CPU, the larger part of a default run's fixed cost (benchmarks §8c).
    It was also a crash: a module first imported during the run (the openai SDK's anyio
    modules, a lazily imported check) was rewritten on a worker thread while another was
    rewritten elsewhere, and CPython 3.11's ``ast`` is not thread-safe ("AST constructor
    recursion depth mismatch"). Library code gains nothing from rewritten asserts; the
    suite's ``test_*.py`` modules match pytest's file patterns and are still rewritten, at
    collection, on the main thread, and pytest's own helpers (``_pytest.*``, e.g. pytester's
    assertions) keep theirs. The marks are pytest's private state: where a pytest version
    lacks them, nothing changes but the cost. (Not in the project's own tests: their
    in-process pytester runs mark hypothesis again, and pytest warns, an error there, when
    a marked module was imported unrewritten.)
    """
    hook = getattr(config.pluginmanager, "rewrite_hook", None)
    marked = getattr(hook, "_must_rewrite", None)
    cache = getattr(hook, "_marked_for_rewrite_cache", None)
    if isinstance(marked, set) and isinstance(cache, dict):
        marked.difference_update({name for name in marked if name.split(".")[0] != "_pytest"})
        cache.clear()


def suite_test(scenario: Scenario) -> Callable[..., None]:
    """The pytest test that plays ``scenario`` (one item per param); a suite module binds
    it to ``test_<scenario name>``, the name prefetching looks scenarios up by."""
    if scenario.params == (None,):

        def test(conformance: Suite) -> None:
            conformance.play(scenario)

        return pytest.mark.conformance(test)

    def test_param(conformance: Suite, param: Any) -> None:
        conformance.play(scenario, param)

    marked = pytest.mark.parametrize("param", scenario.params, ids=scenario.ids or None)
    return pytest.mark.conformance(marked(test_param))  # type: ignore[no-any-return]


class Suite:
    """What a suite test sees as its ``conformance`` fixture: one item of the run.

    ``play(scenario, param)`` is all a suite test needs. ``send``/``send_all`` and
    ``verdict()`` remain for scenario files written against the item directly.
    """

    def __init__(self, item: ItemRun) -> None:
        self.item = item
        self.run, self.spec, self.settings = item.run, item.spec, item.settings
        self.send, self.send_all = item.send, item.send_all

    def play(self, scenario: Scenario, param: Any = None) -> None:
        from conformance.run.engine import play

        play(self.item, scenario, param)
        self.verdict()

    def verdict(self) -> None:
        """Fail the test when a deciding requirement failed; skip when nothing was judged."""
        raise_outcome(self.item.outcome())


def raise_outcome(outcome: ItemOutcome) -> None:
    """An item's outcome as pytest's: fail (no traceback) or skip; passed returns."""
    if outcome.word == "failed":
        pytest.fail(outcome.message, pytrace=False)
    if outcome.word == "skipped":
        pytest.skip(outcome.message)


@pytest.fixture
def conformance(request: pytest.FixtureRequest) -> Iterator[Suite]:
    """The run, seen from one suite test."""
    session = request.config.stash.get(STATE, None)
    if session is None:
        pytest.skip("the conformance suite runs only when its tests are selected")
    item = session.assembled.run.item()
    request.node.stash[ITEM_KEY] = item
    yield Suite(item)


def listen(config: pytest.Config, listener: Listener) -> bool:
    """Have ``listener`` hear the run of this pytest session as events
    (conformance/judging/verdict/events.py): RunStarted when the session starts, every judged
    exchange and scenario item (an xdist worker's too, shipped to the controller), and
    RunFinished with the typed Results and verdict. Call it from ``pytest_configure``
    (a plugin or conftest); False when the suite is not running in this session."""
    session = config.stash.get(STATE, None)
    if session is None:
        return False
    session.assembled.run.emit.listen(listener)
    return True


class SuiteSession:
    """The hooks of one suite session, holding its assembled run (no module globals)."""

    def __init__(self, config: pytest.Config, assembled: Assembled) -> None:
        self.config = config
        self.assembled = assembled
        self.closing: list[str] = []
        self.passed = False
        self.tests_deselected = 0
        self.usage_error: str | None = None
        self.shipping: list[ItemEvent] = []
        self.shipping_lock = threading.Lock()
        self.finishing = False
        self.terminal: int | None = None
        self.restores: list[Callable[[], None]] = []  # each puts a Ctrl-C handler back

    def release_sigint(self) -> None:
        """Put Ctrl-C's handler back and close the copy of stderr its lines went to. After
        a Ctrl-C, SIGINT is ignored instead: the process only has to exit, and Python's
        teardown (~0.5 s) turns a Python handler into the default one, which would end it
        killed rather than with 130; until this point a second Ctrl-C quits at once."""
        from conformance.front import interrupt

        if self.assembled.run.interrupted:
            interrupt.ignore()
        else:
            for restore in reversed(self.restores):
                restore()
        if self.terminal is not None:
            os.close(self.terminal)
            self.terminal = None

    def ship(self, event: Event) -> None:
        """Keep an item's event to ship to the controller (an xdist worker's listener)."""
        from conformance.judging.verdict.events import ExchangeJudged, ScenarioFinished

        if isinstance(event, ExchangeJudged | ScenarioFinished):
            with self.shipping_lock:
                self.shipping.append(event)

    @pytest.hookimpl(wrapper=True)
    def pytest_collection(self, session: pytest.Session) -> Any:
        """pytest refusing the line once the run has started (a node ID not found): its
        ``ERROR:`` line goes into the closing lines, before the verdict, which stays last;
        pytest is left nothing to print after it (a UsageError without a message).

        From here on pytest finishes the session whatever happens (pytest_sessionfinish,
        where the reports are written), so a Ctrl-C now stops the run (``interrupt``);
        before, it quits at once (pytest_configure's handler): there is nothing to report."""
        self.catch_ctrl_c()
        try:
            return (yield)
        except pytest.UsageError as exc:
            said = " ".join(" ".join(str(a).split()) for a in exc.args)  # one line
            self.usage_error = said or "usage error"
            raise pytest.UsageError() from None

    def pytest_sessionstart(self) -> None:
        """The run is told as events from here (listeners added in pytest_configure hear
        it all; an xdist worker's are shipped to the controller, which tells RunStarted)."""
        if hasattr(self.config, "workerinput"):
            return
        from conformance.judging.verdict.events import RunStarted

        self.assembled.run.emit(RunStarted(self.assembled.results.run_record))

    def catch_ctrl_c(self) -> None:
        """A Ctrl-C from now on stops the run (``interrupt``), a second quits at once."""
        if hasattr(self.config, "workerinput"):
            return
        from conformance.front import interrupt

        # pytest's capture sends fd 2 to a file while a test runs: the lines of a Ctrl-C go
        # to the terminal's stderr as it is now, between tests.
        self.terminal = os.dup(2)
        # pytest's progress line is usually half written: the Ctrl-C's line starts afresh.
        again = interrupt.quit_at_once("\n" + interrupt.AGAIN, fd=self.terminal)
        first = interrupt.first_then_quit(
            self.interrupt, again=again, fd=self.terminal, line="\n" + interrupt.FIRST
        )
        self.restores.append(interrupt.on_sigint(first))
        # The KeyboardInterrupt raised by the handler is lost when it ran inside a gc
        # callback or a __del__ (Python prints it as "Exception ignored" and goes on): the
        # engine stops the main thread at its next wait instead, once a thread of ours has
        # failed what it waits for (Run.abandon); the lost one is not printed.
        threading.Thread(target=self._abandon_once_interrupted, daemon=True).start()
        unraisable = sys.unraisablehook

        def lost(args: Any) -> None:
            kind = args.exc_type or type(None)
            if not (self.assembled.run.interrupted and issubclass(kind, KeyboardInterrupt)):
                unraisable(args)

        sys.unraisablehook = lost  # pytest puts its own (or the first) back at its cleanup

    def _abandon_once_interrupted(self) -> None:
        run = self.assembled.run
        while run.interrupted is None:
            if self.finishing:
                return
            time.sleep(0.1)
        run.abandon()

    def interrupt(self) -> None:
        """The first Ctrl-C: nothing more is sent (in-flight sends are abandoned), and pytest
        stops where its main thread is (a KeyboardInterrupt, which pytest expects); then
        pytest_sessionfinish writes what was judged, verdict ``interrupted``."""
        if self.finishing:
            return  # the run has ended: its reports are being written, as they were
        started = self.assembled.results.info.started or time.time()
        self.assembled.run.interrupt(f"stopped by Ctrl-C after {time.time() - started:.1f} s")
        raise pytest.Session.Interrupted("Ctrl-C")

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.tests_deselected += len(items)

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Keep only this shard's slice of the suite (every N-th item, in collection order)."""
        shard = self.config.option.shard
        if not shard:
            return
        k, n = parse_shard(shard)
        keep = [item for i, item in enumerate(items) if i % n == k - 1]
        dropped = [item for i, item in enumerate(items) if i % n != k - 1]
        if dropped:
            self.config.hook.pytest_deselected(items=dropped)
        items[:] = keep
        self.assembled.results.note_shard(shard)

    def pytest_report_header(self) -> list[str]:
        info, spec = self.assembled.results.info, self.assembled.spec
        lines = [
            f"conformance: target {info.target}, spec {spec.name} ({info.spec_title}), "
            f"model {info.model}, concurrency {info.concurrency}",
            *(f"conformance: {note}" for note in self.assembled.notes),
        ]
        from conformance.judging.document.spec_notes import header_lines

        return lines + header_lines(spec)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """Start every dependent chain and queue every independent case up front
        (``Run.plan``), ``--concurrency`` at a time.

        Not on xdist workers, which learn their items one at a time, nor when nothing
        runs (``--collect-only``: no request may be sent).
        """
        run = self.assembled.run
        if run.concurrency == 1 or hasattr(self.config, "workerinput"):
            return
        if self.config.option.collectonly:
            return
        from conformance.run.scenarios import BY_NAME

        planned = []
        for item in session.items:
            scenario = BY_NAME.get(getattr(item, "originalname", item.name).removeprefix("test_"))
            callspec = getattr(item, "callspec", None)
            if scenario is not None:
                planned.append((scenario, callspec.params.get("param") if callspec else None))
        run.plan(planned)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
        report = yield
        item_run = item.stash.get(ITEM_KEY, None)
        if item_run is not None and call.when == "call" and item_run.unsent:
            # Cut short by the budget: shown as CUT, not PASSED (pytest_report_teststatus).
            note = item_run.budget_note or "the budget ran out"
            report.conformance_cut = f"{note}, {item_run.unsent} request(s) unsent"
        if item_run is not None and call.when == "teardown":
            # Travels with the report (also across pytest-xdist) to the controller.
            report.conformance_results = json.dumps(item_run.results.to_json())
        if call.when == "teardown" and self.shipping:
            from conformance.judging.verdict.events import item_event_to_json

            with self.shipping_lock:
                shipped, self.shipping = self.shipping, []
            report.conformance_events = json.dumps([item_event_to_json(e) for e in shipped])
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_teststatus(self, report: pytest.TestReport) -> Any:
        """A scenario the budget cut short passed nothing it did not send: pytest's own line
        says ``CUT (why)`` and its footer counts it apart ("1 cut"), never PASSED."""
        cut = getattr(report, "conformance_cut", None)
        if cut and report.when == "call" and report.passed:
            return "cut", "c", (f"CUT ({cut})", {"yellow": True})
        return None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        events = getattr(report, "conformance_events", None)
        if events is not None and not hasattr(self.config, "workerinput"):
            # Heard on an xdist worker: told again here, to the controller's listeners.
            from conformance.judging.verdict.events import item_event_from_json

            for data in json.loads(events):
                self.assembled.run.emit(item_event_from_json(data))
        payload = getattr(report, "conformance_results", None)
        if payload is not None:
            from conformance.judging.verdict.results import Results
            from conformance.run.engine import merge_item

            merge_item(self.assembled.results, Results.from_json(json.loads(payload)))

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        config = self.config
        if hasattr(config, "workerinput") or config.option.collectonly:
            return
        self.finishing = True
        from conformance.front.runner import finish
        from conformance.front.terminal import ClosingBlock
        from conformance.reports import ReportWriter

        self.assembled.run.close()
        # Normalised: "--report-dir ../runs/x" is shown as .../runs/x, not .../repo/../runs/x.
        report_dir = Path(
            os.path.abspath(Path(config.invocation_params.dir, config.option.report_dir))
        )
        from conformance.judging.verdict.decision import failing

        # Whether a suite test failed for a conformance failure (as ItemRun.outcome does).
        failed = bool(failing(self.assembled.results, self.assembled.results.run_record))
        # pytest's own "interrupted" (2) after a Ctrl-C is the interruption, not an error.
        runner_error = (
            None if self.assembled.run.interrupted else _runner_error(exitstatus, failing=failed)
        )
        # The run told as events: RunFinished is heard by the report writer, then by the
        # closing block (which names the files written), as by any listener of the run.
        writer = ReportWriter(report_dir)
        block = ClosingBlock(
            self.assembled.spec,
            reports=lambda: writer.written,
            tests_deselected=self.tests_deselected,
        )
        verdict, _ = finish(
            self.assembled,
            None,
            runner_error=self.usage_error or runner_error,
            partial=bool(config.option.shard),
            listeners=(writer, block),
        )
        # An error keeps pytest's own code (interrupted, internal error, usage...).
        keep = verdict.word == "error" and exitstatus not in (0, 1)
        session.exitstatus = exitstatus if keep else verdict.exit_code
        self.passed = verdict.word == "passed"
        self.closing = block.lines
        if self.usage_error:
            self.closing.insert(-1, f"ERROR: {self.usage_error}")

    def pytest_unconfigure(self) -> None:
        """After pytest's own footer ("3 passed, 24 skipped", green even when the verdict
        is not): the conformance lines, verdict last, in the verdict's colour."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if not self.closing or reporter is None:
            return
        reporter.write_sep("-", "conformance")
        for line in self.closing[:-1]:
            reporter.write_line(line)
        reporter.write_line(self.closing[-1], green=self.passed, red=not self.passed, bold=True)


def _runner_error(exitstatus: int, *, failing: bool) -> str | None:
    """What pytest saw go wrong beyond conformance failures (a suite test broke...)."""
    if exitstatus == pytest.ExitCode.OK or (exitstatus == pytest.ExitCode.TESTS_FAILED and failing):
        return None
    if exitstatus == pytest.ExitCode.TESTS_FAILED:
        return "a suite test failed without a conformance failure (a defect of the suite)"
    return f"pytest ended with exit status {int(exitstatus)}"
