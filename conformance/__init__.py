"""completions-conformance: contract tests for OpenAI-compatible ``POST /v1/completions``.

The package holds the judge core (conformance.judging: the run record, the one
``decide()``, building an Exchange from wire bytes or a transcript), the spec model,
cases, client, SSE reader, checks and the requirement registry, the runner-agnostic
engine, the pytest plugin, the suite that ``pytest conformance`` collects, and the
embedded reference target. See ARCHITECTURE.md.

The public API, typed (``py.typed``), for tools that drive a run, judge recorded exchanges
or add a provider's own requirements::

    spec = conformance.load_spec("aihubmix")                           # a Spec
    exchange = conformance.exchange_from_transcript(recorded)          # or exchange_from_wire
    findings = conformance.judge(spec, exchange)                       # list[Finding]
    outcome = conformance.run_suite(conformance.Setup(...))            # .results, .verdict

    @conformance.requirement("ACME-ID", level=conformance.Level.MUST, area="schema",
                             statement="...", source="...", evidence="client-visible")
    def acme_id(ctx: conformance.Context) -> None: ...                 # raise Violation

Names are imported on first use, so that loading the pytest plugin (which imports this
package) stays cheap; type checkers see them through the imports below.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

from conformance.judging.version import VERSION

if TYPE_CHECKING:
    from conformance.front.runner import Outcome as Outcome
    from conformance.front.runner import run_suite as run_suite
    from conformance.judging.document.spec import Spec as Spec
    from conformance.judging.document.spec import SpecError as SpecError
    from conformance.judging.exceptions import ConformanceError as ConformanceError
    from conformance.judging.requirements import Context as Context
    from conformance.judging.requirements import Level as Level
    from conformance.judging.requirements import Requirement as Requirement
    from conformance.judging.requirements import Unsupported as Unsupported
    from conformance.judging.requirements import Violation as Violation
    from conformance.judging.requirements import requirement as requirement
    from conformance.judging.verdict.decision import decide as decide
    from conformance.judging.verdict.record import RunRecord as RunRecord
    from conformance.judging.verdict.record import ScenarioRun as ScenarioRun
    from conformance.judging.verdict.record import SkipCause as SkipCause
    from conformance.judging.verdict.results import Finding as Finding
    from conformance.judging.verdict.results import Results as Results
    from conformance.judging.verdict.verdict import Verdict as Verdict
    from conformance.judging.wire.case import Case as Case
    from conformance.judging.wire.exchange import Exchange as Exchange
    from conformance.judging.wire.exchange import Headers as Headers
    from conformance.judging.wire.wire import exchange_from_transcript as exchange_from_transcript
    from conformance.judging.wire.wire import exchange_from_wire as exchange_from_wire
    from conformance.run.assembly import BadInput as BadInput
    from conformance.run.client import Client as Client
    from conformance.run.engine import Run as Run
    from conformance.run.engine import execute as execute
    from conformance.run.fetch import load_spec as load_spec
    from conformance.run.item import ItemRun as ItemRun
    from conformance.run.scenarios import SCENARIOS as SCENARIOS
    from conformance.run.scenarios import Scenario as Scenario
    from conformance.run.session import Settings as Settings
    from conformance.run.session import Setup as Setup

__version__ = VERSION

_EXPORTS = {
    "load_spec": "conformance.run.fetch",
    "Spec": "conformance.judging.document.spec",
    "SpecError": "conformance.judging.document.spec",
    "Case": "conformance.judging.wire.case",
    "Exchange": "conformance.judging.wire.exchange",
    "Headers": "conformance.judging.wire.exchange",
    "exchange_from_wire": "conformance.judging.wire.wire",
    "exchange_from_transcript": "conformance.judging.wire.wire",
    "Client": "conformance.run.client",
    "ConformanceError": "conformance.judging.exceptions",
    "Context": "conformance.judging.requirements",
    "Level": "conformance.judging.requirements",
    "Requirement": "conformance.judging.requirements",
    "Violation": "conformance.judging.requirements",
    "Unsupported": "conformance.judging.requirements",
    "requirement": "conformance.judging.requirements",
    "Settings": "conformance.run.session",
    "Run": "conformance.run.engine",
    "ItemRun": "conformance.run.item",
    "execute": "conformance.run.engine",
    "Setup": "conformance.run.session",
    "BadInput": "conformance.run.assembly",
    "run_suite": "conformance.front.runner",
    "Outcome": "conformance.front.runner",
    "Scenario": "conformance.run.scenarios",
    "SCENARIOS": "conformance.run.scenarios",
    "RunRecord": "conformance.judging.verdict.record",
    "ScenarioRun": "conformance.judging.verdict.record",
    "SkipCause": "conformance.judging.verdict.record",
    "Verdict": "conformance.judging.verdict.verdict",
    "decide": "conformance.judging.verdict.decision",
    "Results": "conformance.judging.verdict.results",
    "Finding": "conformance.judging.verdict.results",
}
__all__ = ["__version__", "judge", *_EXPORTS]


def judge(spec: Spec, exchange: Exchange, related: tuple[Exchange, ...] = ()) -> list[Finding]:
    """Judge one (recorded) exchange by every registered requirement that applies,
    the provider's own (``requirement``) included, as a run judges it: a 429 by the
    rate-limit requirements alone, and one defect, one finding (a failure resting on a
    witness this exchange shows wrong is withheld: conformance.judging.verdict.attribution)."""
    from conformance.judging.judge import judge_alone

    return judge_alone(spec, exchange, related)


def __getattr__(name: str) -> object:
    # Runtime side of the imports above (PEP 562): typed for checkers by those imports.
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'conformance' has no attribute {name!r}")
