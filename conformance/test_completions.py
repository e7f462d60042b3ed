"""Non-streamed completions: generated valid, edge and invalid requests, and the stop probe.

Each test plays one scenario of conformance/scenarios.py (named like the test).
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance import scenarios as s
from conformance.plugin import Suite, parametrized

pytestmark = pytest.mark.conformance


@parametrized(s.VALID_REQUESTS)
def test_valid_requests(conformance: Suite, param: Any) -> None:
    conformance.play(s.VALID_REQUESTS, param)


@parametrized(s.EDGE_REQUESTS)
def test_edge_requests(conformance: Suite, param: Any) -> None:
    conformance.play(s.EDGE_REQUESTS, param)


@parametrized(s.INVALID_REQUESTS)
def test_invalid_requests(conformance: Suite, param: Any) -> None:
    conformance.play(s.INVALID_REQUESTS, param)


def test_stop_probe(conformance: Suite) -> None:
    conformance.play(s.STOP_PROBE)
