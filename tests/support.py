"""Shared test helpers: reference targets with faults, and judging one case on them."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from openapi_schema_validator import (
    OAS30Validator,
    OAS31Validator,
    oas30_format_checker,
    oas31_format_checker,
)

from conformance.judging.checks import load_checks
from conformance.judging.document.spec import Spec, load_spec
from conformance.judging.requirements import REGISTRY
from conformance.judging.verdict.results import Finding, evaluate
from conformance.judging.wire.case import Case
from conformance.judging.wire.exchange import Exchange
from conformance.reference import ReferenceServer
from conformance.run.client import Client, Limits

#: Whether this session runs the exhaustive tier (``-m exhaustive``, set by conftest.py):
#: Hypothesis properties then draw their full example counts (see :func:`examples`).
EXHAUSTIVE = False


def examples(full: int) -> int:
    """A property's example count: ``full`` in the exhaustive tier, a fifth of it (at least
    20) in the default tier, whose wall time a contributor waits for on every change."""
    return full if EXHAUSTIVE else max(20, full // 5)


def plain_validator(schema: Any, is_31: bool) -> Any:
    """openapi-schema-validator's own validator of ``schema``, without the suite's shortcuts
    (conformance/judging/document/quick_schema.py, sure_valid.py): what they are compared with."""
    if is_31:
        return OAS31Validator(schema, format_checker=oas31_format_checker)
    return OAS30Validator(schema, format_checker=oas30_format_checker)


MODEL = "reference-model"
API_KEY = "sk-test-" + "5ecret" * 4
FAST_LIMITS = Limits(ttfb=5.0, gap=2.0, total=10.0)


@dataclass
class Target:
    """A running reference target and a client pointed at it."""

    spec: Spec
    server: ReferenceServer
    client: Client

    def send(self, case: Case) -> Exchange:
        return self.client.send(case)

    def judge(self, case: Case, related: tuple[Exchange, ...] = ()) -> dict[str, Finding]:
        """Send ``case`` and judge it; findings by requirement ID."""
        return judge(self.spec, self.send(case), related)


class Targets:
    """Starts reference targets on demand, one per (flavor, faults), stopped at the end."""

    def __init__(self) -> None:
        self._running: dict[tuple[str, frozenset[str], Limits], Target] = {}

    def get(self, flavor: str, *faults: str, limits: Limits = FAST_LIMITS) -> Target:
        key = (flavor, frozenset(faults), limits)
        if key not in self._running:
            spec = load_spec(flavor)
            server = ReferenceServer(flavor, api_key=API_KEY, faults=frozenset(faults))
            url = server.start()
            client = Client(url, api_key=API_KEY, media_type=spec.request_media_type, limits=limits)
            self._running[key] = Target(spec, server, client)
        return self._running[key]

    def stop(self) -> None:
        # In parallel: each server takes a moment to shut down, and tests start many.
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(_stop, self._running.values()))
        self._running.clear()


def _stop(target: Target) -> None:
    target.client.close()
    target.server.stop()


def target_args(url: str) -> tuple[str, ...]:
    """Suite options that point the suite at a reference target started by the tests."""
    return ("--target-url", url, "--model", MODEL, "--api-key", API_KEY)


def judge(spec: Spec, exchange: Exchange, related: tuple[Exchange, ...] = ()) -> dict[str, Finding]:
    load_checks()
    return {f.requirement: f for f in evaluate(list(REGISTRY.values()), spec, exchange, related)}


def failed(findings: dict[str, Finding]) -> set[str]:
    return {rid for rid, f in findings.items() if f.outcome == "failed"}


def must_failures(findings: dict[str, Finding], spec: Spec | None = None) -> set[str]:
    """The failed requirements that are MUSTs (under ``spec``, when given)."""
    return {
        rid
        for rid in failed(findings)
        if (REGISTRY[rid].under(spec) if spec else REGISTRY[rid]).level.value == "MUST"
    }


def case(mode: str = "valid", **body: Any) -> Case:
    """A cheap, deterministic (temperature 0) request for the reference model."""
    full = {"model": MODEL, "prompt": "Hello there", "max_tokens": 4, "temperature": 0, **body}
    return Case(full, mode=mode, label=f"{mode} test case")  # type: ignore[arg-type]


def all_failed(results: Iterable[dict[str, Finding]]) -> set[str]:
    out: set[str] = set()
    for findings in results:
        out |= failed(findings)
    return out


def meta_of(results: Any) -> dict[str, Any]:
    """results.json's ``meta`` of ``results``, as written (RunInfo and the verdict)."""
    return dict(results.to_json()["meta"])


def set_meta(results: Any, **changes: Any) -> Any:
    """``results`` with these results.json ``meta`` keys written (None removes one), read
    back typed as a results.json written so would be (RunInfo, Verdict)."""
    from conformance.judging.verdict.run_info import RunInfo
    from conformance.judging.verdict.verdict import Verdict

    meta = {**meta_of(results), **changes}
    meta = {k: v for k, v in meta.items() if v is not None or k not in changes}
    results.info = RunInfo.from_json(meta)
    results.verdict = Verdict.from_json(meta)
    return results


def capability_table(table: dict[str, dict[str, str]]) -> dict[str, Any]:
    """A capability table as results.json writes it, typed (Results.capabilities)."""
    from conformance.judging.verdict.results import Capability

    return {feature: Capability.from_json(entry) for feature, entry in table.items()}


def declines_unnamed(
    capabilities: dict[str, Any],
    not_applicable: dict[str, str],
    exercised: set[str],
    spec: Spec,
) -> list[str]:
    """The MUSTs a capability decline left unexercised whose not-applicable reason does not
    name the decline (the feature and the target's message), one line each; empty when all
    do. ``capabilities``: feature -> {"outcome", "detail"} as results.json keeps them."""
    declined = {f: e for f, e in capabilities.items() if e["outcome"] == "declined"}
    wrong = []
    for rid, req in REGISTRY.items():
        if req.under(spec).level.value != "MUST" or rid in exercised:
            continue
        hit = [f for f in declined for need in req.needs if f == need or f.startswith(need + ":")]
        reason = not_applicable.get(rid, "")
        if hit and not (f"`{hit[0]}`" in reason and declined[hit[0]]["detail"] in reason):
            wrong.append(f"{rid}: {reason or 'not listed as not applicable'}")
    return wrong
