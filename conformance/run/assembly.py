"""Run assembly, runner-agnostic: from a Setup to a ready Run, and from Results to a verdict.

``assemble`` loads the spec, checks the selection, starts the embedded reference target
(or points at ``--target-url``), builds the client and proves with a preflight that the
target serves completions. ``conclude`` hands the merged Results to the judge core's one
wrap-up (conformance.judging.verdict.conclusion.conclude). Bad input raises ``BadInput``
with the one line to show. Reading a ``--baseline`` file and writing reports belong to the
runner layer (conformance.front.runner, which also has ``run_suite``): it hands the
baseline in as a ``BaselineGate``.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from conformance.judging.document.spec import (
    BUILTIN_SPECS,
    OPERATION_PATH,
    Spec,
    SpecError,
)
from conformance.judging.document.spec_notes import document_meta, registry
from conformance.judging.exceptions import ConformanceError
from conformance.judging.verdict.conclusion import conclude as conclude_results
from conformance.judging.verdict.results import Results
from conformance.judging.verdict.run_info import RegistryEntry, SpecNote
from conformance.judging.verdict.verdict import Verdict
from conformance.judging.version import VERSION
from conformance.run.client import Client, Pacer, RetryPolicy
from conformance.run.engine import Run
from conformance.run.fetch import Fetch, load_spec
from conformance.run.item import no_verdict_reason
from conformance.run.preflight import (
    PreflightFailed,
    base_url,
    preflight,
    probe_case,
    quick_probe_case,
)
from conformance.run.session import Settings, Setup, record_of

if TYPE_CHECKING:
    from conformance.judging.wire.case import Case
    from conformance.judging.wire.exchange import Exchange
    from conformance.reference import ReferenceServer

REFERENCE_MODEL = "reference-model"  # the only model the embedded target serves


class BadInput(ConformanceError):
    """The run cannot start; the message is the one line to show."""


class BaselineGate(Protocol):
    """An accepted earlier run (``--baseline``), as the runner layer supplies it."""

    @property
    def path(self) -> str:
        """The file it was read from."""
        ...

    @property
    def results(self) -> Results:
        """The earlier run's Results, which ``conclude`` compares this run's with."""
        ...

    @property
    def known(self) -> frozenset[str]:
        """The requirements failing in the baseline: they fail no test of this run."""
        ...

    def admit(self, this_run: Mapping[str, object]) -> list[str]:
        """The warnings to show for this run (another model or target); raises BadInput
        when the baseline cannot judge this run (another spec)."""
        ...


@dataclass
class Assembled:
    """A run ready to play, with what it must close and the Results its items merge into."""

    setup: Setup
    run: Run
    results: Results
    baseline: BaselineGate | None = None
    server: ReferenceServer | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def spec(self) -> Spec:
        return self.run.spec

    def close(self) -> None:
        self.run.close()
        self.run.client.close()
        if self.server is not None:
            self.server.stop()


def _check_generation(spec: Spec, settings: Settings) -> None:
    """A document that admits no request (Nscale as written, --strict-spec) ends the run in
    one line, rather than sending invalid "valid" requests."""
    from conformance.strategies import NoValidPrompt, valid_requests

    try:
        valid_requests(spec, model=settings.model, max_tokens=settings.max_tokens)
    except NoValidPrompt as exc:
        raise BadInput(str(exc)) from None


def assemble(setup: Setup, baseline: BaselineGate | None = None) -> Assembled:
    """Build the run ``setup`` asks for; BadInput when it cannot start.

    ``baseline``: ``setup.baseline`` as read by the runner layer (conformance.front.runner).
    """
    from conformance.run import option_values

    # Every option value first: bad input is one line before any request (option_values).
    if bad := option_values.problem(setup):
        raise BadInput(bad)
    fetch = Fetch(setup.api_key, setup.headers, setup.limits, setup.target_url)
    try:
        spec = load_spec(setup.spec, strict=setup.strict_spec, fetch=fetch, contract=setup.contract)
    except SpecError as exc:
        raise BadInput(str(exc)) from None
    if bad := option_values.spec_problem(setup, spec):
        raise BadInput(bad)
    settings = _checked(setup.settings)
    # The preflight leaves as early as it can: when the document's own schema takes the
    # minimal request as it is, it goes before the generation check and the run's
    # assembly, which import openapi-core and Hypothesis (~0.35 s) while it is on the wire.
    early = quick_probe_case(settings.model, spec) if setup.preflight else None
    if early is None:
        _check_generation(spec, settings)
    if setup.baseline and baseline is None:
        raise BadInput(f"--baseline {setup.baseline}: not read (use conformance.front.runner)")
    baseline_warnings: list[str] = []
    if baseline is not None:
        this_run = {
            "spec": spec.name,
            "model": settings.model,
            "seed": settings.seed,
            "max_examples": settings.max_examples,
            "fuzz": settings.fuzz,
            "suite_version": VERSION,
        }
        baseline_warnings = baseline.admit(this_run)
        settings = replace(settings, known_failures=baseline.known)
    # The preflight request comes out of the budget too.
    settings = replace(settings, budget_requests=settings.budget_requests - 1)
    server, notes = None, []
    api_key = setup.api_key
    if setup.target_url:
        target, note = base_url(setup.target_url, spec.operation_path, spec.path_prefix)
        notes += [note] if note else []
    else:
        # The embedded default: the reference target of the spec's flavour, with a key of
        # its own so that the auth requirements are exercised too.
        from conformance.reference import ReferenceServer

        api_key = "sk-reference-" + secrets.token_hex(12)
        flavor = spec.name if spec.name in BUILTIN_SPECS else "aihubmix"
        if spec.operation_path != OPERATION_PATH:
            raise BadInput(
                f"the embedded target serves POST {OPERATION_PATH}, the spec's operation is "
                f"POST {spec.operation_path}: pass --target-url"
            )
        server = ReferenceServer(flavor, api_key=api_key, models=(REFERENCE_MODEL,))
        target = server.start()
    client = Client(
        base_url=target,
        path=spec.operation_path,
        api_key=api_key,
        media_type=spec.request_media_type,
        extra_headers=dict(setup.headers),
        limits=setup.limits,
        retry=RetryPolicy(),
        pacer=Pacer(setup.rps / setup.workers if setup.rps else None),
        concurrency=settings.concurrency,
    )
    flight = None
    if early is not None:
        flight = Flight(lambda: preflight(client, settings.model, spec, early))
        try:
            # A document whose minimal request is valid has a prompt to draw: this never
            # raises in practice, but a run that cannot start stops what it started.
            _check_generation(spec, settings)
        except BadInput:
            client.close()
            if server is not None:
                server.stop()
            raise
    run = Run(settings, spec, client, workers=setup.workers)
    results = Results.for_requirements(run.requirements)
    header = _header(setup, spec, settings, target)
    results.begin(header, record_of(spec, settings, run_id=secrets.token_hex(8)))
    if baseline_warnings:
        results.note_baseline_warnings(baseline_warnings)
        notes = [*notes, *(f"baseline warning: {w}" for w in baseline_warnings)]
    assembled = Assembled(setup, run, results, baseline, server, notes)
    if setup.preflight:
        try:
            _preflight(assembled, flight, early)
        except PreflightFailed as exc:
            assembled.close()
            raise BadInput(str(exc)) from None
    return assembled


def _checked(settings: Settings) -> Settings:
    from conformance.judging.checks import load_checks

    load_checks()  # unknown IDs are option_values.problem's
    if settings.require_capabilities:
        try:
            from conformance.judging.verdict import capabilities  # noqa: F401
        except ImportError:
            raise BadInput("--require-capabilities: this build has no capability probes") from None
    return settings


def _header(setup: Setup, spec: Spec, settings: Settings, target: str) -> dict[str, Any]:
    """The RunInfo fields an assembled run starts with, in results.json's order."""
    return {
        "target": target if setup.target_url else "embedded reference target",
        **document_meta(spec),
        "strict": settings.strict,
        "suite_version": VERSION,
        "errata": tuple(SpecNote(e.id, e.title, e.detail) for e in spec.errata),
        "policies": tuple(RegistryEntry(**entry) for entry in registry(spec)),
        "conventions": tuple(SpecNote(c.id, c.title, c.detail) for c in spec.conventions),
        "model": settings.model,
        "seed": settings.seed,
        # What a --baseline taken from this run records it was taken with (conformance.reports.baseline).
        "max_examples": settings.max_examples,
        # What conformance-compare names when two runs differ (conformance.reports.matrix).
        "max_tokens": settings.max_tokens,
        "fuzz": settings.fuzz,
        "concurrency": settings.concurrency,
        "started": time.time(),
    }


