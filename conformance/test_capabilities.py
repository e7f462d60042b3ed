"""The capability table: one probe per optional feature, each a minimal request plus it.

Probes are valid requests, so every requirement judges them too (a MUST failure on a probe
fails this test like any other); the table itself says offered, declined, ignored or broken
per feature (conformance.capabilities).
"""

from __future__ import annotations

import pytest

from conformance import capabilities
from conformance.engine import ItemRun
from conformance.exchange import Exchange
from conformance.results import Finding

pytestmark = pytest.mark.conformance


def _findings(conformance: ItemRun, exchange: Exchange) -> list[Finding]:
    return [f for f, ex in conformance.failures if ex is exchange]


def test_capabilities(conformance: ItemRun) -> None:
    s = conformance.settings
    for case in capabilities.capability_probes(conformance.spec, s.model, s.max_tokens):
        exchange = conformance.send(case)
        if exchange is None:
            break  # budget spent or rate limited: the verdict says so
        related: tuple[Exchange, ...] = ()
        if capabilities.feature_of(case) == "seed" and exchange.status == 200:
            related = (exchange,)
            again = conformance.send(capabilities.seed_twin(case), related=related)
            if again is None:
                break
            exchange = again
        capabilities.record(
            conformance.results, case, exchange, _findings(conformance, exchange), related
        )
    conformance.verdict()
