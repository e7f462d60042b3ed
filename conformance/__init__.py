"""completions-conformance: contract tests for OpenAI-compatible ``POST /v1/completions``.

The package holds the core (spec model, cases, client, SSE reader, checks and the
requirement registry), the runner-agnostic engine, the pytest plugin, the suite that
``pytest conformance`` collects, and the embedded reference target. See ARCHITECTURE.md.

The public API, for tools that drive a run or judge recorded exchanges (imported on
first use, so that loading the pytest plugin stays cheap)::

    spec = conformance.load_spec("aihubmix")                      # a Spec
    outcome = conformance.run_suite(conformance.Setup(...))       # .results, .verdict
    findings = conformance.judge(spec, exchange)                  # list[Finding]
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "load_spec": "conformance.spec",
    "Spec": "conformance.spec",
    "Case": "conformance.case",
    "Exchange": "conformance.exchange",
    "Client": "conformance.client",
    "Settings": "conformance.engine",
    "Run": "conformance.engine",
    "ItemRun": "conformance.engine",
    "execute": "conformance.engine",
    "Setup": "conformance.assembly",
    "assemble": "conformance.assembly",
    "run_suite": "conformance.assembly",
    "BadInput": "conformance.assembly",
    "Scenario": "conformance.scenarios",
    "SCENARIOS": "conformance.scenarios",
    "Verdict": "conformance.verdict",
    "decide": "conformance.verdict",
    "Results": "conformance.results",
    "Finding": "conformance.results",
}
__all__ = ["__version__", "judge", *_EXPORTS]


def judge(spec: Any, exchange: Any, related: tuple[Any, ...] = ()) -> list[Any]:
    """Judge one (recorded) exchange by every registered requirement that applies."""
    from conformance.requirements import REGISTRY, load_checks
    from conformance.results import evaluate

    load_checks()
    return evaluate(list(REGISTRY.values()), spec, exchange, related)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'conformance' has no attribute {name!r}")