#: How long the preflight may take before the run works beside it (``_beside``): a target
#: that answers sooner leaves no wait to fill.
AHEAD_AFTER = 0.1


def _preflight(assembled: Assembled, flight: Flight | None, early: Case | None) -> None:
    run, results = assembled.run, assembled.results
    model, spec = run.settings.model, run.spec
    if flight is None:
        flight = Flight(lambda: preflight(run.client, model, spec))
    sent = [_beside(run, flight, draws=assembled.setup.workers == 1)]
    if early is not None and early != probe_case(model, spec):
        # The quick check and the case constructor disagree (never seen with the vendored
        # documents, tests/test_preflight.py): the constructor's case decides, sent now;
        # the early one counts as spent.
        sent.append(preflight(run.client, model, spec))
    for exchange in sent:
        results.spent.requests += 1 + exchange.retries
        results.spent.retries += exchange.retries
    first = sent[-1]
    if first.status is not None:  # always: preflight() returns a 200 or a 429
        results.note_status(first.status)
    if first.status == 429:
        # Rate limited already, after the retries: this process's items send nothing.
        run.rate_limited = True
        results.note_no_verdict(no_verdict_reason(run.client.retry))


class Flight:
    """``send()`` (the preflight) started now on a thread of its own; ``result()`` waits
    for it and raises what it raised."""

    def __init__(self, send: Callable[[], Exchange]) -> None:
        self._done: list[Exchange] = []
        self._failed: list[BaseException] = []

        def go() -> None:
            try:
                self._done.append(send())
            except BaseException as exc:  # raised again on the caller's thread
                self._failed.append(exc)

        self._thread = threading.Thread(target=go, name="conformance-preflight", daemon=True)
        self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Whether it has been answered (or failed), waiting at most ``timeout``."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def result(self) -> Exchange:
        self.wait()
        if self._failed:
            raise self._failed[0]
        return self._done[0]


