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

if TYPE_CHECKING:
    from conformance.assembly import BadInput as BadInput
    from conformance.assembly import Setup as Setup
    from conformance.case import Case as Case
    from conformance.client import Client as Client
    from conformance.engine import Run as Run
    from conformance.engine import Settings as Settings
    from conformance.engine import execute as execute
    from conformance.exceptions import ConformanceError as ConformanceError
    from conformance.exchange import Exchange as Exchange
    from conformance.exchange import Headers as Headers
    from conformance.item import ItemRun as ItemRun
    from conformance.judging import RunRecord as RunRecord
    from conformance.judging import ScenarioRun as ScenarioRun
    from conformance.judging import SkipCause as SkipCause
    from conformance.judging import Verdict as Verdict
    from conformance.judging import decide as decide
    from conformance.judging.wire import exchange_from_transcript as exchange_from_transcript
    from conformance.judging.wire import exchange_from_wire as exchange_from_wire
    from conformance.requirements import Context as Context
    from conformance.requirements import Level as Level
    from conformance.requirements import Requirement as Requirement
    from conformance.requirements import Unsupported as Unsupported
    from conformance.requirements import Violation as Violation
    from conformance.requirements import requirement as requirement
    from conformance.results import Finding as Finding
    from conformance.results import Results as Results
    from conformance.runner import Outcome as Outcome
    from conformance.runner import run_suite as run_suite
    from conformance.scenarios import SCENARIOS as SCENARIOS
    from conformance.scenarios import Scenario as Scenario
    from conformance.spec import Spec as Spec
    from conformance.spec import SpecError as SpecError
    from conformance.spec import load_spec as load_spec

__version__ = "0.1.0"

_EXPORTS = {
    "load_spec": "conformance.spec",
    "Spec": "conformance.spec",
    "SpecError": "conformance.spec",
    "Case": "conformance.case",
    "Exchange": "conformance.exchange",
    "Headers": "conformance.exchange",
    "exchange_from_wire": "conformance.judging.wire",
    "exchange_from_transcript": "conformance.judging.wire",
    "Client": "conformance.client",
    "ConformanceError": "conformance.exceptions",
    "Context": "conformance.requirements",
    "Level": "conformance.requirements",
    "Requirement": "conformance.requirements",
    "Violation": "conformance.requirements",
    "Unsupported": "conformance.requirements",
    "requirement": "conformance.requirements",
    "Settings": "conformance.engine",
    "Run": "conformance.engine",
    "ItemRun": "conformance.item",
    "execute": "conformance.engine",
    "Setup": "conformance.assembly",
    "BadInput": "conformance.assembly",
    "run_suite": "conformance.runner",
    "Outcome": "conformance.runner",
    "Scenario": "conformance.scenarios",
    "SCENARIOS": "conformance.scenarios",
    "RunRecord": "conformance.judging",
    "ScenarioRun": "conformance.judging",
    "SkipCause": "conformance.judging",
    "Verdict": "conformance.judging",
    "decide": "conformance.judging",
    "Results": "conformance.results",
    "Finding": "conformance.results",
}
__all__ = ["__version__", "judge", *_EXPORTS]


def judge(spec: Spec, exchange: Exchange, related: tuple[Exchange, ...] = ()) -> list[Finding]:
    """Judge one (recorded) exchange by every registered requirement that applies,
    the provider's own (``requirement``) included, as a run judges it: a 429 by the
    rate-limit requirements alone, and one defect, one finding (a failure resting on a
    witness this exchange shows wrong is withheld: conformance.attribution)."""
    from conformance.judging.judge import judge_alone

    return judge_alone(spec, exchange, related)


def __getattr__(name: str) -> object:
    # Runtime side of the imports above (PEP 562): typed for checkers by those imports.
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'conformance' has no attribute {name!r}")