def _beside(run: Run, flight: Flight, *, draws: bool) -> Exchange:
    """The preflight's answer, and, when it is not answered within AHEAD_AFTER, what the
    first round needs built on this thread meanwhile, until it is answered: the edge and
    invalid lists and (``draws``) the drawn valid requests (conformance/run/ahead.py).
    Nothing else is sent before its answer. (Starting the openai import here too was
    measured: no gain against a 1 s target, benchmarks/RESULTS.md §12; it starts where
    it did.)"""
    from conformance.run.ahead import build_ahead

    if not flight.wait(AHEAD_AFTER):
        build_ahead(run, lambda: flight.wait(0), draws=draws)
    return flight.result()


def conclude(
    assembled: Assembled, *, runner_error: str | None = None, partial: bool = False
) -> Verdict:
    """The verdict of the merged Results, decided by the judge core's one wrap-up
    (conformance.judging.verdict.conclusion.conclude) and stored on them."""
    results, gate = assembled.results, assembled.baseline
    results.note_ended(round(time.time() - (results.info.started or time.time()), 3))
    to_dict = getattr(getattr(assembled.run.client, "stats", None), "to_dict", None)
    return conclude_results(
        results,
        None if gate is None else gate.results,
        baseline_file=None if gate is None else gate.path,
        errors=(runner_error,) if runner_error else (),
        interrupted=assembled.run.interrupted,
        # This process's client: peak in flight, retries...
        figures=to_dict() if callable(to_dict) else None,
        partial=partial,
    )
